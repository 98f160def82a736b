//! A Code Mode cell as the wait of its `exec` call (`code-mode.md` 4): the nested calls its
//! code issues, run through the direct calls' pipeline (`start_nested`) in issue
//! order — the calls the helper sent together as one batch, so that read-class calls that
//! need no approval run concurrently (up to 4), later ones queued; its wall clock, which stops
//! while a nested call awaits its approval; its interrupt on timeout or cancellation; and its
//! end, which becomes `exec`'s outcome before the batch completes as usual.

use super::batch::{Calls, CallsNext, Cell, Nested, NestedCall, Queued, Slot, Step, Todo, Wait};
use super::call::ToolRun;
use super::calls;
use super::io::CellTool;
use super::io::{Input, InterruptReason, Output, Reply};
use super::nested;
use super::shared::Shared;
use crate::codemode::decl::{declaration, DESCRIBE_BYTES, EXEC};
use crate::codemode::text::{result_text, CellState, ToolErrorCode};
use crate::tools::{ToolDetails, ToolKind, ToolOutcome, ToolRegistry};
use crate::wire::events::ClientToolCancelData;
use crate::wire::Event;
use serde_json::Value;

/// The tools a cell reaches in `table` (`CodeConfig::tools`): every one but `exec`, those
/// offered to code only included, in name order (`ALL_TOOLS`'s), each with its `describe`
/// declaration.
#[must_use]
pub fn reachable(table: &ToolRegistry) -> Vec<CellTool> {
    let mut tools: Vec<CellTool> = table
        .all_specs()
        .iter()
        .filter(|s| s.name != EXEC && table.lookup(&s.name) != Some(ToolKind::Code))
        .map(|s| CellTool {
            name: s.name.clone(),
            description: s.description.clone(),
            declaration: declaration(s, DESCRIBE_BYTES),
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// Acts on `input` for calls that wait for their cell (others go to `calls`).
pub fn on_input(sh: &mut Shared, mut c: Box<Calls>, input: Input) -> CallsNext {
    let Wait::Cell(mut cell) = std::mem::replace(&mut c.wait, Wait::Nothing) else {
        return calls::on_call_input(sh, c, input);
    };
    interrupt_if_due(sh, &mut cell);
    match input {
        Input::CellEnded {
            state,
            output,
            elapsed_ms,
        } => {
            drain(sh, &mut cell);
            let lines = if output.is_empty() {
                Vec::new()
            } else {
                vec![output]
            };
            // N is the cell's `code_call` records (`decisions.md` 52), whatever the helper counted.
            let text = result_text(state, elapsed_ms, cell.issued, &lines);
            if let Some(o) = c.outcomes.first_mut() {
                *o = Some(ToolOutcome {
                    ok: state == CellState::Completed,
                    summary: state.line().to_owned(),
                    output: text,
                    details: ToolDetails::None,
                });
            }
            return calls::resume(sh, c);
        }
        Input::Call {
            call,
            name,
            input,
            more,
            refused,
        } if within(&cell) => {
            cell.queue.push_back(Queued {
                call,
                name,
                input,
                refused,
            });
            cell.gathering = more;
            if more {
                // The helper sent more calls with this one: they start together.
                c.wait = Wait::Cell(cell);
                return CallsNext::Wait(c);
            }
        }
        Input::Call { call, more, .. } => {
            // Past `max_calls`: thrown at once, with no record and no activity.
            let why = format!("limit: a cell makes at most {} tool calls", cell.max_calls);
            let result = Err((ToolErrorCode::Limit, why));
            sh.push(Output::Answer { call, result });
            cell.gathering = more;
        }
        Input::CellStopped => {
            // The helper ended the cell under its calls: they are cut short at once.
            cell.interrupted.get_or_insert(InterruptReason::Timeout);
            route(sh, &mut cell, Input::Tick);
        }
        input @ (Input::Tick
        | Input::Appended(_)
        | Input::Approval { .. }
        | Input::HookEnded(_)
        | Input::ToolsEnded(_)
        | Input::ClientResult { .. }) => route(sh, &mut cell, input),
        _ => {}
    }
    issue(sh, &mut cell);
    interrupt_if_due(sh, &mut cell);
    c.wait = Wait::Cell(cell);
    CallsNext::Wait(c)
}

/// Whether the cell may issue one more call: its `seq` is below `max_calls`.
fn within(cell: &Cell) -> bool {
    let queued = u64::try_from(cell.queue.len()).unwrap_or(u64::MAX);
    cell.issued.saturating_add(queued) < u64::from(cell.max_calls)
}

/// Runs `f` for a cell's nested calls: with the run held cancelled when `cancel` (a nested
/// call of an interrupted cell is cut short exactly as `turn.cancel` cuts a direct one), and
/// their work due to end at `until`, the cell's clock.
fn held<T>(
    sh: &mut Shared,
    cancel: bool,
    until: Option<u64>,
    f: impl FnOnce(&mut Shared) -> T,
) -> T {
    let (was, until_was) = (sh.cancelled, sh.work_until);
    sh.cancelled |= cancel;
    sh.work_until = until;
    let t = f(sh);
    (sh.cancelled, sh.work_until) = (was, until_was);
    t
}

/// Asks for the interrupt once, on cancellation or when the wall clock (approval waits not
/// counted) has run out, and cancels the nested call's waits.
fn interrupt_if_due(sh: &mut Shared, cell: &mut Cell) {
    if cell.interrupted.is_some() {
        return;
    }
    let end = cell
        .started
        .saturating_add(cell.timeout_ms)
        .saturating_add(cell.paused);
    // A record that could not be stored ends the cell as a cancellation would: the run
    // ends degraded once it is over.
    let why = if sh.cancelled || sh.degraded {
        InterruptReason::Cancel
    } else if cell.paused_since.is_none() && sh.now >= end {
        InterruptReason::Timeout
    } else {
        return;
    };
    cell.interrupted = Some(why);
    sh.push(Output::Interrupt(why));
    route(sh, cell, Input::Tick);
}

/// Hands an input to the nested calls in flight, if any.
fn route(sh: &mut Shared, cell: &mut Cell, input: Input) {
    let Some(inner) = cell.inner.take() else {
        return;
    };
    let (cancel, until) = (cell.interrupted.is_some(), cell.own_deadline());
    let next = held(sh, cancel, until, |sh| {
        calls::on_call_input(sh, inner, input)
    });
    settle(sh, cell, next, true);
}

/// Starts the queued calls, in issue order and as one batch, while none is in flight.
fn issue(sh: &mut Shared, cell: &mut Cell) {
    while !cell.gathering && cell.inner.is_none() && !cell.queue.is_empty() {
        let next = start(sh, cell, cell.interrupted.is_some());
        settle(sh, cell, next, true);
    }
}

/// Starts the queued calls as one batch, each `seq` in issue order.
fn start(sh: &mut Shared, cell: &mut Cell, cancel: bool) -> CallsNext {
    let mut from = Nested {
        call_id: cell.call_id.clone(),
        calls: Vec::with_capacity(cell.queue.len()),
        answers: Vec::new(),
    };
    let mut list = Vec::with_capacity(cell.queue.len());
    for q in cell.queue.drain(..) {
        let seq = cell.issued;
        cell.issued += 1;
        let refuse = match q.refused {
            Some((code, why)) => Some((why, code)),
            None => refusal(sh, &q.name),
        };
        from.calls.push(NestedCall {
            call: q.call,
            seq,
            refuse,
        });
        list.push((q.name, q.input));
    }
    let until = cell.own_deadline();
    held(sh, cancel, until, |sh| start_nested(sh, from, list))
}

/// Why the cell refuses a call to `name` before its policy: not reachable from code (`exec`
/// itself, or a tool the cell's list leaves out).
fn refusal(sh: &Shared, name: &str) -> Option<(String, ToolErrorCode)> {
    let reachable = sh
        .cfg
        .code
        .as_ref()
        .is_some_and(|c| c.tools.iter().any(|t| t.name == name));
    let code = sh.cfg.tools.lookup(name) == Some(ToolKind::Code);
    (name == EXEC || code || !reachable)
        .then(|| ("unknown tool".to_owned(), ToolErrorCode::UnknownTool))
}

/// Keeps the nested calls in flight, or answers the code; then the clock's pause follows
/// whether a call awaits its approval.
fn settle(sh: &mut Shared, cell: &mut Cell, next: CallsNext, answer: bool) {
    match next {
        CallsNext::Wait(inner) => cell.inner = Some(inner),
        CallsNext::Answered(runs) if answer => {
            for (call, run) in runs {
                let result = answered(run);
                sh.push(Output::Answer { call, result });
            }
        }
        // A one-call batch of a cell neither steps nor ends the run.
        CallsNext::Answered(_) | CallsNext::Stepped | CallsNext::Finish(_) => {}
    }
    let approval = cell
        .inner
        .as_ref()
        .is_some_and(|c| matches!(c.wait, Wait::Approval { .. }));
    match (approval, cell.paused_since) {
        (true, None) => cell.paused_since = Some(sh.now),
        (false, Some(t)) => {
            cell.paused = cell.paused.saturating_add(sh.now.saturating_sub(t));
            cell.paused_since = None;
        }
        _ => {}
    }
}

/// What the code gets: the output, or the `ToolError` it throws.
fn answered(run: ToolRun) -> Reply {
    if run.is_error {
        Err((run.code.unwrap_or(ToolErrorCode::Failed), run.output))
    } else {
        Ok(run.output)
    }
}

/// The cell ended: the calls in flight and those queued end cancelled (each still gets its
/// `code_call` and `code_result` records), unanswered, since no code waits for them any more.
fn drain(sh: &mut Shared, cell: &mut Cell) {
    if let Some(inner) = cell.inner.take() {
        let next = held(sh, true, None, |sh| abandon(sh, inner));
        settle(sh, cell, next, false);
    }
    if !cell.queue.is_empty() {
        let next = start(sh, cell, true);
        settle(sh, cell, next, false);
    }
}

/// Runs calls a cell's code issued (`list[i]` is `from.calls[i]`), through the pipeline of
/// direct calls, batched as they are: answered with [`CallsNext::Answered`] (now or after
/// their waits), never stored as a step. Their `code_call` records go out first; none runs
/// before the driver says they are stored.
fn start_nested(sh: &mut Shared, from: Nested, list: Vec<(String, Value)>) -> CallsNext {
    let wait = nested::record_calls(sh, &from, &list);
    let list = list
        .into_iter()
        .map(|(name, input)| (from.call_id.clone(), name, input))
        .collect();
    let mut c = calls::calls(Vec::new(), list, Some(from));
    if !wait {
        return calls::run(sh, Step::Go(c, Todo::Batch));
    }
    c.wait = Wait::Recorded;
    CallsNext::Wait(c)
}

/// Ends a nested call in flight now, as cancelled (its cell ended under it): its final
/// activity, a `client.tool.cancel` if the client runs it, and its `code_result` record.
/// The caller holds the run cancelled meanwhile, so that a call not started is too.
fn abandon(sh: &mut Shared, mut c: Box<Calls>) -> CallsNext {
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
    calls::run(sh, Step::Go(c, Todo::Complete))
}
