//! A step's tool calls as states of the run: each call's `started` activity and card, its
//! schema check, policy and approval, `pre_tool` hooks, the tool (built-ins, `task` and MCP by
//! the driver, client tools by the client), its final activity, `post_tool` hooks and result;
//! then the step's records stored. Every call is answered, results in the model's order; a
//! run of consecutive read-class calls that need no approval runs concurrently, up to
//! [`CONCURRENT_READS`] at a time.

pub use super::batch::CallsNext;
use super::batch::{Callbacks, Calls, Cell, Nested, Origin, Slot, Step, Todo, Wait};
use super::call::{cancelled_run, over_activities, Prepared};
use super::call::{complete, policy, start_call};
use super::client::{ask_client, client_answered, client_gone};
use super::hooks::{post_hook_ended, post_hooks, pre_hook_ended, pre_hooks, refused};
use super::io::{AppendKind, CellJob, End, Input, Output, Stored, ToolEnd, ToolJob};
use super::repeats::REPEATED;
use super::shared::Shared;
use crate::codemode::text::{check_size, result_text, CellState, ToolErrorCode};
use crate::config::Policy;
use crate::history::{Body, Item};
use crate::mcp::Lost;
use crate::tools::{ToolClass, ToolDetails, ToolKind, ToolOutcome};
use crate::wire::events::{ApprovalRequestedData, ToolDiffData};
use crate::wire::{DiagnosticCode, Event};
use protocol_core::limits::{APPROVAL_EXPIRY_MS, RUN_ACTIVITIES};
use protocol_core::ErrorCode;
use serde_json::Value;

/// Read-class calls that run unasked, at most this many at once (`runner.md` 2).
pub const CONCURRENT_READS: usize = 4;

/// Runs the moves until the calls wait or end.
pub(super) fn run(sh: &mut Shared, mut step: Step) -> CallsNext {
    loop {
        step = match step {
            Step::Out(next) => return next,
            Step::Go(c, Todo::Batch) => next_batch(sh, c),
            Step::Go(c, Todo::Prepare) => prepare(sh, c),
            Step::Go(c, Todo::Execute) => execute(sh, c),
            Step::Go(c, Todo::Complete) => complete_batch(sh, c),
        };
    }
}

/// Runs the step's `calls` (the step's assistant items go into the conversation after).
pub fn start_calls(
    sh: &mut Shared,
    step_items: Vec<Item>,
    list: Vec<(String, String, Value)>,
) -> CallsNext {
    let c = calls(step_items, list, None);
    run(sh, Step::Go(c, Todo::Batch))
}

/// The calls of `list`; each joins the turn's runaway row when its batch is formed, so a
/// cell's nested calls join it right after their `exec` call, before the step's next calls.
pub(super) fn calls(
    step_items: Vec<Item>,
    list: Vec<(String, String, Value)>,
    nested: Option<Nested>,
) -> Box<Calls> {
    let repeated = vec![None; list.len()];
    Box::new(Calls {
        step_items,
        list,
        repeated,
        at: 0,
        n: 0,
        slots: Vec::new(),
        current: None,
        outcomes: Vec::new(),
        done: 0,
        post: None,
        runs: Vec::new(),
        results: Vec::new(),
        wait: Wait::Nothing,
        nested,
    })
}

/// Goes on with calls whose cell ended: `exec`'s outcome is in, the batch completes.
pub fn resume(sh: &mut Shared, c: Box<Calls>) -> CallsNext {
    run(sh, Step::Go(c, Todo::Complete))
}

/// Whether call `i` runs without asking: a read-class tool whose policy (Code Mode's for a
/// nested call) is `allow`, with an object input, not refused first. Such calls may run
/// concurrently.
fn runs_unasked(sh: &Shared, c: &Calls, i: usize) -> bool {
    let (_, name, input) = &c.list[i];
    let nested = c.nested.as_ref();
    let code = nested.is_some_and(Nested::from_code);
    sh.cfg.tools.class(name) == Some(ToolClass::Read)
        && policy(sh, name, code) == Some(Policy::Allow)
        && input.is_object()
        && nested.is_none_or(|n| n.calls.get(i).is_some_and(|n| n.refuse.is_none()))
}

fn next_batch(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    c.at += c.n;
    if c.at >= c.list.len() {
        return match c.nested.as_mut() {
            Some(n) => Step::Out(CallsNext::Answered(std::mem::take(&mut n.answers))),
            None => calls_done(sh, c),
        };
    }
    let (at, len) = (c.at, c.list.len());
    let first = repeated(sh, &mut c, at);
    let mut n = 1;
    while at + n < len
        && n < CONCURRENT_READS
        && !first
        && runs_unasked(sh, &c, at)
        && runs_unasked(sh, &c, at + n)
        && !repeated(sh, &mut c, at + n)
    {
        n += 1;
    }
    c.n = n;
    c.slots.clear();
    c.outcomes.clear();
    c.runs.clear();
    c.done = 0;
    Step::Go(c, Todo::Prepare)
}

/// Whether call `i` repeats the row (counted on its first look, in the calls' order).
fn repeated(sh: &mut Shared, c: &mut Calls, i: usize) -> bool {
    let (_, name, input) = &c.list[i];
    *c.repeated[i].get_or_insert_with(|| sh.repeats.see(name, input))
}

/// Prepares the batch's calls in order until one waits for the client or a hook.
fn prepare(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    // A callee's calls (code's, or a provider's mid-step) were recorded before they run.
    let callback = c.nested.is_some();
    let code = c.nested.as_ref().is_some_and(Nested::from_code);
    while c.slots.len() < c.n {
        let i = c.at + c.slots.len();
        let (call_id, name, input) = c.list[i].clone();
        if !callback {
            let record = sh.voice.record(Body::ToolCall {
                run_id: sh.cfg.run_id.clone(),
                call_id,
                name: name.clone(),
                input: input.clone(),
            });
            sh.records.push(record);
        }
        if sh.cancelled || !sh.take_activity() {
            c.slots.push(Slot::Skipped);
            continue;
        }
        let mut p = start_call(sh, name, input, code);
        if let Some(repeat) = refused_first(&c, i, &mut p) {
            let run = complete(sh, p, None);
            if repeat {
                sh.voice.diagnostic(
                    DiagnosticCode::RepeatedToolCall,
                    "the model asked for the same tool call with the same input 3 or more times in a row; it was not run",
                );
            }
            c.slots.push(Slot::Done(run));
            continue;
        }
        match checked(sh, &mut p, code) {
            Some(Policy::Ask) => return ask(sh, c, p),
            Some(Policy::Allow) => return pre_hooks(sh, c, p, 0),
            _ => c.slots.push(Slot::Started(Box::new(p))),
        }
    }
    Step::Go(c, Todo::Execute)
}

/// Refuses a call before its schema and policy: a nested call its cell refused
/// (unreachable, past `max_calls`), or a repeat of the runaway rule. `Some(true)` for a
/// repeat, which is reported.
fn refused_first(c: &Calls, i: usize, p: &mut Prepared) -> Option<bool> {
    let refusal = c
        .nested
        .as_ref()
        .and_then(|n| n.calls.get(i)?.refuse.as_ref());
    if let Some((why, code)) = refusal {
        p.refuse(why, *code);
        return Some(false);
    }
    (c.n == 1 && c.repeated[i] == Some(true)).then(|| {
        p.refuse(REPEATED, ToolErrorCode::Limit);
        true
    })
}

/// The schema check, then the policy: `Some(Allow)` or `Some(Ask)` for a call that goes
/// on, else `p` is refused.
fn checked(sh: &Shared, p: &mut Prepared, nested: bool) -> Option<Policy> {
    // With Code Mode's `only`, a tool reachable from code is not offered to direct calls.
    if !nested && !sh.cfg.tools.is_direct(&p.name) && sh.cfg.tools.lookup(&p.name).is_some() {
        p.refuse("unknown tool", ToolErrorCode::UnknownTool);
        return None;
    }
    if let Err(why) = sh.cfg.tools.check(&p.name, &p.input) {
        let code = if sh.cfg.tools.lookup(&p.name).is_none() {
            ToolErrorCode::UnknownTool
        } else {
            ToolErrorCode::InvalidInput
        };
        p.refuse(&why, code);
        return None;
    }
    match policy(sh, &p.name, nested) {
        None => p.refuse("unknown tool", ToolErrorCode::UnknownTool),
        Some(Policy::Deny) => p.refuse("denied by policy", ToolErrorCode::Denied),
        allowed => return allowed,
    }
    None
}

fn ask(sh: &mut Shared, mut c: Box<Calls>, p: Prepared) -> Step {
    let id = sh.voice.fresh().hyphenated().to_string();
    sh.voice.queue.push_back(Output::OpenApproval(id.clone()));
    let (session_id, run_id) = sh.voice.ids();
    if sh.cfg.tool_details && sh.cfg.tools.class(&p.name) == Some(ToolClass::Write) {
        let event = ToolDiffData {
            session_id: session_id.clone(),
            run_id: run_id.clone(),
            activity_id: p.activity_id.clone(),
            approval_id: id.clone(),
            diff: String::new(),
            added: 0,
            removed: 0,
            truncated: false,
        };
        sh.voice.queue.push_back(Output::Preview {
            name: p.name.clone(),
            input: p.input.clone(),
            event,
        });
    }
    sh.voice
        .critical(Event::ApprovalRequested(ApprovalRequestedData {
            session_id,
            run_id,
            approval_id: id.clone(),
            summary: p.described.clone(),
            expires_in_ms: APPROVAL_EXPIRY_MS,
        }));
    c.wait = Wait::Approval {
        id,
        deadline: sh.now.saturating_add(APPROVAL_EXPIRY_MS),
    };
    c.current = Some(p);
    Step::Out(CallsNext::Wait(c))
}

/// Every call of the batch is prepared: the ones that may run go to the driver (or to the
/// client).
fn execute(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    c.outcomes = (0..c.n).map(|_| None).collect();
    let single = c.n == 1;
    let mut jobs = Vec::new();
    let mut of = Vec::new();
    for (j, slot) in c.slots.iter().enumerate() {
        let Slot::Started(p) = slot else { continue };
        if p.refused.is_some() {
            continue;
        }
        match p.kind {
            // Dispatch point for `client.tools`: the client runs it, never the backend.
            Some(ToolKind::Client) if single => {
                let (name, input) = (p.name.clone(), p.input.clone());
                return ask_client(sh, c, &name, &input);
            }
            // `exec` runs its cell (never nested: a cell refuses `exec` as unreachable).
            Some(ToolKind::Code) if single => {
                let code = p.input["code"].as_str().unwrap_or_default().to_owned();
                return start_cell(sh, c, code);
            }
            Some(ToolKind::Builtin(_)) => {}
            Some(ToolKind::Task | ToolKind::Mcp) if single => {}
            _ => continue,
        }
        jobs.push(ToolJob {
            kind: p.kind.unwrap_or(ToolKind::Mcp),
            name: p.name.clone(),
            input: p.input.clone(),
        });
        of.push(j);
    }
    if jobs.is_empty() {
        return Step::Go(c, Todo::Complete);
    }
    sh.voice.queue.push_back(Output::Tools {
        jobs,
        until: sh.work_until,
    });
    c.wait = Wait::Tools(of);
    Step::Out(CallsNext::Wait(c))
}

/// Starts `exec`'s cell, whose nested calls and end come as inputs to `cell.rs`, once the
/// step's records so far (`exec`'s `tool_call` among them) are stored; code over 256 KiB
/// never runs.
fn start_cell(sh: &mut Shared, mut c: Box<Calls>, code: String) -> Step {
    if sh.degraded {
        // An earlier cell's record was lost: nothing more is stored or run.
        return Step::Out(CallsNext::Finish(End::Failed(ErrorCode::PersistenceFailed)));
    }
    let refused = match (&sh.cfg.code, check_size(&code)) {
        (_, Err(why)) => why,
        (None, Ok(())) => "exec refused: Code Mode is off",
        (Some(cfg), Ok(())) => {
            let job = CellJob {
                code,
                tools: cfg.tools.clone(),
                cpu_ms: cfg.cpu_ms,
                memory_mib: cfg.memory_mib,
                max_calls: cfg.max_calls,
            };
            let origin = Origin::Cell {
                call_id: c.list[c.at].0.clone(),
            };
            let cell = Cell {
                started: sh.now,
                timeout_ms: cfg.timeout_ms,
                paused: 0,
                paused_since: None,
                interrupted: None,
                callbacks: Callbacks::new(origin, Some(cfg.max_calls)),
            };
            let records = sh.store_so_far();
            sh.voice.queue.push_back(Output::Append {
                records,
                kind: AppendKind::Step,
            });
            c.wait = Wait::CellStored(Box::new(cell), job);
            return Step::Out(CallsNext::Wait(c));
        }
    };
    c.outcomes[0] = Some(ToolOutcome::fail(refused));
    Step::Go(c, Todo::Complete)
}

/// Inputs the calls wait for: answers, hook and tool ends, the time.
pub fn on_call_input(sh: &mut Shared, c: Box<Calls>, input: Input) -> CallsNext {
    let step = match (input, &c.wait) {
        (Input::Approval { approval_id, allow }, Wait::Approval { id, .. })
            if *id == approval_id =>
        {
            approved(sh, c, allow)
        }
        (Input::Tick, Wait::Approval { .. }) if sh.cancelled => {
            refused(c, "cancelled", ToolErrorCode::Cancelled)
        }
        (Input::Tick, Wait::Approval { deadline, .. }) if sh.now >= *deadline => refused(
            c,
            "denied by the user (the approval expired)",
            ToolErrorCode::Denied,
        ),
        (Input::HookEnded(end), Wait::PreHook(i)) => {
            let i = *i;
            pre_hook_ended(sh, c, i, end)
        }
        (Input::HookEnded(end), Wait::PostHook { hook, ok }) => {
            let (hook, ok) = (*hook, *ok);
            post_hook_ended(sh, c, hook, ok, end)
        }
        (Input::ToolsEnded(ends), Wait::Tools(_)) => tools_ended(sh, c, ends),
        (Input::Appended(r), Wait::Recorded) => super::nested::recorded(sh, c, r),
        (
            Input::ClientResult {
                call_id,
                ok,
                output,
            },
            Wait::Client { id, .. },
        ) if *id == call_id => client_answered(c, ok, output),
        (Input::Tick, Wait::Client { deadline, .. }) if sh.cancelled || sh.now >= *deadline => {
            client_gone(sh, c)
        }
        _ => Step::Out(CallsNext::Wait(c)),
    };
    run(sh, step)
}

fn approved(sh: &mut Shared, mut c: Box<Calls>, allow: bool) -> Step {
    if !allow {
        return refused(c, "denied by the user", ToolErrorCode::Denied);
    }
    c.wait = Wait::Nothing;
    match c.current.take() {
        Some(p) => pre_hooks(sh, c, p, 0),
        None => Step::Go(c, Todo::Prepare),
    }
}

fn tools_ended(sh: &mut Shared, mut c: Box<Calls>, ends: Vec<ToolEnd>) -> Step {
    let Wait::Tools(of) = std::mem::replace(&mut c.wait, Wait::Nothing) else {
        return Step::Out(CallsNext::Wait(c));
    };
    for (j, end) in of.into_iter().zip(ends) {
        match end.lost {
            Some(Lost::Exited) => sh.voice.diagnostic(
                DiagnosticCode::McpServerExited,
                "an MCP server has exited; its tools fail",
            ),
            Some(Lost::Failed) => sh.voice.diagnostic(
                DiagnosticCode::McpServerFailed,
                "an MCP server broke the protocol and was stopped; its tools fail",
            ),
            Some(Lost::AuthRequired) => sh.voice.diagnostic(
                DiagnosticCode::McpAuthRequired,
                "an MCP server refused its authorization; run `magi-code mcp login <name>`",
            ),
            None => {}
        }
        if let Some(o) = c.outcomes.get_mut(j) {
            *o = end.outcome;
        }
    }
    Step::Go(c, Todo::Complete)
}

/// Completes the batch's calls in order (each call's `post_tool` hooks before the next),
/// then answers them all.
fn complete_batch(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    while c.done < c.n {
        let slot = std::mem::replace(&mut c.slots[c.done], Slot::Skipped);
        let outcome = c.outcomes[c.done].take();
        c.done += 1;
        let run = match slot {
            Slot::Done(run) => run,
            Slot::Skipped if sh.cancelled => cancelled_run(),
            Slot::Skipped => over_activities(),
            Slot::Started(p) => {
                let p = *p;
                let ran = outcome
                    .as_ref()
                    .filter(|_| p.refused.is_none())
                    .map(|o| o.ok);
                let post = (p.post, p.name.clone(), p.input.clone());
                let run = complete(sh, p, outcome);
                if let (true, name, input, Some(ok)) = (post.0, post.1, post.2, ran) {
                    c.runs.push(run);
                    c.post = Some((name, input));
                    return post_hooks(sh, c, 0, ok);
                }
                run
            }
        };
        c.runs.push(run);
    }
    if c.nested.is_some() {
        super::nested::answered(sh, &mut c);
        return Step::Go(c, Todo::Batch);
    }
    for ((call_id, _, _), run) in c.list[c.at..c.at + c.n].iter().zip(c.runs.drain(..)) {
        let record = sh.voice.record(Body::ToolResult {
            run_id: sh.cfg.run_id.clone(),
            call_id: call_id.clone(),
            output: run.output.clone(),
            is_error: run.is_error,
        });
        sh.records.push(record);
        c.results.push(Item::ToolResult {
            call_id: call_id.clone(),
            output: run.output,
            is_error: run.is_error,
        });
    }
    Step::Go(c, Todo::Batch)
}

/// Every call is answered: the step goes into the conversation and its records are stored
/// before the next request (a crash leaves whole steps).
fn calls_done(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    if sh.degraded {
        // A cell's record was lost: nothing more is stored (replay answers the call).
        return Step::Out(CallsNext::Finish(End::Failed(ErrorCode::PersistenceFailed)));
    }
    sh.content.charge(&sh.records);
    sh.items.append(&mut c.step_items);
    sh.items.append(&mut c.results);
    if sh.activities_full {
        // The bound is reached: the calls past it were answered with an error; the run
        // ends here rather than letting the model go on without tools.
        sh.voice.diagnostic(
            DiagnosticCode::ContentLimit,
            &format!("the turn reached its bound of {RUN_ACTIVITIES} tool activities"),
        );
        return Step::Out(CallsNext::Finish(End::Failed(ErrorCode::ContentLimit)));
    }
    sh.retried = false;
    sh.comp.note(&sh.records);
    let records = sh.unstored();
    sh.voice.queue.push_back(Output::Append {
        records,
        kind: AppendKind::Step,
    });
    c.wait = Wait::Stored;
    Step::Out(CallsNext::Wait(c))
}

/// The step's records' append ended: the next step, or the end (`degraded`); or, before a
/// cell, the cell starts (unless the run was cancelled meanwhile: `exec cancelled`).
pub fn step_stored(sh: &mut Shared, mut c: Box<Calls>, r: Result<Stored, ErrorCode>) -> CallsNext {
    if let Wait::CellStored(..) = &c.wait {
        let Wait::CellStored(mut cell, job) = std::mem::replace(&mut c.wait, Wait::Nothing) else {
            return CallsNext::Wait(c);
        };
        if r.is_err() {
            sh.degraded = true;
            return CallsNext::Finish(End::Failed(ErrorCode::PersistenceFailed));
        }
        if sh.cancelled {
            let state = CellState::Cancelled;
            c.outcomes[0] = Some(ToolOutcome {
                ok: false,
                summary: state.line().to_owned(),
                output: result_text(state, 0, 0, &[]),
                details: ToolDetails::None,
            });
            return run(sh, Step::Go(c, Todo::Complete));
        }
        cell.started = sh.now;
        sh.voice.queue.push_back(Output::Cell(job));
        c.wait = Wait::Cell(cell);
        return CallsNext::Wait(c);
    }
    if !matches!(c.wait, Wait::Stored) {
        return CallsNext::Wait(c);
    }
    if r.is_err() {
        sh.degraded = true;
        return CallsNext::Finish(End::Failed(ErrorCode::PersistenceFailed));
    }
    CallsNext::Stepped
}

#[cfg(test)]
mod tests;
