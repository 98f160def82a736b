//! Cutting text at character boundaries: bounded copies and live chunks.

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
#[must_use]
pub fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// [`cut`] as an owned string.
#[must_use]
pub fn bounded(s: &str, max: usize) -> String {
    cut(s, max).to_owned()
}

/// The last `lines` lines of `s` (trailing white space dropped) within `max` bytes: when
/// they are longer, their end from a char boundary.
#[must_use]
pub fn tail(s: &str, lines: usize, max: usize) -> &str {
    let s = s.trim_end();
    if lines == 0 {
        return "";
    }
    let start = s
        .rmatch_indices('\n')
        .nth(lines - 1)
        .map_or(0, |(i, _)| i + 1);
    let mut from = start.max(s.len().saturating_sub(max));
    while !s.is_char_boundary(from) {
        from += 1;
    }
    &s[from..]
}

/// Splits text into live chunks of at most `max` bytes at character boundaries, aiming for
/// `pieces` chunks.
#[must_use]
pub fn live_chunks(text: &str, pieces: usize, max: usize) -> Vec<&str> {
    let target = (text.len() / pieces.max(1)).clamp(1, max);
    let mut out = Vec::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + target).min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == start {
            end = start + text[start..].chars().next().map_or(1, char::len_utf8);
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_is_the_last_lines_within_the_bytes() {
        assert_eq!(tail("a\nb\nc\n\n", 2, 100), "b\nc");
        assert_eq!(tail("a\nb\nc", 3, 100), "a\nb\nc");
        assert_eq!(tail("a\nb\nc", 8, 100), "a\nb\nc");
        assert_eq!(tail("a\nb", 0, 100), "");
        assert_eq!(
            tail("héllo\nwörld", 2, 4),
            "rld",
            "cut after the ö, not in it"
        );
        assert_eq!(tail("héllo\nwörld", 2, 5), "örld");
        assert_eq!(tail("", 8, 100), "");
    }

    const LIVE: usize = protocol_core::limits::LIVE_CHUNK_BYTES;

    #[test]
    fn chunks_are_bounded_and_whole() {
        let t = "é".repeat(5_000);
        let c = live_chunks(&t, 3, LIVE);
        assert!(c.len() >= 3);
        assert!(c.iter().all(|p| p.len() <= LIVE));
        assert_eq!(c.concat(), t);
        assert_eq!(live_chunks("hi", 3, 4000), ["h", "i"]);
        // The live chunk bound at its edge: 4,000 bytes is one chunk, 4,001 two.
        assert_eq!(live_chunks(&"a".repeat(LIVE), 1, LIVE).len(), 1);
        assert_eq!(live_chunks(&"a".repeat(LIVE + 1), 1, LIVE).len(), 2);
        assert!(live_chunks("", 3, 4000).is_empty());
    }

    #[test]
    fn bounds_cut_at_char_boundaries() {
        assert_eq!(bounded("ééé", 3), "é");
        assert_eq!(bounded("abc", 10), "abc");
        assert_eq!(cut("aé", 2), "a");
    }
}
