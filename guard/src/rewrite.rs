//! Applying a plan: one-shot rewrites and the exact streaming rewriter.
//!
//! This module owns turning matches into output: keep, swap (placeholder → value), redact
//! (value → placeholder) or refuse, and counting what it did. It must never decide a grant (the
//! [`Plan`] says) and never print what it rewrites; buffers that may hold a value are zeroized.
//!
//! Streaming is exact whatever the chunking: a rewriter's output over any split of a stream is
//! the one-shot rewrite of the whole stream. It holds back only a tail that may still grow into
//! a match (less than [`Guard::max_pattern_len`] bytes), so output that cannot hold a secret
//! flows at once.

use std::fmt;
use std::sync::Arc;

use zeroize::{Zeroize, Zeroizing};

use crate::{Form, Guard, GuardError, OnPlaceholder, OnValue, Plan, RefusedMatch, SecretId};

/// What one secret's matches became during a rewrite.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Counts {
    /// Placeholders replaced by the value.
    pub swapped: u64,
    /// Values (in any encoding) replaced by the placeholder.
    pub redacted: u64,
    /// Placeholders left as they were.
    pub kept_placeholders: u64,
    /// Values left as they were (toward a granted host).
    pub kept_values: u64,
}

impl Counts {
    /// Whether nothing was counted.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }

    fn add(&mut self, other: &Counts) {
        self.swapped += other.swapped;
        self.redacted += other.redacted;
        self.kept_placeholders += other.kept_placeholders;
        self.kept_values += other.kept_values;
    }
}

/// Per-secret counts of what a rewrite did, for the audit log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    counts: Vec<Counts>,
}

impl Tally {
    /// The counts for one secret (zero when it was never matched).
    pub fn get(&self, id: SecretId) -> Counts {
        self.counts.get(id.index()).copied().unwrap_or_default()
    }

    /// Every secret with a non-zero count, in id order.
    pub fn iter(&self) -> impl Iterator<Item = (SecretId, Counts)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.is_zero())
            .map(|(i, c)| (SecretId(u32::try_from(i).unwrap_or(u32::MAX)), *c))
    }

    /// Whether nothing was matched.
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(Counts::is_zero)
    }

    /// The sums over every secret.
    pub fn total(&self) -> Counts {
        let mut total = Counts::default();
        for c in &self.counts {
            total.add(c);
        }
        total
    }

    /// Counts one redaction of `id` done outside a rewrite (a header dropped because its
    /// name held the value, say).
    pub fn add_redaction(&mut self, id: SecretId) {
        self.entry(id.index()).redacted += 1;
    }

    /// Adds another tally's counts to this one.
    pub fn merge(&mut self, other: &Tally) {
        for (i, c) in other.counts.iter().enumerate() {
            self.entry(i).add(c);
        }
    }

    fn entry(&mut self, index: usize) -> &mut Counts {
        if index >= self.counts.len() {
            self.counts.resize(index + 1, Counts::default());
        }
        &mut self.counts[index]
    }
}

/// The result of a one-shot rewrite: the new bytes and what was done.
///
/// # Secrets in memory
/// The bytes are zeroized on drop whenever they may hold a known value: when the tally counts
/// a swap (a value written in) or a kept value. Otherwise every match was redacted or was a
/// kept placeholder, and what is left is the caller's own text around them (the output of
/// [`Guard::redact`] is the text that is safe to show the sandbox), so clearing it would only
/// cost time (one more pass over the whole output).
pub struct Rewritten {
    bytes: Vec<u8>,
    tally: Tally,
}

impl Drop for Rewritten {
    fn drop(&mut self) {
        if self.holds_value() {
            self.bytes.zeroize();
        }
    }
}

impl Rewritten {
    fn new(mut bytes: Zeroizing<Vec<u8>>, tally: Tally) -> Self {
        Self {
            bytes: std::mem::take(&mut *bytes),
            tally,
        }
    }

    /// Whether the bytes may hold a known value (swapped in, or kept as it was).
    fn holds_value(&self) -> bool {
        let total = self.tally.total();
        total.swapped + total.kept_values > 0
    }

    /// The rewritten bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The rewritten bytes, still zeroized on drop.
    pub fn into_bytes(mut self) -> Zeroizing<Vec<u8>> {
        Zeroizing::new(std::mem::take(&mut self.bytes))
    }

    /// What was swapped, redacted and kept, per secret.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// Whether anything was replaced (swapped or redacted).
    pub fn is_changed(&self) -> bool {
        let t = self.tally.total();
        t.swapped + t.redacted > 0
    }

    /// Adds what a rewrite of a part of these bytes did (a part the caller decoded, such as
    /// HTTP `Basic` credentials, and rewrote on its own) to this tally. The bytes are then
    /// cleared on drop whenever either rewrite may have left a value.
    pub fn absorb(&mut self, inner: &Tally) {
        self.tally.merge(inner);
    }

    /// These bytes with `range` replaced by `replacement` (the caller's encoding of an inner
    /// rewrite, [`Rewritten::absorb`]ed first), the tally kept, and cleared on drop by it.
    ///
    /// # Panics
    /// When `range` is not within the bytes, as slicing would.
    pub fn splice(self, range: std::ops::Range<usize>, replacement: &[u8]) -> Rewritten {
        let mut bytes = Zeroizing::new(Vec::with_capacity(
            self.bytes.len() - range.len() + replacement.len(),
        ));
        bytes.extend_from_slice(&self.bytes[..range.start]);
        bytes.extend_from_slice(replacement);
        bytes.extend_from_slice(&self.bytes[range.end..]);
        Rewritten::new(bytes, self.tally.clone())
    }
}

impl fmt::Debug for Rewritten {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rewritten")
            .field("len", &self.bytes.len())
            .field("tally", &self.tally)
            .finish_non_exhaustive()
    }
}

impl Guard {
    /// Rewrites `input` under `plan` in one go.
    ///
    /// # Errors
    /// [`GuardError::Refused`] at the first match the plan refuses; nothing is returned then.
    pub fn rewrite(&self, input: &[u8], plan: &Plan) -> Result<Rewritten, GuardError> {
        let mut bytes = Zeroizing::new(Vec::with_capacity(input.len()));
        let tally = self.rewrite_into(input, plan, &mut bytes)?;
        Ok(Rewritten::new(bytes, tally))
    }

    /// [`Guard::rewrite`], appending the output to a buffer the caller owns (and may reuse, as
    /// a proxy does per connection), and returning what was done.
    ///
    /// # Errors
    /// [`GuardError::Refused`] at the first match the plan refuses; nothing is appended then.
    ///
    /// # Secrets in memory
    /// A swap writes a value into `out`: keep it in zeroized memory (a
    /// `Zeroizing<Vec<u8>>` derefs to one) with room for the output, since a `Vec` that grows
    /// leaves its old contents behind.
    pub fn rewrite_into(
        &self,
        input: &[u8],
        plan: &Plan,
        out: &mut Vec<u8>,
    ) -> Result<Tally, GuardError> {
        let mark = out.len();
        let mut tally = Tally::default();
        match step(
            self,
            plan,
            input,
            Limit::At(input.len()),
            0,
            out,
            &mut tally,
        ) {
            Ok(_) => Ok(tally),
            Err(refusal) => {
                // Nothing of a refused input leaves, swapped values included.
                out[mark..].zeroize();
                out.truncate(mark);
                Err(GuardError::Refused(refusal))
            }
        }
    }

    /// Every known value (in every encoding) in `input` replaced by its placeholder.
    pub fn redact(&self, input: &[u8]) -> Rewritten {
        let mut bytes = Zeroizing::new(Vec::with_capacity(input.len()));
        let tally = self.redact_into(input, &mut bytes);
        Rewritten::new(bytes, tally)
    }

    /// [`Guard::redact`], appending the output to a buffer the caller owns, and returning what
    /// was redacted.
    pub fn redact_into(&self, input: &[u8], out: &mut Vec<u8>) -> Tally {
        let mut tally = Tally::default();
        // A redact-all plan refuses nothing, so the step cannot fail.
        let _ = step(
            self,
            &Plan::redact_all(self),
            input,
            Limit::At(input.len()),
            0,
            out,
            &mut tally,
        );
        tally
    }

    /// [`Guard::redact`] for text: the result is text again (bytes a replacement left invalid,
    /// which only a non-UTF-8 secret can cause, become U+FFFD).
    pub fn redact_str(&self, input: &str) -> String {
        self.redact_string(input.to_owned())
    }

    /// [`Guard::redact_str`] for text the caller owns, handed back as it is when it holds
    /// nothing: most text holds nothing (every audit field goes through here), and then
    /// there is no plan to make and nothing to copy.
    ///
    /// Text is redacted in any letter case too: text quoted into a log line, an audit event
    /// or a refusal has often been case-folded on the way (a host name, a TLS SNI, a coding
    /// name), where the exact scan alone would miss a value in it.
    pub fn redact_string(&self, text: String) -> String {
        let text = if self.is_match(text.as_bytes()) {
            String::from_utf8_lossy(self.redact(text.as_bytes()).bytes()).into_owned()
        } else {
            text
        };
        match self.redact_case_folded(text.as_bytes()) {
            Some(folded) => String::from_utf8_lossy(&folded).into_owned(),
            None => text,
        }
    }
}

/// Where a [`step`] stops deciding matches.
#[derive(Debug, Clone, Copy)]
enum Limit {
    /// Every match that starts before this offset.
    At(usize),
    /// Every match that the buffer alone decides: those starting before
    /// [`Guard::hold_from`]. Worked out only once the search has reached the buffer's tail:
    /// a chunk's tail is not in cache before that, and testing it first was measured at a
    /// quarter of a streamed chunk's time.
    Held,
}

/// Rewrites `buf`, deciding every match that starts before `limit`, appending the output to
/// `out`. Returns how many bytes of `buf` are done: at least the limit, more when a decided
/// match runs past it. `base` is `buf`'s offset in the stream, for refusals.
fn step(
    guard: &Guard,
    plan: &Plan,
    buf: &[u8],
    limit: Limit,
    base: u64,
    out: &mut Vec<u8>,
    tally: &mut Tally,
) -> Result<usize, RefusedMatch> {
    let (mut limit, sure) = match limit {
        Limit::At(at) => (Some(at), at),
        // Whatever the hold, a match starting a longest pattern's length before the end is
        // decided by `buf` alone.
        Limit::Held => (
            None,
            buf.len()
                .saturating_sub(guard.max_pattern_len().saturating_sub(1)),
        ),
    };
    let mut emitted = 0;
    let mut covered = 0;
    for m in guard.matches(buf) {
        if m.start() >= sure && m.start() >= *limit.get_or_insert_with(|| guard.hold_from(buf)) {
            break;
        }
        covered = m.end();
        let info = guard.pattern(m.pattern().as_usize());
        let counts = tally.entry(info.secret.index());
        let refuse = || RefusedMatch {
            secret: info.secret,
            name: guard.name(info.secret).to_owned(),
            form: info.form,
            offset: base + m.start() as u64,
        };
        let replacement: Zeroizing<Vec<u8>> = match info.form {
            Form::Placeholder => match plan.on_placeholder(info.secret) {
                OnPlaceholder::Keep => {
                    counts.kept_placeholders += 1;
                    continue;
                }
                OnPlaceholder::Swap => {
                    counts.swapped += 1;
                    plan.swap_form().apply(guard.value(info.secret).expose())
                }
                OnPlaceholder::Refuse => return Err(refuse()),
            },
            Form::Value(_) => match plan.on_value(info.secret) {
                OnValue::Keep => {
                    counts.kept_values += 1;
                    continue;
                }
                OnValue::Redact => {
                    counts.redacted += 1;
                    Zeroizing::new(guard.placeholder(info.secret).as_bytes().to_vec())
                }
                OnValue::Refuse => return Err(refuse()),
            },
        };
        out.extend_from_slice(&buf[emitted..m.start()]);
        out.extend_from_slice(&replacement);
        emitted = m.end();
    }
    let limit = limit.unwrap_or_else(|| guard.hold_from(buf));
    let done = limit.max(covered);
    out.extend_from_slice(&buf[emitted..done]);
    Ok(done)
}

/// Appends to a zeroized buffer without leaving a copy behind when it grows.
fn append_zeroizing(buf: &mut Zeroizing<Vec<u8>>, data: &[u8]) {
    let needed = buf.len() + data.len();
    if needed > buf.capacity() {
        let mut bigger = Zeroizing::new(Vec::with_capacity(needed.max(buf.capacity() * 2)));
        bigger.extend_from_slice(buf);
        std::mem::swap(buf, &mut bigger);
    }
    buf.extend_from_slice(data);
}

/// Rewrites a stream chunk by chunk under one plan, exactly as a one-shot rewrite of the whole
/// stream would.
///
/// Feed chunks with [`Rewriter::push`], then call [`Rewriter::finish`] for the held-back tail.
/// After a refusal the rewriter is poisoned: every later call fails with
/// [`GuardError::Poisoned`].
///
/// # Resource usage
/// Holds back at most [`Guard::max_pattern_len`]` - 1` bytes, in zeroized memory, and copies
/// at most about twice that per chunk; the rest of a chunk is scanned in place.
pub struct Rewriter {
    guard: Arc<Guard>,
    plan: Plan,
    carry: Zeroizing<Vec<u8>>,
    offset: u64,
    tally: Tally,
    poisoned: bool,
}

impl fmt::Debug for Rewriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rewriter")
            .field("plan", &self.plan)
            .field("held_back", &self.carry.len())
            .field("offset", &self.offset)
            .field("tally", &self.tally)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Rewriter {
    /// A rewriter applying `plan` with `guard`.
    pub fn new(guard: Arc<Guard>, plan: Plan) -> Self {
        Self {
            guard,
            plan,
            carry: Zeroizing::new(Vec::new()),
            offset: 0,
            tally: Tally::default(),
            poisoned: false,
        }
    }

    /// A rewriter that redacts every known value to its placeholder (responses, a child's
    /// output, `sluice redact`). It never refuses.
    pub fn redactor(guard: Arc<Guard>) -> Self {
        let plan = Plan::redact_all(&guard);
        Self::new(guard, plan)
    }

    /// Rewrites `chunk`, appending to `out` what is decided; a tail that may still grow into a
    /// match is held back for the next call.
    ///
    /// # Errors
    /// [`GuardError::Refused`] when the plan refuses a match (nothing of this chunk is
    /// appended then, and the rewriter is poisoned); [`GuardError::Poisoned`] after that.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), GuardError> {
        self.guarded(out, |this, out| this.push_inner(chunk, out))
    }

    /// Rewrites the held-back tail, ending the stream, and returns what was done over the
    /// whole stream.
    ///
    /// # Errors
    /// As [`Rewriter::push`].
    pub fn finish(mut self, out: &mut Vec<u8>) -> Result<Tally, GuardError> {
        self.guarded(out, |this, out| {
            let carry = std::mem::take(&mut this.carry);
            step(
                &this.guard,
                &this.plan,
                &carry,
                Limit::At(carry.len()),
                this.offset,
                out,
                &mut this.tally,
            )?;
            this.offset += carry.len() as u64;
            Ok(())
        })?;
        Ok(std::mem::take(&mut self.tally))
    }

    /// Goes on with `guard` (redact-all), the held-back tail still undecided; returns what
    /// the old guard did (its ids). For a guard replaced by a superset (a reload): finishing
    /// the old one would write a held prefix of a value out as it is.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sluice_guard::{Guard, Placeholder, Rewriter, SecretValue};
    ///
    /// let guard = |values: &[&str]| -> Arc<Guard> {
    ///     let mut b = Guard::builder();
    ///     let p = Placeholder::parse("SLUICE_TOK_0123456789abcdef").unwrap();
    ///     let id = b.add("tok", p, SecretValue::from(values[0])).unwrap();
    ///     values[1..].iter().for_each(|v| b.add_retired(id, SecretValue::from(*v)).unwrap());
    ///     Arc::new(b.build().unwrap())
    /// };
    /// let mut out = Vec::new();
    /// let mut redactor = Rewriter::redactor(guard(&["old-value-1234"]));
    /// redactor.push(b"x old-val", &mut out)?; // "old-val" is held: it may be the value
    /// let (mut redactor, _) = redactor.rebase(guard(&["new-value-5678", "old-value-1234"]));
    /// redactor.push(b"ue-1234 y", &mut out)?;
    /// redactor.finish(&mut out)?;
    /// assert_eq!(out, b"x SLUICE_TOK_0123456789abcdef y");
    /// # Ok::<(), sluice_guard::GuardError>(())
    /// ```
    pub fn rebase(mut self, guard: Arc<Guard>) -> (Rewriter, Tally) {
        let tally = std::mem::take(&mut self.tally);
        let plan = Plan::redact_all(&guard);
        let next = Rewriter {
            guard,
            plan,
            carry: std::mem::take(&mut self.carry),
            offset: self.offset,
            tally: Tally::default(),
            poisoned: self.poisoned,
        };
        (next, tally)
    }

    /// What was done so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// How many bytes are held back, waiting for the next chunk.
    pub fn held_back(&self) -> usize {
        self.carry.len()
    }

    /// How many input bytes have been decided and written out.
    pub fn consumed(&self) -> u64 {
        self.offset
    }

    fn guarded(
        &mut self,
        out: &mut Vec<u8>,
        f: impl FnOnce(&mut Self, &mut Vec<u8>) -> Result<(), RefusedMatch>,
    ) -> Result<(), GuardError> {
        if self.poisoned {
            return Err(GuardError::Poisoned);
        }
        let mark = out.len();
        f(self, out).map_err(|refusal| {
            // Nothing of a refused chunk leaves, swapped values included.
            out[mark..].zeroize();
            out.truncate(mark);
            self.poisoned = true;
            self.carry.zeroize();
            GuardError::Refused(refusal)
        })
    }

    fn push_inner(&mut self, chunk: &[u8], out: &mut Vec<u8>) -> Result<(), RefusedMatch> {
        let mut rest = chunk;
        if !self.carry.is_empty() {
            // The junction: the held tail plus enough of the chunk to decide every match that
            // starts in the tail.
            let old = self.carry.len();
            let take = chunk.len().min(self.guard.max_pattern_len());
            append_zeroizing(&mut self.carry, &chunk[..take]);
            // With a longest pattern's length of the chunk behind it, and more of the chunk
            // after, every match that starts in the old tail is decided here and the rest of
            // the chunk is scanned in place; otherwise decide what the bytes allow.
            let limit = if take < chunk.len() {
                Limit::At(old)
            } else {
                Limit::Held
            };
            let done = step(
                &self.guard,
                &self.plan,
                &self.carry,
                limit,
                self.offset,
                out,
                &mut self.tally,
            )?;
            self.offset += done as u64;
            if take == chunk.len() || done < old {
                // Everything left is in the carry (the second case cannot happen while the
                // junction holds max_pattern_len bytes of the chunk, but stays correct).
                self.carry.drain(..done);
                append_zeroizing(&mut self.carry, &chunk[take..]);
                if take < chunk.len() {
                    let carry = std::mem::take(&mut self.carry);
                    return self.scan_in_place(&carry, out);
                }
                return Ok(());
            }
            rest = &chunk[done - old..];
            self.carry.zeroize();
        }
        self.scan_in_place(rest, out)
    }

    /// Rewrites `buf` (the carry being empty), keeping its undecided tail.
    fn scan_in_place(&mut self, buf: &[u8], out: &mut Vec<u8>) -> Result<(), RefusedMatch> {
        let done = step(
            &self.guard,
            &self.plan,
            buf,
            Limit::Held,
            self.offset,
            out,
            &mut self.tally,
        )?;
        self.offset += done as u64;
        append_zeroizing(&mut self.carry, &buf[done..]);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
