//! The model's code as the engine runs it: the Markdown fence removed (`code-mode.md` 8,
//! "Fences"), and stack traces told back in the model's line numbers.

/// Lines the engine's async-function constructor puts before the body
/// (`(async function anonymous(` and `) {`), so a body line `n` is reported as `n + 2`.
const WRAPPER_LINES: u32 = 2;
/// The file name the engine gives code built by the function constructor.
const ENGINE_FILE: &str = "<input>";
/// The file name the model reads in stacks.
pub const MODEL_FILE: &str = "code";

/// `code` without a leading fence line (three backticks alone or followed by `js`,
/// `javascript`, `ts` or `typescript`) and a last line of three backticks; both must be there.
/// A final LF after the closing fence starts no line.
#[must_use]
pub fn strip_fence(code: &str) -> &str {
    let Some((first, rest)) = code.split_once('\n') else {
        return code;
    };
    let lang = first.trim_end().strip_prefix("```");
    if !matches!(lang, Some("" | "js" | "javascript" | "ts" | "typescript")) {
        return code;
    }
    let body = rest.strip_suffix('\n').unwrap_or(rest);
    let (inner, last) = match body.rsplit_once('\n') {
        Some((inner, last)) => (inner, last),
        None => ("", body),
    };
    if last.trim_end() == "```" {
        inner
    } else {
        code
    }
}

/// An engine stack in the model's terms: frames in the model's code name `code:LINE:COL`
/// with the line counted from the model's first line; frames of the engine's own glue
/// (the globals' prelude, the native constructor) are left out.
#[must_use]
pub fn model_stack(stack: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    for frame in stack.lines() {
        let Some(at) = frame.find(ENGINE_FILE) else {
            continue;
        };
        let (head, tail) = frame.split_at(at);
        let tail = &tail[ENGINE_FILE.len()..];
        let Some(rest) = tail.strip_prefix(':') else {
            continue;
        };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(line) = rest[..digits].parse::<u32>() else {
            continue;
        };
        let line = line.saturating_sub(WRAPPER_LINES).max(1);
        let head = head.replace("anonymous", "<code>");
        out.push(format!("{head}{MODEL_FILE}:{line}{}", &rest[digits..]));
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_are_removed_only_as_a_pair_of_whole_lines() {
        assert_eq!(strip_fence("```js\nreturn 1\n```"), "return 1");
        assert_eq!(strip_fence("```\na\nb\n```\n"), "a\nb");
        for lang in ["javascript", "ts", "typescript"] {
            assert_eq!(strip_fence(&format!("```{lang}\nx\n```")), "x");
        }
        assert_eq!(strip_fence("```js\n```"), "");
        // Not a fence: other languages, no closing line, or text after it.
        for code in [
            "```python\nx\n```",
            "```js\nreturn 1",
            "```js\nx\n``` // end",
            "return 1\n```",
            "```",
            "x",
        ] {
            assert_eq!(strip_fence(code), code);
        }
    }

    #[test]
    fn stacks_name_the_models_lines_and_drop_the_glue() {
        let engine = "    at anonymous (<input>:4:1)\n    at call (prelude:12:3)\n    at <eval> (eval_script:1:82)";
        assert_eq!(model_stack(engine), "    at <code> (code:2:1)");
        assert_eq!(
            model_stack("    at f (<input>:10:7)\n    at anonymous (<input>:3:5)"),
            "    at f (code:8:7)\n    at <code> (code:1:5)"
        );
        assert_eq!(
            model_stack("    at <input>:4:6\n    at AsyncFunction (native)"),
            "    at code:2:6"
        );
        assert_eq!(model_stack(""), "");
    }
}
