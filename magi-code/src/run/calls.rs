//! A step's tool calls as states of the run: each call's `started` activity and card, its
//! schema check, policy and approval, `pre_tool` hooks, the tool (built-ins, `task` and MCP by
//! the driver, client tools by the client), its final activity, `post_tool` hooks and result;
//! then the step's records stored. Every call is answered, results in the model's order; a
//! run of consecutive read-class calls that need no approval runs concurrently, up to
//! [`CONCURRENT_READS`] at a time.

use super::batch::{Calls, HookInput, Slot, Wait};
use super::call::{cancelled_run, over_activities, Prepared};
use super::call::{complete, policy, start_call};
use super::io::{AppendKind, End, HookEnd, Input, Output, Stored, ToolEnd, ToolJob};
use super::repeats::REPEATED;
use super::shared::Shared;
use crate::config::Policy;
use crate::history::{Body, Item};
use crate::mcp::Lost;
use crate::tools::outcome::bound_output;
use crate::tools::{ToolClass, ToolDetails, ToolKind, ToolOutcome};
use crate::wire::events::{ApprovalRequestedData, ClientToolCallData, ClientToolCancelData};
use crate::wire::{DiagnosticCode, Event};
use protocol_core::limits::{
    APPROVAL_EXPIRY_MS, CLIENT_TOOL_INPUT_BYTES, CLIENT_TOOL_TIMEOUT_MS, RUN_ACTIVITIES,
};
use protocol_core::ErrorCode;
use serde_json::Value;

/// Read-class calls that run unasked, at most this many at once (`runner.md` 2).
pub const CONCURRENT_READS: usize = 4;
/// Why a call a blocking `pre_tool` hook stopped did not run.
pub const BLOCKED: &str = "blocked by a hook";
/// The `pre_tool` exit status that blocks the call.
pub const BLOCK_STATUS: i32 = 2;

/// What comes after the calls' state changed.
#[derive(Debug)]
pub enum CallsNext {
    /// They wait (for the driver, the client or the time).
    Wait(Box<Calls>),
    /// Every call is answered and the step's records are stored: the next step.
    Stepped,
    /// The run ends.
    Finish(End),
}

/// Where the calls go next without waiting: a loop, not a chain of calls, so a step of
/// thousands of calls that all end at once (refused, skipped) keeps a flat stack.
#[derive(Debug, Clone, Copy)]
enum Todo {
    Batch,
    Prepare,
    Execute,
    Complete,
}

/// One move of the calls: on to the next move, or out of the calls.
enum Step {
    Go(Box<Calls>, Todo),
    Out(CallsNext),
}

/// Runs the moves until the calls wait or end.
fn run(sh: &mut Shared, mut step: Step) -> CallsNext {
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
    let repeated = list.iter().map(|c| sh.repeats.see(&c.1, &c.2)).collect();
    let calls = Box::new(Calls {
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
    });
    run(sh, Step::Go(calls, Todo::Batch))
}

/// Whether a call runs without asking: a read-class tool whose policy is `allow`, with an
/// object input. Such calls may run concurrently.
fn runs_unasked(sh: &Shared, (_, name, input): &(String, String, Value)) -> bool {
    sh.cfg.tools.class(name) == Some(ToolClass::Read)
        && sh.cfg.policies.read == Policy::Allow
        && input.is_object()
}

fn next_batch(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    c.at += c.n;
    if c.at >= c.list.len() {
        return calls_done(sh, c);
    }
    let (at, len) = (c.at, c.list.len());
    let mut n = 1;
    while at + n < len
        && n < CONCURRENT_READS
        && !c.repeated[at]
        && !c.repeated[at + n]
        && runs_unasked(sh, &c.list[at])
        && runs_unasked(sh, &c.list[at + n])
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

/// Prepares the batch's calls in order until one waits for the client or a hook.
fn prepare(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    while c.slots.len() < c.n {
        let i = c.at + c.slots.len();
        let (call_id, name, input) = c.list[i].clone();
        let record = sh.voice.record(Body::ToolCall {
            run_id: sh.cfg.run_id.clone(),
            call_id,
            name: name.clone(),
            input: input.clone(),
        });
        sh.records.push(record);
        if sh.cancelled || !sh.take_activity() {
            c.slots.push(Slot::Skipped);
            continue;
        }
        if c.n == 1 && c.repeated[i] {
            let mut p = start_call(sh, name, input);
            p.refused = Some(REPEATED.to_owned());
            let run = complete(sh, p, None);
            sh.voice.diagnostic(
                    DiagnosticCode::RepeatedToolCall,
                    "the model asked for the same tool call with the same input 3 or more times in a row; it was not run",
                );
            c.slots.push(Slot::Done(run));
            continue;
        }
        let mut p = start_call(sh, name, input);
        p.refused = sh.cfg.tools.check(&p.name, &p.input).err();
        if p.refused.is_none() {
            match policy(sh, &p.name) {
                None => p.refused = Some("unknown tool".to_owned()),
                Some(Policy::Deny) => p.refused = Some("denied by policy".to_owned()),
                Some(Policy::Allow) => {}
                Some(Policy::Ask) => return ask(sh, c, p),
            }
        }
        if p.refused.is_none() {
            return pre_hooks(sh, c, p, 0);
        }
        c.slots.push(Slot::Started(Box::new(p)));
    }
    Step::Go(c, Todo::Execute)
}

fn ask(sh: &mut Shared, mut c: Box<Calls>, p: Prepared) -> Step {
    let id = sh.voice.fresh().hyphenated().to_string();
    sh.voice.queue.push_back(Output::OpenApproval(id.clone()));
    let (session_id, run_id) = sh.voice.ids();
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

/// Runs the `pre_tool` hooks matching the call from index `from`; when none is left the
/// call is prepared.
fn pre_hooks(sh: &mut Shared, mut c: Box<Calls>, mut p: Prepared, from: usize) -> Step {
    let hooks = &sh.cfg.hooks.pre_tool;
    if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(&p.name)) {
        let stdin = HookInput {
            event: "pre_tool",
            input: &p.input,
            ok: None,
            session_id: &sh.cfg.session_id,
            tool: &p.name,
        };
        sh.voice.queue.push_back(Output::Hook {
            command: hooks[i].command.clone(),
            stdin: stdin.bytes(),
        });
        c.wait = Wait::PreHook(i);
        c.current = Some(p);
        return Step::Out(CallsNext::Wait(c));
    }
    p.post = sh.cfg.hooks.post_tool.iter().any(|h| h.matches(&p.name));
    c.slots.push(Slot::Started(Box::new(p)));
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Prepare)
}

/// A call the run refuses while preparing it (a denial, a blocking hook, cancellation).
fn refused(mut c: Box<Calls>, why: &str) -> Step {
    if let Some(mut p) = c.current.take() {
        p.refused = Some(why.to_owned());
        c.slots.push(Slot::Started(Box::new(p)));
    }
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Prepare)
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
    sh.voice.queue.push_back(Output::Tools(jobs));
    c.wait = Wait::Tools(of);
    Step::Out(CallsNext::Wait(c))
}

/// Asks the client to run its tool (at most the advertised `client_tool_timeout_ms`).
fn ask_client(sh: &mut Shared, mut c: Box<Calls>, name: &str, input: &Value) -> Step {
    let size = serde_json::to_vec(input).map_or(usize::MAX, |b| b.len());
    let refused = if size > CLIENT_TOOL_INPUT_BYTES {
        // Fails without an event: the client never sees an input over its bound.
        Some("invalid input: larger than the client tool input bound")
    } else if !input.is_object() {
        Some("invalid input: not an object")
    } else {
        None
    };
    if let Some(why) = refused {
        c.outcomes[0] = Some(ToolOutcome::fail(why));
        return Step::Go(c, Todo::Complete);
    }
    let id = sh.voice.fresh().hyphenated().to_string();
    sh.voice.queue.push_back(Output::OpenClientCall(id.clone()));
    let (session_id, run_id) = sh.voice.ids();
    sh.voice.critical(Event::ClientToolCall(ClientToolCallData {
        session_id,
        run_id,
        call_id: id.clone(),
        name: name.to_owned(),
        input: input.as_object().cloned().unwrap_or_default(),
    }));
    c.wait = Wait::Client {
        id,
        deadline: sh.now.saturating_add(CLIENT_TOOL_TIMEOUT_MS),
    };
    Step::Out(CallsNext::Wait(c))
}

/// Inputs the calls wait for: answers, hook and tool ends, the time.
pub fn on_call_input(sh: &mut Shared, c: Box<Calls>, input: Input) -> CallsNext {
    let step = match (input, &c.wait) {
        (Input::Approval { approval_id, allow }, Wait::Approval { id, .. })
            if *id == approval_id =>
        {
            approved(sh, c, allow)
        }
        (Input::Tick, Wait::Approval { .. }) if sh.cancelled => refused(c, "cancelled"),
        (Input::Tick, Wait::Approval { deadline, .. }) if sh.now >= *deadline => {
            refused(c, "denied by the user (the approval expired)")
        }
        (Input::HookEnded(end), Wait::PreHook(i)) => {
            let i = *i;
            pre_hook_ended(sh, c, i, end)
        }
        (Input::HookEnded(end), Wait::PostHook { hook, ok }) => {
            let (hook, ok) = (*hook, *ok);
            post_hook_ended(sh, c, hook, ok, end)
        }
        (Input::ToolsEnded(ends), Wait::Tools(_)) => tools_ended(sh, c, ends),
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
        return refused(c, "denied by the user");
    }
    c.wait = Wait::Nothing;
    match c.current.take() {
        Some(p) => pre_hooks(sh, c, p, 0),
        None => Step::Go(c, Todo::Prepare),
    }
}

fn pre_hook_ended(sh: &mut Shared, mut c: Box<Calls>, i: usize, end: HookEnd) -> Step {
    match end {
        HookEnd::Exit(0) => {}
        HookEnd::Exit(BLOCK_STATUS) => return refused(c, BLOCKED),
        HookEnd::Cancelled => return refused(c, "cancelled"),
        end => hook_failed(sh, "pre_tool", &end),
    }
    match c.current.take() {
        Some(p) => pre_hooks(sh, c, p, i + 1),
        None => {
            c.wait = Wait::Nothing;
            Step::Go(c, Todo::Prepare)
        }
    }
}

/// The diagnostic never names the command or the input: either may hold a secret.
fn hook_failed(sh: &mut Shared, event: &str, end: &HookEnd) {
    let why = match end {
        HookEnd::Exit(code) => format!("exit {code}"),
        HookEnd::Failed(p) => p.clone(),
        HookEnd::Cancelled => "cancelled".to_owned(),
    };
    sh.voice.diagnostic(
        DiagnosticCode::HookFailed,
        &format!("a {event} hook failed ({why})"),
    );
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
            None => {}
        }
        if let Some(o) = c.outcomes.get_mut(j) {
            *o = end.outcome;
        }
    }
    Step::Go(c, Todo::Complete)
}

fn client_answered(mut c: Box<Calls>, ok: bool, output: String) -> Step {
    c.outcomes[0] = Some(if ok {
        ToolOutcome::success("answered by the client".into(), output, false)
    } else {
        ToolOutcome {
            ok: false,
            summary: "failed in the client".into(),
            output: bound_output(output, false),
            details: ToolDetails::None,
        }
    });
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Complete)
}

/// The client did not answer in time, or the run was cancelled: the client is told.
fn client_gone(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    let Wait::Client { id, .. } = std::mem::replace(&mut c.wait, Wait::Nothing) else {
        return Step::Out(CallsNext::Wait(c));
    };
    let (session_id, run_id) = sh.voice.ids();
    sh.voice
        .critical(Event::ClientToolCancel(ClientToolCancelData {
            session_id,
            run_id,
            call_id: id,
        }));
    c.outcomes[0] = Some(ToolOutcome::fail(if sh.cancelled {
        "cancelled"
    } else {
        "timed out: the client did not answer"
    }));
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

/// Runs the `post_tool` hooks matching the completed call from index `from`.
fn post_hooks(sh: &mut Shared, mut c: Box<Calls>, from: usize, ok: bool) -> Step {
    let hooks = &sh.cfg.hooks.post_tool;
    let Some((name, input)) = &c.post else {
        c.wait = Wait::Nothing;
        return Step::Go(c, Todo::Complete);
    };
    if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(name)) {
        let stdin = HookInput {
            event: "post_tool",
            input,
            ok: Some(ok),
            session_id: &sh.cfg.session_id,
            tool: name,
        };
        sh.voice.queue.push_back(Output::Hook {
            command: hooks[i].command.clone(),
            stdin: stdin.bytes(),
        });
        c.wait = Wait::PostHook { hook: i, ok };
        return Step::Out(CallsNext::Wait(c));
    }
    c.post = None;
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Complete)
}

fn post_hook_ended(sh: &mut Shared, c: Box<Calls>, hook: usize, ok: bool, end: HookEnd) -> Step {
    match end {
        HookEnd::Exit(0) => post_hooks(sh, c, hook + 1, ok),
        // A cancelled run skips the rest.
        HookEnd::Cancelled => {
            let mut c = c;
            c.post = None;
            c.wait = Wait::Nothing;
            Step::Go(c, Todo::Complete)
        }
        end => {
            hook_failed(sh, "post_tool", &end);
            post_hooks(sh, c, hook + 1, ok)
        }
    }
}

/// Every call is answered: the step goes into the conversation and its records are stored
/// before the next request (a crash leaves whole steps).
fn calls_done(sh: &mut Shared, mut c: Box<Calls>) -> Step {
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
    let records = std::mem::take(&mut sh.records);
    sh.voice.queue.push_back(Output::Append {
        records,
        kind: AppendKind::Step,
    });
    c.wait = Wait::Stored;
    Step::Out(CallsNext::Wait(c))
}

/// The step's records' append ended: the next step, or the end (`degraded`).
pub fn step_stored(sh: &mut Shared, c: Box<Calls>, r: Result<Stored, ErrorCode>) -> CallsNext {
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
