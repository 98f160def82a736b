//! What a tool call produced, bounded for the model and summarized for display.

use crate::util::redact::sanitize_text;
use crate::util::text::cut;

/// Largest `output` kept per call.
pub const OUTPUT_BYTES: usize = 64 * 1024;
/// Longest `describe` text and `summary`.
pub const SUMMARY_BYTES: usize = protocol_core::limits::SUMMARY_BYTES;
/// Appended (on its own line) to an output that was cut.
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
}

/// What a tool run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// A safe display summary (≤ 1024 bytes, sanitized, no raw output), e.g. "read 120 lines",
    /// "exit 0", "wrote 3 bytes", "invalid input".
    pub summary: String,
    /// The bounded raw result for the model (at most [`OUTPUT_BYTES`] bytes, UTF-8, cut at a
    /// char boundary, with a clear `[truncated]` marker when cut).
    pub output: String,
}

impl ToolOutcome {
    pub(crate) fn success(summary: String, output: String, truncated: bool) -> Self {
        Self {
            ok: true,
            summary: one_line(&summary),
            output: bound_output(output, truncated),
        }
    }

    /// A failure whose output for the model is the summary phrase itself.
    pub(crate) fn fail(phrase: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(phrase.to_owned(), false),
        }
    }

    /// A failure with a longer explanation for the model.
    pub(crate) fn fail_with(phrase: &str, detail: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(format!("{phrase}: {detail}"), false),
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

/// Bounds a model-facing output to [`OUTPUT_BYTES`], appending the marker when it was cut here
/// or earlier (`truncated`).
#[must_use]
pub fn bound_output(s: String, truncated: bool) -> String {
    if !truncated && s.len() <= OUTPUT_BYTES {
        return s;
    }
    // Room for a separating LF and the marker.
    let mut out = cut(&s, OUTPUT_BYTES - TRUNCATED.len() - 1).to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(TRUNCATED);
    out
}
