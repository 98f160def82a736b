//! The texts of one `exec` cell (`code-mode.md` 5, 8): the code's size bound, its
//! `exec: N lines` summary, the Markdown fence taken off before it runs, and the result the
//! model gets back.

use crate::util::bound::bound_output;
use serde_json::Value;

/// Largest `code` that runs, in UTF-8 bytes, counted before the fence is removed.
pub const CODE_BYTES: usize = 256 * 1024;
/// The error result of code over [`CODE_BYTES`] (an `invalid_input` failure).
pub const CODE_TOO_LARGE: &str = "exec refused: code over 256 KiB";

/// How a cell ended; the first line of its result is `exec <state>` (on the helper's wire,
/// snake case: `timed_out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellState {
    /// It returned (or ran to its end).
    Completed,
    /// An uncaught error, code that does not parse, or a helper that crashed, hung or broke
    /// the protocol.
    Failed,
    /// Past `cpu_ms` or `timeout_ms`.
    TimedOut,
    /// An uncaught error after the engine refused an allocation.
    OutOfMemory,
    /// `turn.cancel` or `shutdown`.
    Cancelled,
}

impl CellState {
    /// The first line of the result, exactly.
    #[must_use]
    pub const fn line(self) -> &'static str {
        match self {
            Self::Completed => "exec completed",
            Self::Failed => "exec failed",
            Self::TimedOut => "exec timed out",
            Self::OutOfMemory => "exec ran out of memory",
            Self::Cancelled => "exec cancelled",
        }
    }

    /// Whether the result is an error result: everything but `exec completed`.
    #[must_use]
    pub const fn is_error(self) -> bool {
        !matches!(self, Self::Completed)
    }
}

/// Why a nested call threw `ToolError` (`code-mode.md` 8): its `code` (snake case on the
/// helper's wire, as JavaScript sees it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    /// Policy `deny`, or a denied or expired approval.
    Denied,
    /// A `pre_tool` hook exited 2.
    Blocked,
    /// Not reachable from code (`exec` included).
    UnknownTool,
    /// Not a JSON object, or breaks the tool's schema.
    InvalidInput,
    /// It ran and failed.
    Failed,
    /// Cut short by cancellation or an interrupted cell.
    Cancelled,
    /// Past `max_calls`, or refused by the runaway rule.
    Limit,
}

impl ToolErrorCode {
    /// The `code` the JavaScript `ToolError` carries.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Denied => "denied",
            Self::Blocked => "blocked",
            Self::UnknownTool => "unknown_tool",
            Self::InvalidInput => "invalid_input",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Limit => "limit",
        }
    }
}

/// `Err` with [`CODE_TOO_LARGE`] when `code` (as sent) is over [`CODE_BYTES`].
pub fn check_size(code: &str) -> Result<(), &'static str> {
    if code.len() > CODE_BYTES {
        Err(CODE_TOO_LARGE)
    } else {
        Ok(())
    }
}

/// The LF-separated lines of `code`: a final LF starts no line, so `""` has 0 and `"a\n"` 1.
#[must_use]
pub fn line_count(code: &str) -> usize {
    let lfs = code.bytes().filter(|b| *b == b'\n').count();
    if code.is_empty() || code.ends_with('\n') {
        lfs
    } else {
        lfs + 1
    }
}

/// The `exec` activity's summary: `exec: N lines`, `exec: 1 line`.
#[must_use]
pub fn summary(code: &str) -> String {
    match line_count(code) {
        1 => "exec: 1 line".to_owned(),
        n => format!("exec: {n} lines"),
    }
}

/// The code that runs and how many lines were taken off before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unfenced<'a> {
    /// The code between the fences, or all of it when it has none.
    pub code: &'a str,
    /// Lines removed before `code` (1 with a fence, else 0): line N of `code` is line
    /// N + offset of what the model sent.
    pub line_offset: usize,
}

/// Removes a leading and trailing Markdown fence: a first line of three backticks alone or
/// followed by `js`, `javascript`, `ts` or `typescript`, together with a last line of three
/// backticks (trailing spaces, tabs and a CR allowed on both). Anything else is left whole.
#[must_use]
pub fn strip_fence(code: &str) -> Unfenced<'_> {
    let whole = Unfenced {
        code,
        line_offset: 0,
    };
    let Some((first, rest)) = code.split_once('\n') else {
        return whole;
    };
    let opening = first.trim_end_matches([' ', '\t', '\r']);
    if !matches!(
        opening.strip_prefix("```"),
        Some("" | "js" | "javascript" | "ts" | "typescript")
    ) {
        return whole;
    }
    // The last line: after the last LF that is not the final one.
    let body_end = rest.strip_suffix('\n').unwrap_or(rest);
    let (inner, last) = match body_end.rfind('\n') {
        Some(i) => (&rest[..=i], &body_end[i + 1..]),
        None => ("", body_end),
    };
    if last.trim_end_matches([' ', '\t', '\r']) != "```" {
        return whole;
    }
    Unfenced {
        code: inner,
        line_offset: 1,
    }
}

/// One output line of `console.*(args...)`: arguments joined by a space, strings as they
/// are, other values as compact JSON. `text(value)` is the one-argument case.
#[must_use]
pub fn console_line(args: &[Value]) -> String {
    let parts: Vec<String> = args
        .iter()
        .map(|a| match a {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect();
    parts.join(" ")
}

/// The `exec` result: `exec <state>`, `in X.Y s, N tool calls`, then `output` (console and
/// `text()` lines, then the returned value's JSON or the uncaught error, as the caller put
/// them), one per line, bounded like any tool output (64 KiB, head and tail kept).
/// `elapsed_ms` is rounded to the nearest tenth of a second, halves up.
#[must_use]
pub fn result_text(state: CellState, elapsed_ms: u64, calls: u64, output: &[String]) -> String {
    let tenths = elapsed_ms.saturating_add(50) / 100;
    let mut out = format!(
        "{}\nin {}.{} s, {calls} tool calls",
        state.line(),
        tenths / 10,
        tenths % 10
    );
    for line in output {
        out.push('\n');
        out.push_str(line);
    }
    bound_output(out, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::bound::OUTPUT_BYTES;
    use serde_json::json;

    #[test]
    fn code_of_256_kib_runs_and_one_byte_more_is_refused() {
        assert_eq!(check_size(&"a".repeat(CODE_BYTES)), Ok(()));
        assert_eq!(
            check_size(&"a".repeat(CODE_BYTES + 1)),
            Err("exec refused: code over 256 KiB")
        );
        // UTF-8 bytes, not characters: 87,382 three-byte characters are 262,146 bytes.
        assert!(check_size(&"€".repeat(CODE_BYTES / 3 + 1)).is_err());
        assert_eq!(check_size(""), Ok(()));
        // Counted before the fence comes off.
        let fenced = format!("```js\n{}\n```", "a".repeat(CODE_BYTES - 8));
        assert!(fenced.len() > CODE_BYTES);
        assert!(check_size(&fenced).is_err());
        assert!(strip_fence(&fenced).code.len() < CODE_BYTES);
    }

    #[test]
    fn the_summary_counts_lf_separated_lines_and_a_final_lf_starts_none() {
        for (code, want) in [
            ("", "exec: 0 lines"),
            ("a", "exec: 1 line"),
            ("a\n", "exec: 1 line"),
            ("\n", "exec: 1 line"),
            ("a\nb", "exec: 2 lines"),
            ("a\nb\n", "exec: 2 lines"),
            ("a\n\n", "exec: 2 lines"),
            ("a\r\nb\r\n", "exec: 2 lines"),
            ("a\rb", "exec: 1 line"),
        ] {
            assert_eq!(summary(code), want, "{code:?}");
        }
    }

    #[test]
    fn a_leading_and_trailing_fence_come_off_together() {
        for (code, inner) in [
            ("```js\nreturn 1\n```", "return 1\n"),
            ("```javascript\na\nb\n```\n", "a\nb\n"),
            ("```ts\nx\n```", "x\n"),
            ("```typescript\nx\n```", "x\n"),
            ("```\nx\n```", "x\n"),
            ("```js  \r\nx\r\n``` \r\n", "x\r\n"),
            ("```js\n```", ""),
            ("```js\n\n```", "\n"),
        ] {
            assert_eq!(
                strip_fence(code),
                Unfenced {
                    code: inner,
                    line_offset: 1
                },
                "{code:?}"
            );
        }
    }

    #[test]
    fn anything_else_is_left_whole() {
        for code in [
            "",
            "```",
            "```js",
            "```js\n",
            "```js\nreturn 1",
            "return 1\n```",
            "```python\nx\n```",
            "```JS\nx\n```",
            "````js\nx\n````",
            " ```js\nx\n```",
            "```js\nx\n ```",
            "```js\nx\n```js",
            "```js\nx\n```\n\n",
            "return `a`\n",
        ] {
            assert_eq!(
                strip_fence(code),
                Unfenced {
                    code,
                    line_offset: 0
                },
                "{code:?}"
            );
        }
    }

    #[test]
    fn console_arguments_join_with_a_space_strings_as_they_are() {
        assert_eq!(
            console_line(&[
                json!("a b"),
                json!(1),
                json!({"k": [true, null]}),
                json!("x\ny")
            ]),
            "a b 1 {\"k\":[true,null]} x\ny"
        );
        assert_eq!(console_line(&[json!("\"q\"")]), "\"q\"");
        assert_eq!(console_line(&[]), "");
    }

    #[test]
    fn the_result_has_its_state_time_and_calls_then_the_output() {
        let out = [
            "first".to_owned(),
            "two\nlines".to_owned(),
            "{\"n\":1}".to_owned(),
        ];
        assert_eq!(
            result_text(CellState::Completed, 1_234, 3, &out),
            "exec completed\nin 1.2 s, 3 tool calls\nfirst\ntwo\nlines\n{\"n\":1}"
        );
        assert_eq!(
            result_text(CellState::Failed, 0, 1, &[]),
            "exec failed\nin 0.0 s, 1 tool calls"
        );
        assert_eq!(
            result_text(CellState::Cancelled, 49, 0, &[String::new()]),
            "exec cancelled\nin 0.0 s, 0 tool calls\n"
        );
        for (ms, want) in [
            (50, "0.1"),
            (149, "0.1"),
            (150, "0.2"),
            (9_950, "10.0"),
            (300_000, "300.0"),
            (3_600_000, "3600.0"),
        ] {
            let got = result_text(CellState::TimedOut, ms, 0, &[]);
            assert_eq!(
                got,
                format!("exec timed out\nin {want} s, 0 tool calls"),
                "{ms}"
            );
        }
        assert!(
            result_text(CellState::OutOfMemory, 0, 0, &[]).starts_with("exec ran out of memory\n")
        );
    }

    #[test]
    fn only_completed_is_not_an_error() {
        assert!(!CellState::Completed.is_error());
        for s in [
            CellState::Failed,
            CellState::TimedOut,
            CellState::OutOfMemory,
            CellState::Cancelled,
        ] {
            assert!(s.is_error(), "{s:?}");
        }
    }

    #[test]
    fn the_result_is_bounded_like_any_tool_output() {
        let head = "exec completed\nin 0.0 s, 0 tool calls\n";
        let fits = "x".repeat(OUTPUT_BYTES - head.len());
        let at = result_text(CellState::Completed, 0, 0, std::slice::from_ref(&fits));
        assert_eq!(at.len(), OUTPUT_BYTES);
        assert_eq!(at, format!("{head}{fits}"));
        let over = result_text(CellState::Completed, 0, 0, &[format!("{fits}y")]);
        assert!(over.len() <= OUTPUT_BYTES, "{}", over.len());
        assert!(over.starts_with(head));
        assert!(over.contains("bytes cut"));
        assert!(over.ends_with("xy"));
    }
}
