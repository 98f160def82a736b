//! A callee's calls as records: each call's first record is stored before any call of its
//! batch runs, so a crash never leaves a change without its record, and its result follows
//! when it ends (stored with the next append). A cell's code (`decisions.md` 52) writes
//! `code_call`/`code_result`; a provider mid-step `tool_call`/`tool_result`, whose calls and
//! results also join the conversation as a direct call's do.

use super::batch::{Calls, Nested, Origin, Step, Todo, Wait};
use super::io::{AppendKind, Output, Stored};
use super::shared::Shared;
use crate::codemode::text::ToolErrorCode;
use crate::history::{Body, Item};
use protocol_core::ErrorCode;
use serde_json::Value;

/// Why a nested call does not run when its record could not be stored.
const UNRECORDED: &str = "failed: the call's record could not be stored";

/// Queues the batch's first records (`list[i]` is `from.calls[i]`, with its call ID) and,
/// unless the run is cancelled (then none runs, so none need wait), their append: true when
/// the batch must wait for it ([`Wait::Recorded`]).
pub fn record_calls(sh: &mut Shared, from: &Nested, list: &[(String, String, Value)]) -> bool {
    for (n, (call_id, name, input)) in from.calls.iter().zip(list) {
        let run_id = sh.cfg.run_id.clone();
        let (call_id, name, input) = (call_id.clone(), name.clone(), input.clone());
        let body = match from.origin {
            Origin::Cell { .. } => Body::CellCall {
                run_id,
                call_id,
                seq: n.seq,
                name,
                input,
                output: None,
                is_error: None,
            },
            Origin::Step => {
                sh.items.push(Item::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                });
                Body::ToolCall {
                    run_id,
                    call_id,
                    name,
                    input,
                }
            }
        };
        let record = sh.voice.record(body);
        sh.records.push(record);
    }
    if sh.cancelled {
        return false;
    }
    let records = sh.store_so_far();
    sh.push(Output::Append {
        records,
        kind: AppendKind::Step,
    });
    true
}

/// The `code_call` records' append ended: the calls go on, or, when it failed, none runs
/// (each throws `failed`) and the run is degraded.
pub fn recorded(sh: &mut Shared, mut c: Box<Calls>, r: Result<Stored, ErrorCode>) -> Step {
    c.wait = Wait::Nothing;
    if r.is_err() {
        sh.degraded = true;
        if let Some(from) = c.nested.as_mut() {
            unrecorded(from);
        }
    }
    Step::Go(c, Todo::Batch)
}

/// Refuses every call of `from`: its record could not be stored, so it must not run.
pub fn unrecorded(from: &mut Nested) {
    for n in &mut from.calls {
        n.refuse = Some((UNRECORDED.to_owned(), ToolErrorCode::Failed));
    }
}

/// The batch's calls' result records (in issue order) and answers for the callee.
pub fn answered(sh: &mut Shared, c: &mut Calls) {
    let Some(from) = c.nested.as_mut() else {
        return;
    };
    let runs = std::mem::take(&mut c.runs);
    // A lost record degraded the run: nothing more is stored, and the conversation ends.
    let record = !sh.degraded;
    for (i, run) in (c.at..c.at + c.n).zip(runs) {
        let (Some(n), Some((call_id, _, _))) = (from.calls.get(i), c.list.get(i)) else {
            continue;
        };
        if !record {
            from.answers.push((n.call, run));
            continue;
        }
        let (run_id, call_id) = (sh.cfg.run_id.clone(), call_id.clone());
        let (output, is_error) = (run.output.clone(), run.is_error);
        let body = match from.origin {
            Origin::Cell { .. } => Body::CellResult {
                run_id,
                call_id,
                seq: n.seq,
                output,
                is_error,
            },
            Origin::Step => {
                sh.items.push(Item::ToolResult {
                    call_id: call_id.clone(),
                    output: output.clone(),
                    is_error,
                });
                Body::ToolResult {
                    run_id,
                    call_id,
                    output,
                    is_error,
                }
            }
        };
        let record = sh.voice.record(body);
        sh.records.push(record);
        from.answers.push((n.call, run));
    }
}
