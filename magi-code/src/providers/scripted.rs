//! The offline `scripted` provider: `echo` and the steps of a script file.

use super::model::{ModelClient, ModelEvent, ModelRequest, StepFailure, StepSink, StopReason};
use crate::store;
use crate::util::cancel::Cancel;
use crate::util::text::live_chunks;
use protocol_core::json::parse_strict;
use serde_json::{json, Value};
use std::time::Duration;

/// Largest script file read.
pub const SCRIPT_BYTES: u64 = 1 << 20;

/// One step of a scripted turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Streamed reply text.
    Text(String),
    /// A cancellable wait.
    Sleep(u64),
    /// The model calls a built-in tool through the normal policy and approval path.
    Tool {
        /// Tool name.
        name: String,
        /// Tool input.
        input: Value,
    },
    /// The provider calls a tool back mid-step, as one that runs its own loop does, and
    /// streams what it got: `name: <output>` or `name failed: <why>` (first line, cut).
    CallBack {
        /// Tool name.
        name: String,
        /// Tool input.
        input: Value,
    },
    /// A provider reasoning summary.
    ReasoningSummary(String),
    /// The provider fails the run.
    Fail,
}

/// Loads `providers.scripted.script`: `{"turns":[{"steps":[...]}, ...]}`.
pub fn load_script(path: &str) -> Option<Vec<Vec<Step>>> {
    let held = store::read_held(std::path::Path::new(path), SCRIPT_BYTES, 100_000).ok()?;
    let (v, d) = parse_strict(&held.bytes).ok()?;
    if !d.top.is_empty() || d.nested {
        return None;
    }
    let turns = v
        .as_object()
        .filter(|o| o.len() == 1)?
        .get("turns")?
        .as_array()?;
    if turns.is_empty() {
        return None;
    }
    turns
        .iter()
        .map(|t| {
            let steps = t
                .as_object()
                .filter(|o| o.len() == 1)?
                .get("steps")?
                .as_array()?;
            steps
                .iter()
                .map(|s| {
                    let o = s.as_object().filter(|o| o.len() == 1)?;
                    let (k, v) = o.iter().next()?;
                    Some(match k.as_str() {
                        "text" => Step::Text(v.as_str()?.to_owned()),
                        "sleep_ms" => Step::Sleep(v.as_u64().filter(|ms| *ms <= 600_000)?),
                        "tool" | "call_back" => {
                            let t = v.as_object()?;
                            if t.keys().any(|k| k != "name" && k != "input") {
                                return None;
                            }
                            let name = t.get("name")?.as_str()?.to_owned();
                            let input = t.get("input").cloned().unwrap_or_else(|| json!({}));
                            if k == "tool" {
                                Step::Tool { name, input }
                            } else {
                                Step::CallBack { name, input }
                            }
                        }
                        "reasoning_summary" => Step::ReasoningSummary(v.as_str()?.to_owned()),
                        "fail" => {
                            v.as_str()?;
                            Step::Fail
                        }
                        _ => return None,
                    })
                })
                .collect()
        })
        .collect()
}

/// The `scripted` provider as a [`ModelClient`]: each step plays the script until its next
/// tool call (which ends the step, as a model's tool use does) or its end.
#[derive(Debug)]
pub struct ScriptedModel {
    steps: Vec<Step>,
    pos: usize,
    /// `echo` streams its text as several deltas.
    echo: bool,
    calls: usize,
}

impl ScriptedModel {
    /// `echo`: the reply is exactly `prompt`.
    #[must_use]
    pub fn echo(prompt: &str) -> Self {
        Self {
            steps: vec![Step::Text(prompt.to_owned())],
            pos: 0,
            echo: true,
            calls: 0,
        }
    }

    /// `script`: the steps of one turn.
    #[must_use]
    pub fn script(steps: Vec<Step>) -> Self {
        Self {
            steps,
            pos: 0,
            echo: false,
            calls: 0,
        }
    }
}

impl ModelClient for ScriptedModel {
    fn step(
        &mut self,
        _req: &ModelRequest<'_>,
        cancel: &Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), StepFailure> {
        while let Some(step) = self.steps.get(self.pos).cloned() {
            if cancel.is_cancelled() {
                return Err(StepFailure::Cancelled);
            }
            self.pos += 1;
            match step {
                Step::Text(t) => {
                    // Echo shows streaming as three deltas; a script's text is one.
                    let pieces = if self.echo { 3 } else { 1 };
                    let chunks: Vec<&str> = if self.echo {
                        live_chunks(&t, pieces, protocol_core::limits::LIVE_CHUNK_BYTES)
                    } else {
                        vec![t.as_str()]
                    };
                    for c in chunks {
                        if !sink.event(ModelEvent::TextDelta(c.to_owned())) {
                            return Ok(());
                        }
                        sink.flush();
                    }
                }
                Step::Sleep(ms) => {
                    if !cancel.sleep(Duration::from_millis(ms)) {
                        return Err(StepFailure::Cancelled);
                    }
                }
                Step::ReasoningSummary(text) => {
                    let id = format!("rs{}", self.pos);
                    if !sink.event(ModelEvent::ReasoningSummary { id, text }) {
                        return Ok(());
                    }
                }
                Step::Tool { name, input } => {
                    self.calls += 1;
                    let call_id = format!("call_{}", self.calls);
                    if sink.event(ModelEvent::ToolCall {
                        call_id,
                        name,
                        input,
                    }) {
                        sink.event(ModelEvent::Stop(StopReason::ToolUse));
                    }
                    return Ok(());
                }
                Step::CallBack { name, input } => {
                    let shown = match sink.call_tool(None, &name, input) {
                        Ok(out) => format!("{name}: {}", first_line(&out)),
                        Err(why) => format!("{name} failed: {}", first_line(&why)),
                    };
                    if !sink.event(ModelEvent::TextDelta(shown)) {
                        return Ok(());
                    }
                    sink.flush();
                }
                Step::Fail => return Err(StepFailure::Scripted),
            }
        }
        sink.event(ModelEvent::Stop(StopReason::EndTurn));
        Ok(())
    }
}

/// The first line of `text`, cut to 200 bytes.
fn first_line(text: &str) -> &str {
    crate::util::text::cut(text.lines().next().unwrap_or_default(), 200)
}
