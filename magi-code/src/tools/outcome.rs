//! What a tool call produced, bounded for the model and summarized for display.

use crate::util::redact::sanitize_text;
use crate::util::text::cut;

// The bound lives in `util/` so that `codemode/` (beside this folder) bounds `exec` results
// with the very same rule.
pub use crate::util::bound::{
    bound_output, bound_parts, cut_line, CUT_LINE_ROOM, HALF_BYTES, OUTPUT_BYTES, TRUNCATED,
};

/// Longest `describe` text and `summary`.
pub const SUMMARY_BYTES: usize = protocol_core::limits::SUMMARY_BYTES;

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
    /// `exec`: runs a Code Mode cell (`code-mode.md` 2, `tools.code`).
    Code,
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
