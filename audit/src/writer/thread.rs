//! The writer thread: the only owner of the file, `seq` and the chain. It writes what the
//! handles queue, in batches, and flushes each batch.
//!
//! When the disk refuses a write (full, say) the log fails: the handles refuse every new
//! record, and the proxy every request that would need one. The thread keeps what it
//! holds: the line that did not go in, the bytes the file did not take (a `BufWriter`
//! keeps what it could not write) and the records queued before the failure; it retries
//! every [`RETRY`], and when the disk takes them again they are written in order and the
//! log is healthy again. Nothing accepted is lost and nothing is written twice, so the
//! chain holds across the outage. A rotation the disk refused (the flush before it, or the
//! new file: a full disk, or no inode left) is retried the same way, the line that opens
//! the next segment held until it is done; a rotation that failed after its rename is
//! finished by the retry (`segments::rotate`). Fatal, for the rest of the run: a line
//! that cannot be serialized, and a failed sync (after one, the kernel may have dropped
//! what it could not write, and a second sync would not say so).

use std::collections::VecDeque;
use std::io::{self, BufWriter, Write};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};

use super::super::segments::{self, Segment};
use super::super::{Counts, EventKind, Line, genesis, line_hash, timestamp_now};
use super::{FLUSH_INTERVAL, Health, Msg, Sink, WRITE_BUFFER};

/// How often a failed log tries the disk again.
pub(crate) const RETRY: Duration = Duration::from_millis(200);

/// What failed, and so what a retry must do again.
enum Failed {
    /// A line is serialized in `Writer::line` but not in the buffer: write it, then flush.
    Line(EventKind),
    /// The buffer holds bytes the file did not take: flush.
    Flush,
    /// The file was due to rotate and could not: rotate, then write this line, the next
    /// segment's first (not serialized yet: it carries the new segment's number).
    Rotation(Box<Line>),
    /// Serializing: not retried.
    Fatal,
}

/// The state only the writer thread touches: the file, `seq` and the chain.
pub(super) struct Writer {
    out: BufWriter<Box<dyn Sink>>,
    /// The line being written (with its newline), kept to be reused, and to be written
    /// again when the disk refused it.
    line: Vec<u8>,
    run_id: String,
    next_seq: u64,
    prev: String,
    counts: Counts,
    /// The file being written, when the log is a file (not a test sink).
    segment: Option<Segment>,
}

impl Writer {
    pub(super) fn new(sink: Box<dyn Sink>, run_id: &str, segment: Option<Segment>) -> Writer {
        Writer {
            // Room for a whole batch, so that a batch is one write.
            out: BufWriter::with_capacity(WRITE_BUFFER, sink),
            line: Vec::new(),
            run_id: run_id.to_owned(),
            next_seq: 1,
            prev: genesis(run_id),
            counts: Counts::default(),
            segment,
        }
    }

    /// Stamps `seq`, `run_id` and `prev` on the line, writes it and advances the chain;
    /// first rotates the file when the segment is full or old enough, so that every
    /// segment ends with a whole line and the next begins with this one.
    pub(super) fn write(&mut self, line: Line) -> io::Result<()> {
        self.write_or_hold(line).map_err(|(err, _)| err)
    }

    pub(super) fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn write_or_hold(&mut self, mut line: Line) -> Result<(), (io::Error, Failed)> {
        let fatal = |err| (err, Failed::Fatal);
        if self.segment.as_ref().is_some_and(Segment::due) {
            // The segment ends flushed and synced. A failed flush keeps its bytes and is
            // tried again; a failed sync is not: the kernel may have dropped the pages it
            // could not write, and a second sync would not say so.
            if let Err(err) = self.out.flush() {
                return Err((err, Failed::Rotation(Box::new(line))));
            }
            self.out.get_mut().sync().map_err(fatal)?;
            match self.next_segment() {
                Ok(number) => line.segment = Some(number),
                Err(err) => return Err((err, Failed::Rotation(Box::new(line)))),
            }
        }
        line.seq = self.next_seq;
        // Lent to the line for its serialisation and taken back, not copied: two fewer
        // allocations per record (`put` replaces `prev` once the line is in).
        std::mem::swap(&mut line.run_id, &mut self.run_id);
        std::mem::swap(&mut line.prev, &mut self.prev);
        self.line.clear();
        let serialized = serde_json::to_writer(&mut self.line, &line);
        std::mem::swap(&mut line.run_id, &mut self.run_id);
        std::mem::swap(&mut line.prev, &mut self.prev);
        serialized.map_err(|e| fatal(io::Error::other(e)))?;
        self.line.push(b'\n');
        self.put(line.event)
            .map_err(|err| (err, Failed::Line(line.event)))
    }

    /// Renames the ended segment to its number and opens the next: that segment's number.
    /// May be tried again after a failure: a rename already done is not done twice
    /// (`segments::rotate`).
    fn next_segment(&mut self) -> io::Result<u64> {
        let Some(segment) = self.segment.as_mut() else {
            return Err(io::Error::other("only a log file rotates"));
        };
        let file = segments::rotate(&segment.path)?;
        self.out = BufWriter::with_capacity(WRITE_BUFFER, Box::new(file));
        segment.bytes = 0;
        segment.since = Instant::now();
        segment.number += 1;
        Ok(segment.number)
    }

    /// Puts the serialized line into the buffer, whole or not at all (a line is shorter
    /// than the buffer, and `BufWriter` takes nothing of it when it cannot make room), and
    /// advances the chain past it.
    fn put(&mut self, kind: EventKind) -> io::Result<()> {
        self.out.write_all(&self.line)?;
        let text = &self.line[..self.line.len() - 1];
        if let Some(segment) = self.segment.as_mut() {
            segment.bytes += self.line.len() as u64;
        }
        self.next_seq += 1;
        self.prev = line_hash(text);
        self.counts.add(kind);
        Ok(())
    }

    /// Writes batches until the log is closed or every handle is gone.
    ///
    /// The thread blocks on the queue only when everything it took is written and flushed.
    /// After the first record of a burst it sleeps [`FLUSH_INTERVAL`], then takes what
    /// gathered without blocking, writes it and flushes once. A busy proxy therefore wakes
    /// this thread once per batch, not once per event: a sender only pays for a wake-up
    /// when the writer is parked on an empty queue.
    pub(super) fn run(mut self, rx: &Receiver<Msg>, health: &Health) {
        // Records taken off the queue while the disk was failing, written first.
        let mut held: VecDeque<Msg> = VecDeque::new();
        loop {
            let first = match held.pop_front() {
                Some(msg) => msg,
                None => match rx.recv() {
                    Ok(msg) => msg,
                    Err(_) => break,
                },
            };
            std::thread::sleep(FLUSH_INTERVAL);
            let mut next = Some(first);
            let mut disconnected = false;
            // A backlog is written in batches too: flushed at least every FLUSH_INTERVAL.
            let mut batch_start = Instant::now();
            while let Some(msg) = next.take() {
                if batch_start.elapsed() >= FLUSH_INTERVAL {
                    if let Err(err) = self.out.flush() {
                        health.fail("flushing", &err);
                        if !self.recover(Failed::Flush, rx, health, &mut held) {
                            return;
                        }
                    }
                    batch_start = Instant::now();
                }
                match msg {
                    Msg::Event(line) => {
                        health.queued.fetch_sub(1, Ordering::Relaxed);
                        if let Err((err, failed)) = self.write_or_hold(*line) {
                            health.fail("writing a record", &err);
                            if !self.recover(failed, rx, health, &mut held) {
                                return;
                            }
                        }
                    }
                    Msg::Wake => {}
                    Msg::Close(reply) => {
                        // Records that found the queue full were accepted before `stop`.
                        let overflow = health.take_overflow();
                        if !overflow.is_empty() {
                            let mut first: VecDeque<Msg> = overflow
                                .into_iter()
                                .map(|line| Msg::Event(Box::new(line)))
                                .collect();
                            first.push_back(Msg::Close(reply));
                            first.append(&mut held);
                            held = first;
                        } else {
                            let result = self.finish().map_err(|err| {
                                health.fail("writing the stop record", &err);
                                health.error()
                            });
                            if result.is_ok() {
                                health.caught_up();
                            }
                            let _ = reply.send(result);
                            return;
                        }
                    }
                }
                next = match held.pop_front() {
                    Some(msg) => Some(msg),
                    None => match rx.try_recv() {
                        Ok(msg) => Some(msg),
                        // The queue is empty: the records that found it full come next.
                        Err(TryRecvError::Empty) => {
                            held.extend(
                                health
                                    .take_overflow()
                                    .into_iter()
                                    .map(|line| Msg::Event(Box::new(line))),
                            );
                            held.pop_front()
                        }
                        Err(TryRecvError::Disconnected) => {
                            disconnected = true;
                            None
                        }
                    },
                };
            }
            if let Err(err) = self.out.flush() {
                health.fail("flushing", &err);
                if !self.recover(Failed::Flush, rx, health, &mut held) {
                    return;
                }
            }
            if held.is_empty() {
                health.caught_up();
            }
            if disconnected {
                return;
            }
        }
        // Every handle dropped without closing: what was queued is written; no `stop`.
        if let Err(err) = self.out.flush() {
            health.fail("flushing", &err);
        }
    }

    /// After `failed`: retries every [`RETRY`] until the disk takes what it refused, then
    /// marks the log healthy again; records queued meanwhile are kept in `held`, in order.
    /// False when the log cannot go on: a failure that is not retried, the log closed
    /// (answered with the failure: no `stop` can be written after a gap in the disk), or
    /// every handle gone.
    fn recover(
        &mut self,
        failed: Failed,
        rx: &Receiver<Msg>,
        health: &Health,
        held: &mut VecDeque<Msg>,
    ) -> bool {
        let (mut line, mut opening) = match failed {
            Failed::Fatal => return false,
            Failed::Line(kind) => (Some(kind), None),
            Failed::Flush => (None, None),
            Failed::Rotation(first) => (None, Some(first)),
        };
        loop {
            loop {
                match rx.try_recv() {
                    Ok(Msg::Close(reply)) => {
                        let _ = reply.send(Err(health.error()));
                        return false;
                    }
                    Ok(msg) => held.push_back(msg),
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return false,
                }
            }
            std::thread::sleep(RETRY);
            if let Some(first) = opening.take() {
                match self.write_or_hold(*first) {
                    Ok(()) => {}
                    Err((_, Failed::Rotation(first))) => {
                        opening = Some(first);
                        continue;
                    }
                    Err((_, Failed::Line(kind))) => line = Some(kind),
                    Err((_, Failed::Flush | Failed::Fatal)) => return false,
                }
            }
            if let Some(kind) = line {
                if self.put(kind).is_err() {
                    continue;
                }
                line = None;
            }
            if self.out.flush().is_ok() {
                health.recover();
                return true;
            }
        }
    }

    /// Writes `stop`, flushes and syncs.
    fn finish(&mut self) -> io::Result<()> {
        let mut line = Line::bare(EventKind::Stop, timestamp_now(), &self.run_id);
        line.counts = Some(self.counts);
        self.write(line)?;
        self.out.flush()?;
        self.out.get_mut().sync()
    }
}
