//! What a tool call produced, bounded for the model and summarized for display.

use crate::util::redact::sanitize_text;
use crate::util::text::cut;

/// Largest `output` kept per call.
pub const OUTPUT_BYTES: usize = 64 * 1024;
/// How much of each end a cut output keeps, at most.
pub const HALF_BYTES: usize = OUTPUT_BYTES / 2;
/// Longest `describe` text and `summary`.
pub const SUMMARY_BYTES: usize = protocol_core::limits::SUMMARY_BYTES;
/// Appended (on its own line) to an output the tool itself cut short (a file read up to its
/// bound, the match or entry bound reached).
pub const TRUNCATED: &str = "[truncated]";

/// Policy class of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads files or folders: `read_file`, `list_dir`, `grep`.
    Read,
    /// Changes files: `write_file`, `edit_file`.
    Write,
    /// Runs a command: `shell`.
    Shell,
    /// A tool of the `client.tools` extension, run by the client.
    Client,
    /// A tool of an MCP server (`mcp__<server>__<tool>`).
    Mcp,
    /// `task`: runs a subagent (`runner.md` 7).
    Task,
}

/// What a tool run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// A safe display summary (≤ 1024 bytes, sanitized, no raw output), e.g. "read 120 lines",
    /// "exit 0", "wrote 3 bytes", "invalid input".
    pub summary: String,
    /// The bounded raw result for the model (at most [`OUTPUT_BYTES`] bytes, UTF-8, its middle
    /// cut at char boundaries around a [`cut_line`] when longer, `[truncated]` when the tool
    /// stopped early).
    pub output: String,
    /// Typed facts for display cards (`tool.cards`), never output text.
    pub details: ToolDetails,
}

/// What a tool learned while running that a display card shows: counts and codes only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ToolDetails {
    /// Nothing beyond the summary (failures, `list_dir`).
    #[default]
    None,
    /// `shell`: the exit code (`None` when killed, timed out or cancelled) and wall time.
    Command {
        /// The exit code, if the shell exited.
        exit_code: Option<i32>,
        /// How long the call ran.
        duration_ms: u64,
    },
    /// `read_file`: lines returned.
    FileRead {
        /// Lines returned to the model.
        lines: u64,
    },
    /// `write_file`/`edit_file`: a line diff of the file before and after.
    FileEdit {
        /// Lines added.
        added: u64,
        /// Lines removed.
        removed: u64,
    },
    /// `grep`: matching lines found.
    Search {
        /// Matching lines.
        matches: u64,
    },
}

impl ToolOutcome {
    pub(crate) fn success(summary: String, output: String, truncated: bool) -> Self {
        Self {
            ok: true,
            summary: one_line(&summary),
            output: bound_output(output, truncated),
            details: ToolDetails::None,
        }
    }

    /// This outcome with `details`.
    #[must_use]
    pub(crate) fn with(mut self, details: ToolDetails) -> Self {
        self.details = details;
        self
    }

    /// A failure whose output for the model is the summary phrase itself.
    pub(crate) fn fail(phrase: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(phrase.to_owned(), false),
            details: ToolDetails::None,
        }
    }

    /// A failure with a longer explanation for the model.
    pub(crate) fn fail_with(phrase: &str, detail: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(format!("{phrase}: {detail}"), false),
            details: ToolDetails::None,
        }
    }
}

/// Sanitized, one line (every white space becomes a space, ends trimmed), at most
/// [`SUMMARY_BYTES`].
#[must_use]
pub fn one_line(s: &str) -> String {
    let clean: String = sanitize_text(s)
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    cut(clean.trim(), SUMMARY_BYTES).to_owned()
}

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
