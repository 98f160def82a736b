//! A room of projection bytes and parts a run may fill, charged as text serializes. Sessions
//! no longer bound their runs by it (`decisions.md` 48: the projection window shows the newest
//! turns that fit, so a run's bounds are its own): an attachment's runs get
//! [`Room::unbounded`]; [`Room::none`] stores nothing (an attachment released mid-run).

use super::projection::{Projection, CHUNK_BYTES, SNAPSHOT_BYTES, SNAPSHOT_PARTS};

/// Bytes one serialized part takes besides its text, LF included: keys, kind, message ID,
/// part number and flags (the longest, a `reasoning_summary` part of entry `m10000` at part
/// 10000, is 107 bytes with empty text).
pub const PART_OVERHEAD: usize = 128;
/// Text bytes a part is sure to hold when another follows: `chunk` fills a part until the next
/// character (at most 6 escaped bytes) would not fit.
const PART_TEXT: usize = CHUNK_BYTES - 6;
/// Kept back for the entries a run's end derives (a failed or cancelled turn's diagnostic, the
/// interrupted one) and for what redacting the whole reply again may change.
pub const RESERVE_BYTES: usize = 64 << 10;
/// Parts kept back likewise.
pub const RESERVE_PARTS: usize = 4;

/// The bytes `c` takes in a JSON string, as `serde_json` escapes it.
#[must_use]
pub const fn escaped_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// What an entry whose text escapes to `escaped` bytes adds to the projection (none for no
/// entry): bytes and parts.
const fn cost(escaped: Option<usize>) -> (usize, usize) {
    match escaped {
        None => (0, 0),
        Some(e) => {
            let parts = if e == 0 { 1 } else { e.div_ceil(PART_TEXT) };
            (e + parts * PART_OVERHEAD, parts)
        }
    }
}

/// One entry as the room charged it: `None` until its first text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry(Option<usize>);

/// Projection bytes and parts a run may still add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Room {
    bytes: usize,
    parts: usize,
}

impl Room {
    /// The room `p` leaves, less the reserve.
    #[must_use]
    pub fn left_by(p: &Projection) -> Self {
        Self {
            bytes: SNAPSHOT_BYTES.saturating_sub(p.bytes() + RESERVE_BYTES),
            parts: SNAPSHOT_PARTS.saturating_sub(p.entries.len() + RESERVE_PARTS),
        }
    }

    /// No projection bound (a subagent's history is never projected).
    #[must_use]
    pub const fn unbounded() -> Self {
        Self {
            bytes: usize::MAX,
            parts: usize::MAX,
        }
    }

    /// Bytes left.
    #[must_use]
    pub const fn bytes(&self) -> usize {
        self.bytes
    }

    /// No room at all (a projection already past its bound).
    #[must_use]
    pub const fn none() -> Self {
        Self { bytes: 0, parts: 0 }
    }

    /// Charges one whole entry whose text escapes to `escaped` bytes, plus `extra` serialized
    /// bytes (a card); false, charging nothing, when it does not fit.
    pub fn entry(&mut self, escaped: usize, extra: usize) -> bool {
        let (b, p) = cost(Some(escaped));
        let b = b.saturating_add(extra);
        if b > self.bytes || p > self.parts {
            return false;
        }
        self.bytes -= b;
        self.parts -= p;
        true
    }

    /// Adds to `entry` the longest prefix of `text` that fits (whole characters) and returns
    /// its length: `text.len()` when all of it fits.
    pub fn take(&mut self, entry: &mut Entry, text: &str) -> usize {
        let (b0, p0) = cost(entry.0);
        let mut escaped = entry.0.unwrap_or(0);
        let mut fits = 0;
        let mut charged = None;
        for (i, c) in text.char_indices() {
            let next = escaped + escaped_len(c);
            let (b, p) = cost(Some(next));
            if b - b0 > self.bytes || p - p0 > self.parts {
                break;
            }
            escaped = next;
            fits = i + c.len_utf8();
            charged = Some((b, p));
        }
        if let Some((b, p)) = charged {
            self.bytes -= b - b0;
            self.parts -= p - p0;
            entry.0 = Some(escaped);
        }
        fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(bytes: usize, parts: usize) -> Room {
        Room { bytes, parts }
    }

    #[test]
    fn the_first_text_of_an_entry_pays_for_its_part() {
        let mut r = room(PART_OVERHEAD + 3, 10);
        let mut e = Entry::default();
        assert_eq!(
            r.take(&mut e, "abcd"),
            3,
            "three bytes and one part's overhead fit"
        );
        assert_eq!(r.bytes(), 0);
        assert_eq!(
            r.take(&mut e, "d"),
            0,
            "the first byte past the bound does not"
        );
        // Escapes count as serialized: a quote is two bytes, a control character six.
        let mut r = room(PART_OVERHEAD + 9, 10);
        assert_eq!(r.take(&mut Entry::default(), "\"\u{1}x"), 3);
        let mut r = room(PART_OVERHEAD + 8, 10);
        assert_eq!(r.take(&mut Entry::default(), "\"\u{1}x"), 2);
        let mut r = room(PART_OVERHEAD + 7, 10);
        assert_eq!(
            r.take(&mut Entry::default(), "\"\u{1}x"),
            1,
            "never inside an escape"
        );
        // Whole characters only.
        let mut r = room(PART_OVERHEAD + 3, 10);
        assert_eq!(r.take(&mut Entry::default(), "aé"), 3);
        let mut r = room(PART_OVERHEAD + 2, 10);
        assert_eq!(r.take(&mut Entry::default(), "aé"), 1);
    }

    #[test]
    fn a_growing_entry_pays_for_each_new_part_and_the_part_bound_holds() {
        let mut r = room(usize::MAX / 2, 2);
        let mut e = Entry::default();
        let big = "x".repeat(PART_TEXT);
        assert_eq!(r.take(&mut e, &big), PART_TEXT, "one full part");
        assert_eq!(r.take(&mut e, &big), PART_TEXT, "a second");
        assert_eq!(r.take(&mut e, "y"), 0, "a third part is past the bound");
        // Bytes: a second part costs its overhead as soon as it starts.
        let mut r = room(PART_TEXT + 2 * PART_OVERHEAD, 10);
        let mut e = Entry::default();
        assert_eq!(r.take(&mut e, &big), PART_TEXT);
        assert_eq!(r.take(&mut e, "y"), 0);
        let mut r = room(PART_TEXT + 2 * PART_OVERHEAD + 1, 10);
        let mut e = Entry::default();
        assert_eq!(r.take(&mut e, &big), PART_TEXT);
        assert_eq!(r.take(&mut e, "yz"), 1);
    }

    #[test]
    fn whole_entries_fit_or_take_nothing() {
        let mut r = room(2 * PART_OVERHEAD + 10, 2);
        assert!(r.entry(5, 0));
        assert!(!r.entry(6, 0), "one byte past the bound");
        assert!(r.entry(5, 0), "nothing was charged");
        assert!(!r.entry(0, 0), "no part left");
        let mut r = room(PART_OVERHEAD + 10, 1);
        assert!(!r.entry(5, 6));
        assert!(r.entry(5, 5));
    }
}
