//! The bound of every model-facing tool output (runner.md section 2): 64 KiB, longer output
//! keeping its head and tail around a line that says how much was cut.

use super::text::cut;

/// Largest `output` kept per call.
pub const OUTPUT_BYTES: usize = 64 * 1024;
/// How much of each end a cut output keeps, at most.
pub const HALF_BYTES: usize = OUTPUT_BYTES / 2;
/// Appended (on its own line) to an output the tool itself cut short (a file read up to its
/// bound, the match or entry bound reached).
pub const TRUNCATED: &str = "[truncated]";

/// Bounds a model-facing output to [`OUTPUT_BYTES`] (runner.md section 2): longer output keeps
/// its first and last [`HALF_BYTES`] (less room for the markers) around a [`cut_line`]; output
/// the tool itself cut short (`truncated`) ends with a [`TRUNCATED`] line.
#[must_use]
pub fn bound_output(s: String, truncated: bool) -> String {
    if !truncated && s.len() <= OUTPUT_BYTES {
        return s;
    }
    bound_parts(&s, 0, "", truncated)
}

/// [`bound_output`] of a stream whose middle was already dropped: `head`, then `dropped` bytes
/// nobody kept, then `tail`. With nothing dropped, `head` and `tail` are contiguous.
#[must_use]
pub fn bound_parts(head: &str, dropped: u64, tail: &str, truncated: bool) -> String {
    let end_room = if truncated { TRUNCATED.len() + 1 } else { 0 };
    let whole = head.len() + tail.len();
    if dropped == 0 && whole + end_room <= OUTPUT_BYTES {
        let mut out = String::with_capacity(whole + end_room);
        out.push_str(head);
        out.push_str(tail);
        return mark_truncated(out, truncated);
    }
    if dropped == 0 && !tail.is_empty() {
        return bound_parts(&format!("{head}{tail}"), 0, "", truncated);
    }
    // With nothing dropped, both ends come from `head`.
    let tail = if dropped == 0 { head } else { tail };
    let room = OUTPUT_BYTES - CUT_LINE_ROOM - end_room;
    let kept_head = cut(head, room / 2);
    let kept_tail = suffix(tail, room - room / 2);
    let removed = if dropped == 0 {
        head.len() - kept_head.len() - kept_tail.len()
    } else {
        head.len() - kept_head.len() + tail.len() - kept_tail.len()
    };
    let removed = dropped.saturating_add(u64::try_from(removed).unwrap_or(u64::MAX));
    let mut out = String::with_capacity(OUTPUT_BYTES);
    out.push_str(kept_head);
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&cut_line(removed));
    out.push('\n');
    out.push_str(kept_tail);
    mark_truncated(out, truncated)
}

/// The line that stands for the `n` bytes cut out of the middle of an output.
#[must_use]
pub fn cut_line(n: u64) -> String {
    format!("[… {n} bytes cut …]")
}

/// Room for [`cut_line`] of any count and the LFs around it.
pub const CUT_LINE_ROOM: usize = "[…  bytes cut …]".len() + 20 + 2;

/// The longest suffix of `s` of at most `max` bytes that starts on a char boundary.
fn suffix(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

fn mark_truncated(mut out: String, truncated: bool) -> String {
    if truncated {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(TRUNCATED);
    }
    out
}
