//! The guard's exact search: the q-gram prefilter picks the regions where a pattern may occur,
//! and the automaton finds, inside them, exactly the matches a full scan would.
//!
//! This module owns cutting a text into regions and the argument that searching them gives the
//! same leftmost-longest matches as the automaton's own scan of the whole text. It must never
//! skip a byte the argument does not cover: when in doubt, it scans with the automaton.
//!
//! # Why the regions give the full scan's answer
//! Let `max` be the longest pattern and `q`, `s` the filter's q-gram length and stride.
//!
//! 1. *Every occurrence lies inside a region.* An occurrence `[a, b)` holds a whole q-gram
//!    starting on the grid, at some `p` with `a <= p` and `p + q <= b` (the prefilter's
//!    guarantee). That probe passes, and since `b - a <= max`, the occurrence lies inside
//!    `p`'s window `[p + q - max, p + max)`. Windows that overlap are merged into one region,
//!    so the region that took `p` holds the occurrence.
//! 2. *Regions are disjoint and in order*: a region grows while a later probe's window starts
//!    before its end, and stops at the first grid position whose window would start at or
//!    after it; every later window starts later still.
//! 3. *Leftmost-longest decomposes over such regions.* The full scan keeps a cursor: from it,
//!    it takes the leftmost occurrence (the longest one starting there) and moves the cursor
//!    to that match's end. Take a region `[r0, r1)`. An occurrence that starts inside it lies
//!    in some region (1), so in this one (2). When the full scan takes its first match at or
//!    after `r0`, its cursor is at or before `r0` (its previous match lay in an earlier
//!    region), so that match is the leftmost-longest occurrence starting at or after `r0`: the
//!    one the automaton run on the region alone takes first. From there both see the same
//!    occurrences, those of the region, and take the same steps until none is left in it.
//!
//! The fallback keeps the argument: when a region grows to cover most of what is left of the
//! text (an input dense with near-misses), the automaton scans from that region's start to the
//! end of the text. No occurrence straddles the region's start (1), and the full scan's cursor
//! is at or before it (3), so the plain scan from there reports the rest of the full scan's
//! matches. Its cost is then the automaton's plus the probes made so far, never more.

use aho_corasick::{AhoCorasick, FindIter, Input, Match};

use crate::prefilter::QgramFilter;

/// Below this length a region never triggers the fallback: a short burst of near-misses is
/// cheaper to search region by region than to search everything after it.
pub(crate) const FALLBACK_MIN_REGION: usize = 4096;

/// The matches of the automaton over a text, leftmost-longest and non-overlapping, searched
/// region by region where the filter allows, with the whole automaton otherwise.
pub(crate) struct Matches<'g, 'h> {
    automaton: &'g AhoCorasick,
    filter: Option<&'g QgramFilter>,
    text: &'h [u8],
    max_len: usize,
    fallback_min: usize,
    /// The next grid position to probe.
    next_probe: usize,
    /// Matches of the region being searched (or of the rest of the text, after a fallback).
    current: Option<FindIter<'g, 'h>>,
    /// Whether nothing is left to probe: `current` is the last search.
    done: bool,
    /// Whether the fallback took over, so that tests can tell they reached it.
    #[cfg(test)]
    pub(crate) fell_back: bool,
}

impl<'g, 'h> Matches<'g, 'h> {
    /// Matches in `text`: with the filter when there is one, else with the automaton alone.
    /// `max_len` is the longest pattern; a region reaching `fallback_min` bytes and half of
    /// what is left of the text turns to a plain scan of the rest.
    pub(crate) fn new(
        automaton: &'g AhoCorasick,
        filter: Option<&'g QgramFilter>,
        text: &'h [u8],
        max_len: usize,
        fallback_min: usize,
    ) -> Self {
        Self {
            automaton,
            filter,
            text,
            max_len,
            fallback_min,
            next_probe: 0,
            current: None,
            // A guard with no secret matches nothing: skip the walk entirely (with no
            // pattern there is no prefilter, and the automaton would visit every byte).
            done: automaton.patterns_len() == 0,
            #[cfg(test)]
            fell_back: false,
        }
    }

    fn search(&self, from: usize, to: usize) -> FindIter<'g, 'h> {
        self.automaton
            .find_iter(Input::new(self.text).span(from..to))
    }

    /// The next region that may hold a match, as `(start, end, rest)`, `rest` saying that the
    /// fallback took over and the search runs from `start` to the end of the text. `None` when
    /// no probe is left that passes.
    fn next_region(&mut self, filter: &QgramFilter) -> Option<(usize, usize, bool)> {
        let n = self.text.len();
        let q = filter.q();
        let first = match filter.next_hit(self.text, self.next_probe, n) {
            Ok(p) => p,
            Err(next) => {
                self.next_probe = next;
                return None;
            }
        };
        // The hit's window (1); by (2) its start is at or past the previous region's end.
        let start = first.saturating_sub(self.max_len - q);
        let mut end = (first + self.max_len).min(n);
        let mut probe = first + filter.stride();
        loop {
            if end - start >= self.fallback_min.max((n - start) / 2) {
                return Some((start, n, true));
            }
            // A later hit at `p` widens the region iff its window starts before `end`, i.e.
            // `p + q - max < end`.
            match filter.next_hit(self.text, probe, end + self.max_len - q) {
                Ok(p) => {
                    end = (p + self.max_len).min(n);
                    probe = p + filter.stride();
                }
                Err(next) => {
                    self.next_probe = next;
                    return Some((start, end, false));
                }
            }
        }
    }
}

impl Iterator for Matches<'_, '_> {
    type Item = Match;

    fn next(&mut self) -> Option<Match> {
        loop {
            if let Some(found) = self.current.as_mut().and_then(Iterator::next) {
                return Some(found);
            }
            self.current = None;
            if self.done {
                return None;
            }
            let Some(filter) = self.filter else {
                self.done = true;
                self.current = Some(self.search(0, self.text.len()));
                continue;
            };
            match self.next_region(filter) {
                None => {
                    self.done = true;
                    return None;
                }
                Some((start, end, rest)) => {
                    #[cfg(test)]
                    {
                        self.fell_back |= rest;
                    }
                    self.done = rest;
                    self.current = Some(self.search(start, end));
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
