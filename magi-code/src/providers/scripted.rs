//! The offline `scripted` provider: `echo` and the steps of a script file.

use crate::store;
use protocol_core::json::parse_strict;
use serde_json::{json, Value};

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
                        "tool" => {
                            let t = v.as_object()?;
                            if t.keys().any(|k| k != "name" && k != "input") {
                                return None;
                            }
                            Step::Tool {
                                name: t.get("name")?.as_str()?.to_owned(),
                                input: t.get("input").cloned().unwrap_or_else(|| json!({})),
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
