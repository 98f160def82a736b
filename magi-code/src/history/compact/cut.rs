//! Cuts that keep a text's start, or its first and last parts, each marked by a line saying
//! how many bytes were left out (`decisions.md` 45 and 46).

/// The line that marks a cut of `n` bytes.
#[must_use]
pub fn marker(n: usize) -> String {
    format!("[{n} bytes left out]")
}

/// The largest character boundary of `s` at or below `at`.
fn floor(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// The smallest character boundary of `s` at or above `at`.
fn ceil(s: &str, at: usize) -> usize {
    let mut at = at.min(s.len());
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `s` within `max` bytes: whole when it fits, else its start and a marker line. The marker
/// is sized for the whole length, so the result never passes `max` unless `max` is smaller
/// than the marker itself (then the marker alone).
#[must_use]
pub fn keep_start(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let keep = floor(s, max.saturating_sub(marker(s.len()).len() + 1));
    format!("{}\n{}", &s[..keep], marker(s.len() - keep))
}

/// `s` within `max` bytes: whole when it fits, else its first and last parts around a marker
/// line (the same bound as [`keep_start`]).
#[must_use]
pub fn keep_ends(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let room = max.saturating_sub(marker(s.len()).len() + 2);
    let head = floor(s, room - room / 2);
    let tail = ceil(s, s.len() - room / 2).max(head);
    format!("{}\n{}\n{}", &s[..head], marker(tail - head), &s[tail..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_that_fits_is_whole_and_one_byte_more_is_cut_within_the_bound() {
        let s = "a".repeat(100);
        assert_eq!(keep_start(&s, 100), s);
        assert_eq!(keep_ends(&s, 100), s);
        let t = keep_start(&s, 99);
        assert!(t.len() <= 99, "{t}");
        let kept = t.find('\n').unwrap();
        assert_eq!(&t[kept + 1..], marker(100 - kept));
        let e = keep_ends(&s, 99);
        assert!(e.len() <= 99, "{e}");
        let lines: Vec<&str> = e.split('\n').collect();
        assert_eq!(lines.len(), 3);
        let left = 100 - lines[0].len() - lines[2].len();
        assert_eq!(lines[1], marker(left));
        assert!(lines[0].len().abs_diff(lines[2].len()) <= 1);
    }

    #[test]
    fn cuts_fall_on_character_boundaries_and_a_tiny_bound_leaves_the_marker() {
        let s = "é".repeat(50);
        let t = keep_start(&s, 41);
        assert!(t.len() <= 41 && t.starts_with('é'), "{t}");
        let e = keep_ends(&s, 41);
        assert!(
            e.len() <= 41 && e.starts_with('é') && e.ends_with('é'),
            "{e}"
        );
        assert_eq!(keep_start(&s, 3), format!("\n{}", marker(100)));
        assert_eq!(keep_ends(&s, 3), format!("\n{}\n", marker(100)));
    }
}
