//! A cell's nested calls as records (`decisions.md` 52): each call's `code_call` is stored
//! before any call of its batch runs, so a crash never leaves a change without its record;
//! its `code_result` follows when it ends (stored with the next append); a call the cell ends
//! under is cut short as `turn.cancel` would cut it.

use super::batch::{Calls, CallsNext, Nested, Slot, Step, Todo, Wait};
use super::calls::{calls, run};
use super::io::{AppendKind, Output, Stored};
use super::shared::Shared;
use crate::codemode::text::ToolErrorCode;
use crate::history::Body;
use crate::wire::events::ClientToolCancelData;
use crate::wire::Event;
use protocol_core::ErrorCode;
use serde_json::Value;

/// Why a nested call does not run when its record could not be stored.
const UNRECORDED: &str = "failed: the call's record could not be stored";

/// Runs calls a cell's code issued (`list[i]` is `from.calls[i]`), through the pipeline of
/// direct calls, batched as they are: answered with [`CallsNext::Answered`] (now or after
/// their waits), never stored as a step. Their `code_call` records go out first; none runs
/// before the driver says they are stored (a cancelled run runs none, so need not wait).
pub fn start_nested(sh: &mut Shared, from: Nested, list: Vec<(String, Value)>) -> CallsNext {
    for (n, (name, input)) in from.calls.iter().zip(&list) {
        let record = sh.voice.record(Body::CodeCall {
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
    let list = list
        .into_iter()
        .map(|(name, input)| (from.call_id.clone(), name, input))
        .collect();
    let mut c = calls(Vec::new(), list, Some(from));
    if sh.cancelled {
        return run(sh, Step::Go(c, Todo::Batch));
    }
    let records = sh.store_so_far();
    sh.push(Output::Append {
        records,
        kind: AppendKind::Step,
    });
    c.wait = Wait::Recorded;
    CallsNext::Wait(c)
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
        let record = sh.voice.record(Body::CodeResult {
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

/// Ends a nested call in flight now, as cancelled (its cell ended under it): its final
/// activity, a `client.tool.cancel` if the client runs it, and its `code_result` record.
/// The caller holds the run cancelled meanwhile, so that a call not started is too.
pub fn abandon(sh: &mut Shared, mut c: Box<Calls>) -> CallsNext {
    if let Wait::Client { id, .. } = &c.wait {
        let (session_id, run_id) = sh.voice.ids();
        let call_id = id.clone();
        sh.voice
            .critical(Event::ClientToolCancel(ClientToolCancelData {
                session_id,
                run_id,
                call_id,
            }));
    }
    if c.done < c.n {
        if let Some(p) = c.current.take() {
            c.slots.push(Slot::Started(Box::new(p)));
        }
        for slot in c.slots.iter_mut().skip(c.done) {
            if let Slot::Started(p) = slot {
                p.refuse("cancelled", ToolErrorCode::Cancelled);
            }
        }
        c.slots.resize_with(c.n, || Slot::Skipped);
        c.outcomes.resize_with(c.n, || None);
        for o in c.outcomes.iter_mut().skip(c.done) {
            *o = None;
        }
    }
    c.post = None;
    c.wait = Wait::Nothing;
    run(sh, Step::Go(c, Todo::Complete))
}
