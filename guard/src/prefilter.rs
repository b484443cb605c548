//! The sampled q-gram prefilter: a cheap test that rules out, for most of a text, that any
//! pattern occurs there, so that the automaton only runs where one might.
//!
//! This module owns the filter's tables and its probe loop. It knows nothing of what a match
//! means, and it never decides one: a probe that passes only says "look here", and the exact
//! answer is always the automaton's (see `search.rs`). It must never print what it holds: its
//! tables are hashes of pattern bytes, kept in zeroized memory.
//!
//! # How it works
//! Every pattern is at least `min_len` bytes long. Each q-byte substring (q-gram) of every
//! pattern is hashed into a Bloom filter. The text is probed only at grid positions, multiples
//! of the stride `s = min_len - q + 1`: any occurrence of a pattern spans at least `min_len`
//! bytes, so it holds a whole q-gram that starts on the grid, and that q-gram is in the filter
//! (a Bloom filter has no false negatives). A stretch of grid positions that all fail the test
//! therefore holds no occurrence, except ones that reach past the stretch's ends.

use zeroize::Zeroizing;

/// Two hash multipliers (odd, from the golden ratio and from SplitMix64): their high bits mix
/// every bit of a key.
const MUL_A: u64 = 0x9e37_79b9_7f4a_7c15;
const MUL_B: u64 = 0xbf58_476d_1ce4_e5b9;

/// A Bloom filter over keys of up to 8 bytes, with two hash functions.
///
/// Sized at about 64 bits per key, so that each probe of a key it does not hold passes the
/// first bit test about once in 32 and both about once in 1000.
struct Bloom {
    bits: Zeroizing<Vec<u64>>,
    /// `64 - log2(bit count)`: the multiply's high bits index the table.
    shift: u32,
}

impl Bloom {
    /// The smallest and largest tables: 512 bytes and 2 MiB.
    const MIN_BITS_LOG2: u32 = 12;
    const MAX_BITS_LOG2: u32 = 24;

    fn with_capacity(keys: usize) -> Self {
        let want = keys.saturating_mul(64).max(1).next_power_of_two();
        let log2 = want
            .trailing_zeros()
            .clamp(Self::MIN_BITS_LOG2, Self::MAX_BITS_LOG2);
        Self {
            bits: Zeroizing::new(vec![0u64; 1usize << (log2 - 6)]),
            shift: 64 - log2,
        }
    }

    fn slots(&self, key: u64) -> (usize, usize) {
        // The shift leaves at most MAX_BITS_LOG2 bits, which fit in usize.
        let a = (key.wrapping_mul(MUL_A) >> self.shift) as usize;
        let b = (key.wrapping_mul(MUL_B) >> self.shift) as usize;
        (a, b)
    }

    fn insert(&mut self, key: u64) {
        let (a, b) = self.slots(key);
        self.bits[a >> 6] |= 1 << (a & 63);
        self.bits[b >> 6] |= 1 << (b & 63);
    }

    #[inline]
    fn may_contain(&self, key: u64) -> bool {
        let (a, b) = self.slots(key);
        self.bits[a >> 6] & (1 << (a & 63)) != 0 && self.bits[b >> 6] & (1 << (b & 63)) != 0
    }

    /// The table's size in bytes.
    fn memory_usage(&self) -> usize {
        self.bits.len() * 8
    }
}

/// The first `Q` bytes of `bytes` as a key (`Q` is 4 or 8, and `bytes` holds at least `Q`).
#[inline(always)]
fn key<const Q: usize>(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..Q].copy_from_slice(&bytes[..Q]);
    u64::from_le_bytes(word)
}

/// The sampled q-gram filter over a guard's patterns.
pub(crate) struct QgramFilter {
    grams: Bloom,
    /// The q-gram length: 4 or 8.
    q: usize,
    /// Distance between probed positions: `min_len - q + 1`.
    stride: usize,
}

impl QgramFilter {
    /// The filter over `patterns`, or `None` when one is too short to leave a useful stride
    /// (under 8 bytes; the guard's patterns never are).
    pub(crate) fn new<P: AsRef<[u8]>>(patterns: &[P]) -> Option<Self> {
        let min_len = patterns.iter().map(|p| p.as_ref().len()).min()?;
        if min_len < 8 {
            return None;
        }
        // Longer q-grams are much rarer in ordinary text (fewer needless automaton runs) but
        // shorten the stride; 8-grams pay once the stride stays long.
        let q = if min_len >= 24 { 8 } else { 4 };
        // Every gram counted, repeats too: the table comes out no smaller than it should.
        let count: usize = patterns.iter().map(|p| p.as_ref().len() + 1 - q).sum();
        let mut grams = Bloom::with_capacity(count);
        for pattern in patterns {
            for gram in pattern.as_ref().windows(q) {
                grams.insert(if q == 8 {
                    key::<8>(gram)
                } else {
                    key::<4>(gram)
                });
            }
        }
        Some(Self {
            grams,
            q,
            stride: min_len - q + 1,
        })
    }

    /// The q-gram length.
    pub(crate) fn q(&self) -> usize {
        self.q
    }

    /// The distance between probed positions.
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The table's size in bytes.
    pub(crate) fn memory_usage(&self) -> usize {
        self.grams.memory_usage()
    }

    /// The first grid position `p` with `from <= p < until` whose q-gram may be a pattern's,
    /// probing `from`, `from + stride`, ... (`from` must be on the grid). `Err` carries the first
    /// grid position not probed when none passes (positions without a whole q-gram left in
    /// `text` are never probed).
    #[inline]
    pub(crate) fn next_hit(&self, text: &[u8], from: usize, until: usize) -> Result<usize, usize> {
        if self.q == 8 {
            self.probe::<8>(text, from, until)
        } else {
            self.probe::<4>(text, from, until)
        }
    }

    #[inline(always)]
    fn probe<const Q: usize>(
        &self,
        text: &[u8],
        from: usize,
        until: usize,
    ) -> Result<usize, usize> {
        // Positions past `text.len() - Q` have no whole q-gram: nothing to probe there.
        let Some(last) = text.len().checked_sub(Q) else {
            return Err(from);
        };
        let end = until.min(last + 1);
        let mut p = from;
        while p < end {
            if self.grams.may_contain(key::<Q>(&text[p..])) {
                return Ok(p);
            }
            p += self.stride;
        }
        Err(p)
    }
}

/// How some pattern begins: a quick "no" before the exact prefix test that the streaming
/// rewriter runs on each position of a chunk's tail.
pub(crate) struct StartFilter {
    /// Which first two bytes, exactly: one bit per byte pair (8 KiB).
    pairs: Zeroizing<Vec<u64>>,
    /// Which first four bytes, approximately.
    starts: Bloom,
}

impl StartFilter {
    /// The filter over the first four bytes of each pattern, or `None` if one is shorter.
    pub(crate) fn new<P: AsRef<[u8]>>(patterns: &[P]) -> Option<Self> {
        if patterns.iter().any(|p| p.as_ref().len() < 4) {
            return None;
        }
        let mut pairs = Zeroizing::new(vec![0u64; 1024]);
        let mut starts = Bloom::with_capacity(patterns.len());
        for p in patterns {
            let pair = pair(p.as_ref());
            pairs[pair >> 6] |= 1 << (pair & 63);
            starts.insert(key::<4>(p.as_ref()));
        }
        Some(Self { pairs, starts })
    }

    /// Whether some pattern may begin with `bytes` (`bytes` holds at least 2; up to its first
    /// four are looked at).
    #[inline]
    pub(crate) fn may_start(&self, bytes: &[u8]) -> bool {
        let pair = pair(bytes);
        self.pairs[pair >> 6] & (1 << (pair & 63)) != 0
            && (bytes.len() < 4 || self.starts.may_contain(key::<4>(bytes)))
    }
}

/// The first two bytes of `bytes` as an index into a 2^16-bit table.
#[inline(always)]
fn pair(bytes: &[u8]) -> usize {
    usize::from(u16::from_le_bytes([bytes[0], bytes[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_gram_of_every_pattern_passes() {
        let patterns: Vec<&[u8]> = vec![b"abcdefgh", b"0123456789abcdefXYZ", b"SLUICE_TOKEN_0011"];
        let f = QgramFilter::new(&patterns).unwrap();
        assert_eq!(f.q(), 4);
        assert_eq!(f.stride(), 5);
        for p in &patterns {
            for at in 0..=p.len() - 4 {
                assert_eq!(f.next_hit(p, at, p.len()), Ok(at), "{at}");
            }
        }
    }

    #[test]
    fn long_patterns_take_8_grams_and_a_long_stride() {
        let patterns = [
            vec![b'k'; 30],
            b"0123456789012345678901234567890123".to_vec(),
        ];
        let f = QgramFilter::new(&patterns).unwrap();
        assert_eq!((f.q(), f.stride()), (8, 23));
        let text = b"................................kkkkkkkk";
        // Probing from 0 on a stride of 23: position 23 holds dots only; 46 is past the end.
        assert_eq!(f.next_hit(text, 0, usize::MAX), Err(46));
        assert_eq!(f.next_hit(text, 32, usize::MAX), Ok(32));
    }

    #[test]
    fn probing_stops_at_until_and_at_the_text_end() {
        let f = QgramFilter::new(&[b"zzzzzzzz"]).unwrap();
        let text = b"zzzz.....zzzz";
        assert_eq!(f.next_hit(text, 5, 9), Err(10));
        assert_eq!(f.next_hit(text, 0, 0), Err(0));
        assert_eq!(f.next_hit(b"zz", 0, 100), Err(0));
        assert_eq!(f.next_hit(text, 0, 100), Ok(0));
    }

    #[test]
    fn short_patterns_have_no_filter() {
        assert!(QgramFilter::new(&[b"1234567"]).is_none());
        assert!(QgramFilter::new::<&[u8]>(&[]).is_none());
        assert!(StartFilter::new(&[b"abc"]).is_none());
        let s = StartFilter::new(&[b"abcdefgh"]).unwrap();
        assert!(s.may_start(b"abcdzz"));
        assert!(s.may_start(b"abc"));
        assert!(s.may_start(b"ab"));
        assert!(!s.may_start(b"ba"));
        assert!(!s.may_start(b"abzd"));
    }

    #[test]
    fn unrelated_grams_mostly_fail() {
        let f = QgramFilter::new(&[b"the-secret-value-1234"]).unwrap();
        let passes = (0u32..10_000)
            .filter(|i| f.next_hit(format!("{i:08}").as_bytes(), 0, 1).is_ok())
            .count();
        assert!(passes < 100, "{passes} of 10000 passed");
    }
}
