//! Stack traces told back in the model's line numbers (`code-mode.md` 8; the fence is removed
//! by `text::strip_fence` first).

/// Lines the engine's async-function constructor puts before the body
/// (`(async function anonymous(` and `) {`), so a body line `n` is reported as `n + 2`.
const WRAPPER_LINES: u32 = 2;
/// The file name the engine gives code built by the function constructor.
const ENGINE_FILE: &str = "<input>";
/// The file name the model reads in stacks.
pub const MODEL_FILE: &str = "code";

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
