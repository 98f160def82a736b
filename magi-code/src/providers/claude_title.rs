//! The title request of a `claude-subscription` session (`backend.md` "Claude through the
//! native CLI"): one `-p --output-format json --tools "" --no-session-persistence --model
//! haiku` process given the title prompt on stdin; its one JSON object's `result` is the
//! answer. Best effort, as titles are: any failure is simply no title.

use super::claude_proc::Launch;
use super::model::{ModelClient, ModelEvent, ModelRequest, StepFailure, StepSink, StopReason};
use crate::history::Item;
use crate::util::cancel::Cancel;
use serde_json::Value;
use std::io::{Read, Write};
use std::time::Duration;

/// The most bytes of the process's stdout read.
const ANSWER_BYTES: u64 = 64 << 10;
/// The model the CLI titles with.
const TITLE_MODEL: &str = "haiku";

/// A one-shot CLI process as the title request's model client.
pub struct ClaudeTitle {
    launch: Launch,
}

impl ClaudeTitle {
    /// A title client starting the CLI with `launch`.
    #[must_use]
    pub fn new(launch: Launch) -> Self {
        Self { launch }
    }
}

/// The prompt: the instructions, then the request's user text.
fn prompt(req: &ModelRequest<'_>) -> String {
    let mut p = req.instructions.to_owned();
    for i in req.items {
        if let Item::User { text } = i {
            p.push_str("\n\n");
            p.push_str(text);
        }
    }
    p
}

/// The answer in the CLI's JSON output: its `result` unless it is an error.
fn answer(out: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(out).ok()?;
    if v.get("is_error").and_then(Value::as_bool) != Some(false) {
        return None;
    }
    v.get("result").and_then(Value::as_str).map(str::to_owned)
}

impl ModelClient for ClaudeTitle {
    fn step(
        &mut self,
        req: &ModelRequest<'_>,
        cancel: &Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), StepFailure> {
        let args = [
            "-p",
            "--output-format",
            "json",
            "--tools",
            "",
            "--no-session-persistence",
            "--model",
            TITLE_MODEL,
        ];
        let mut child = self
            .launch
            .command(&args)
            .spawn()
            .map_err(|_| StepFailure::Unreachable)?;
        let pid = child.id();
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            crate::util::proc::kill_group(pid);
            drop(child.wait());
            return Err(StepFailure::Unreachable);
        };
        let text = prompt(req);
        let (tx, rx) = crossbeam_channel::bounded(1);
        // Writing and reading off this thread: neither pipe can stall the cancellation below.
        let io = std::thread::Builder::new()
            .name("claude-title".into())
            .spawn(move || {
                let _ = stdin.write_all(text.as_bytes());
                drop(stdin);
                let mut out = Vec::new();
                let _ = stdout.take(ANSWER_BYTES).read_to_end(&mut out);
                let _ = tx.send(out);
            });
        let out = if io.is_ok() {
            loop {
                if cancel.is_cancelled() {
                    break None;
                }
                match rx.recv_timeout(Duration::from_millis(20)) {
                    Ok(out) => break Some(out),
                    Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
                    Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break None,
                }
            }
        } else {
            None
        };
        crate::util::proc::kill_group(pid);
        drop(child.kill());
        drop(child.wait());
        let Some(out) = out else {
            return Err(StepFailure::Cancelled);
        };
        let text = answer(&out).ok_or(StepFailure::Remote)?;
        sink.event(ModelEvent::TextDelta(text));
        sink.event(ModelEvent::Stop(StopReason::EndTurn));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_is_the_result_of_a_success_only() {
        let ok =
            br#"{"type":"result","subtype":"success","is_error":false,"result":"Fix the parser"}"#;
        assert_eq!(answer(ok).as_deref(), Some("Fix the parser"));
        let failed = br#"{"type":"result","is_error":true,"result":"API Error: 401"}"#;
        assert_eq!(answer(failed), None);
        assert_eq!(answer(br#"{"type":"result","result":"x"}"#), None);
        assert_eq!(answer(b"not json"), None);
    }
}
