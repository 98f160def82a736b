//! A cell's nested calls as records (`decisions.md` 52): each call's `code_call` is stored
//! before any call of its batch runs, so a crash never leaves a change without its record;
//! its `code_result` follows when it ends (stored with the next append).

use super::batch::{Calls, Nested, Step, Todo, Wait};
use super::io::{AppendKind, Output, Stored};
use super::shared::Shared;
use crate::codemode::text::ToolErrorCode;
use crate::history::Body;
use protocol_core::ErrorCode;
use serde_json::Value;

/// Why a nested call does not run when its record could not be stored.
const UNRECORDED: &str = "failed: the call's record could not be stored";

/// Queues the batch's `code_call` records (`list[i]` is `from.calls[i]`) and, unless the run
/// is cancelled (then none runs, so none need wait), their append: true when the batch must
/// wait for it ([`Wait::Recorded`]).
pub fn record_calls(sh: &mut Shared, from: &Nested, list: &[(String, Value)]) -> bool {
    for (n, (name, input)) in from.calls.iter().zip(list) {
        let record = sh.voice.record(Body::CellCall {
            run_id: sh.cfg.run_id.clone(),
            call_id: from.call_id.clone(),
            seq: n.seq,
            name: name.clone(),
            input: input.clone(),
            output: None,
            is_error: None,
        });
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
            for n in &mut from.calls {
                n.refuse = Some((UNRECORDED.to_owned(), ToolErrorCode::Failed));
            }
        }
    }
    Step::Go(c, Todo::Batch)
}

/// The batch's nested calls' `code_result` records (in issue order) and answers for the cell.
pub fn answered(sh: &mut Shared, c: &mut Calls) {
    let Some(from) = c.nested.as_mut() else {
        return;
    };
    let runs = std::mem::take(&mut c.runs);
    for (i, run) in (c.at..c.at + c.n).zip(runs) {
        let Some(n) = from.calls.get(i) else {
            continue;
        };
        let record = sh.voice.record(Body::CellResult {
            run_id: sh.cfg.run_id.clone(),
            call_id: from.call_id.clone(),
            seq: n.seq,
            output: run.output.clone(),
            is_error: run.is_error,
        });
        sh.records.push(record);
        from.answers.push((n.call, run));
    }
}
