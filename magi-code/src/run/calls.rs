//! A step's tool calls as states of the run: each call's `started` activity and card, its
//! schema check, policy and approval, `pre_tool` hooks, the tool (built-ins, `task` and MCP by
//! the driver, client tools by the client), its final activity, `post_tool` hooks and result;
//! then the step's records stored. Every call is answered, results in the model's order; a
//! run of consecutive read-class calls that need no approval runs concurrently, up to
//! [`CONCURRENT_READS`] at a time.

use super::call::{cancelled_run, over_activities, Prepared, ToolRun};
use super::repeats::REPEATED;
use super::{End, HookEnd, Input, Output, Phase, Run, State, Stored, ToolEnd, ToolJob, Waiting};
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

/// What a hook reads on stdin: the call as JSON (keys in sorted order).
#[derive(serde::Serialize)]
struct HookInput<'a> {
    event: &'static str,
    input: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    ok: Option<bool>,
    session_id: &'a str,
    tool: &'a str,
}

impl HookInput<'_> {
    fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// One call of a batch.
#[derive(Debug)]
enum Slot {
    /// Answered without running (a repeated call).
    Done(ToolRun),
    /// Never started: the run was cancelled or its activity bound was reached.
    Skipped,
    /// Started: its final activity comes after the batch runs.
    Started(Box<Prepared>),
}

/// What the calls wait for.
#[derive(Debug)]
enum Wait {
    /// Nothing outside: the machine goes on.
    Nothing,
    /// The client's approval of the call being prepared.
    Approval { id: String, deadline: u64 },
    /// The `pre_tool` hook at this index.
    PreHook(usize),
    /// The batch's tool jobs; `slots[i]` is job `jobs[i]`'s call.
    Tools(Vec<usize>),
    /// The client's result of its tool.
    Client { id: String, deadline: u64 },
    /// The `post_tool` hook at this index, for a call that ran and ended `ok`.
    PostHook { hook: usize, ok: bool },
    /// The step's records' append.
    Stored,
}

/// A step's calls in progress.
#[derive(Debug)]
pub struct Calls {
    step_items: Vec<Item>,
    list: Vec<(String, String, Value)>,
    repeated: Vec<bool>,
    /// The batch's first call and size.
    at: usize,
    n: usize,
    slots: Vec<Slot>,
    /// The call being prepared (waiting for its approval or a hook).
    current: Option<Prepared>,
    outcomes: Vec<Option<ToolOutcome>>,
    /// The batch member being completed, and its post hook's call.
    done: usize,
    post: Option<(String, Value)>,
    runs: Vec<ToolRun>,
    results: Vec<Item>,
    wait: Wait,
}

impl Calls {
    /// The run state it stands for.
    pub(super) const fn state(&self) -> State {
        match self.wait {
            Wait::Approval { .. } => State::AwaitingApproval,
            Wait::Client { .. } => State::AwaitingClientTool,
            _ => State::RunningCalls,
        }
    }

    /// What the driver blocks on.
    pub(super) fn waiting(&self) -> Option<Waiting> {
        match &self.wait {
            Wait::Approval { id, .. } => Some(Waiting::Approval(id.clone())),
            Wait::Client { id, .. } => Some(Waiting::ClientCall(id.clone())),
            _ => None,
        }
    }

    /// When the wait expires.
    pub(super) const fn deadline(&self) -> Option<u64> {
        match self.wait {
            Wait::Approval { deadline, .. } | Wait::Client { deadline, .. } => Some(deadline),
            _ => None,
        }
    }
}

impl Run {
    /// Runs the step's `calls` (the step's assistant items go into the conversation after).
    pub(super) fn start_calls(
        &mut self,
        step_items: Vec<Item>,
        list: Vec<(String, String, Value)>,
    ) {
        let repeated = list.iter().map(|c| self.repeats.see(&c.1, &c.2)).collect();
        let calls = Calls {
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
        };
        self.next_batch(calls);
    }

    /// Whether a call runs without asking: a read-class tool whose policy is `allow`, with an
    /// object input. Such calls may run concurrently.
    fn runs_unasked(&self, (_, name, input): &(String, String, Value)) -> bool {
        self.cfg.tools.class(name) == Some(ToolClass::Read)
            && self.cfg.policies.read == Policy::Allow
            && input.is_object()
    }

    fn next_batch(&mut self, mut c: Calls) {
        c.at += c.n;
        if c.at >= c.list.len() {
            return self.calls_done(c);
        }
        let (at, len) = (c.at, c.list.len());
        let mut n = 1;
        while at + n < len
            && n < CONCURRENT_READS
            && !c.repeated[at]
            && !c.repeated[at + n]
            && self.runs_unasked(&c.list[at])
            && self.runs_unasked(&c.list[at + n])
        {
            n += 1;
        }
        c.n = n;
        c.slots.clear();
        c.outcomes.clear();
        c.runs.clear();
        c.done = 0;
        self.prepare(c);
    }

    /// Prepares the batch's calls in order until one waits for the client or a hook.
    fn prepare(&mut self, mut c: Calls) {
        while c.slots.len() < c.n {
            let i = c.at + c.slots.len();
            let (call_id, name, input) = c.list[i].clone();
            let record = self.voice.record(Body::ToolCall {
                run_id: self.cfg.run_id.clone(),
                call_id,
                name: name.clone(),
                input: input.clone(),
            });
            self.records.push(record);
            if self.cancelled || !self.take_activity() {
                c.slots.push(Slot::Skipped);
                continue;
            }
            if c.n == 1 && c.repeated[i] {
                let mut p = self.start_call(name, input);
                p.refused = Some(REPEATED.to_owned());
                let run = self.complete(p, None);
                self.voice.diagnostic(
                    DiagnosticCode::RepeatedToolCall,
                    "the model asked for the same tool call with the same input 3 or more times in a row; it was not run",
                );
                c.slots.push(Slot::Done(run));
                continue;
            }
            let mut p = self.start_call(name, input);
            p.refused = self.cfg.tools.check(&p.name, &p.input).err();
            if p.refused.is_none() {
                match self.policy(&p.name) {
                    None => p.refused = Some("unknown tool".to_owned()),
                    Some(Policy::Deny) => p.refused = Some("denied by policy".to_owned()),
                    Some(Policy::Allow) => {}
                    Some(Policy::Ask) => return self.ask(c, p),
                }
            }
            if p.refused.is_none() {
                return self.pre_hooks(c, p, 0);
            }
            c.slots.push(Slot::Started(Box::new(p)));
        }
        self.execute(c);
    }

    fn ask(&mut self, mut c: Calls, p: Prepared) {
        let id = self.voice.fresh().hyphenated().to_string();
        self.voice.queue.push_back(Output::OpenApproval(id.clone()));
        let (session_id, run_id) = self.voice.ids();
        self.voice
            .critical(Event::ApprovalRequested(ApprovalRequestedData {
                session_id,
                run_id,
                approval_id: id.clone(),
                summary: p.described.clone(),
                expires_in_ms: APPROVAL_EXPIRY_MS,
            }));
        c.wait = Wait::Approval {
            id,
            deadline: self.now.saturating_add(APPROVAL_EXPIRY_MS),
        };
        c.current = Some(p);
        self.phase = Phase::Calls(c);
    }

    /// Runs the `pre_tool` hooks matching the call from index `from`; when none is left the
    /// call is prepared.
    fn pre_hooks(&mut self, mut c: Calls, mut p: Prepared, from: usize) {
        let hooks = &self.cfg.hooks.pre_tool;
        if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(&p.name)) {
            let stdin = HookInput {
                event: "pre_tool",
                input: &p.input,
                ok: None,
                session_id: &self.cfg.session_id,
                tool: &p.name,
            };
            self.voice.queue.push_back(Output::Hook {
                command: hooks[i].command.clone(),
                stdin: stdin.bytes(),
            });
            c.wait = Wait::PreHook(i);
            c.current = Some(p);
            self.phase = Phase::Calls(c);
            return;
        }
        p.post = self.cfg.hooks.post_tool.iter().any(|h| h.matches(&p.name));
        c.slots.push(Slot::Started(Box::new(p)));
        c.wait = Wait::Nothing;
        self.prepare(c);
    }

    /// A call the run refuses while preparing it (a denial, a blocking hook, cancellation).
    fn refused(&mut self, mut c: Calls, why: &str) {
        if let Some(mut p) = c.current.take() {
            p.refused = Some(why.to_owned());
            c.slots.push(Slot::Started(Box::new(p)));
        }
        c.wait = Wait::Nothing;
        self.prepare(c);
    }

    /// Every call of the batch is prepared: the ones that may run go to the driver (or to the
    /// client).
    fn execute(&mut self, mut c: Calls) {
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
                    return self.ask_client(c, &name, &input);
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
            return self.complete_batch(c);
        }
        self.voice.queue.push_back(Output::Tools(jobs));
        c.wait = Wait::Tools(of);
        self.phase = Phase::Calls(c);
    }

    /// Asks the client to run its tool (at most the advertised `client_tool_timeout_ms`).
    fn ask_client(&mut self, mut c: Calls, name: &str, input: &Value) {
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
            return self.complete_batch(c);
        }
        let id = self.voice.fresh().hyphenated().to_string();
        self.voice
            .queue
            .push_back(Output::OpenClientCall(id.clone()));
        let (session_id, run_id) = self.voice.ids();
        self.voice
            .critical(Event::ClientToolCall(ClientToolCallData {
                session_id,
                run_id,
                call_id: id.clone(),
                name: name.to_owned(),
                input: input.as_object().cloned().unwrap_or_default(),
            }));
        c.wait = Wait::Client {
            id,
            deadline: self.now.saturating_add(CLIENT_TOOL_TIMEOUT_MS),
        };
        self.phase = Phase::Calls(c);
    }

    /// Inputs the calls wait for: answers, hook and tool ends, the time.
    pub(super) fn on_call_input(&mut self, input: Input) {
        if !matches!(self.phase, Phase::Calls(_)) {
            return;
        }
        let Phase::Calls(c) = std::mem::replace(&mut self.phase, Phase::Finished) else {
            return;
        };
        match (input, &c.wait) {
            (Input::Approval { approval_id, allow }, Wait::Approval { id, .. })
                if *id == approval_id =>
            {
                self.approved(c, allow);
            }
            (Input::Tick, Wait::Approval { .. }) if self.cancelled => {
                self.refused(c, "cancelled");
            }
            (Input::Tick, Wait::Approval { deadline, .. }) if self.now >= *deadline => {
                self.refused(c, "denied by the user (the approval expired)");
            }
            (Input::HookEnded(end), Wait::PreHook(i)) => {
                let i = *i;
                self.pre_hook_ended(c, i, end);
            }
            (Input::HookEnded(end), Wait::PostHook { hook, ok }) => {
                let (hook, ok) = (*hook, *ok);
                self.post_hook_ended(c, hook, ok, end);
            }
            (Input::ToolsEnded(ends), Wait::Tools(_)) => self.tools_ended(c, ends),
            (
                Input::ClientResult {
                    call_id,
                    ok,
                    output,
                },
                Wait::Client { id, .. },
            ) if *id == call_id => self.client_answered(c, ok, output),
            (Input::Tick, Wait::Client { deadline, .. })
                if self.cancelled || self.now >= *deadline =>
            {
                self.client_gone(c);
            }
            _ => self.phase = Phase::Calls(c),
        }
    }

    fn approved(&mut self, mut c: Calls, allow: bool) {
        if !allow {
            return self.refused(c, "denied by the user");
        }
        c.wait = Wait::Nothing;
        match c.current.take() {
            Some(p) => self.pre_hooks(c, p, 0),
            None => self.prepare(c),
        }
    }

    fn pre_hook_ended(&mut self, mut c: Calls, i: usize, end: HookEnd) {
        match end {
            HookEnd::Exit(0) => {}
            HookEnd::Exit(BLOCK_STATUS) => return self.refused(c, BLOCKED),
            HookEnd::Cancelled => return self.refused(c, "cancelled"),
            end => self.hook_failed("pre_tool", &end),
        }
        match c.current.take() {
            Some(p) => self.pre_hooks(c, p, i + 1),
            None => {
                c.wait = Wait::Nothing;
                self.prepare(c);
            }
        }
    }

    /// The diagnostic never names the command or the input: either may hold a secret.
    fn hook_failed(&mut self, event: &str, end: &HookEnd) {
        let why = match end {
            HookEnd::Exit(code) => format!("exit {code}"),
            HookEnd::Failed(p) => p.clone(),
            HookEnd::Cancelled => "cancelled".to_owned(),
        };
        self.voice.diagnostic(
            DiagnosticCode::HookFailed,
            &format!("a {event} hook failed ({why})"),
        );
    }

    fn tools_ended(&mut self, mut c: Calls, ends: Vec<ToolEnd>) {
        let Wait::Tools(of) = std::mem::replace(&mut c.wait, Wait::Nothing) else {
            return self.phase = Phase::Calls(c);
        };
        for (j, end) in of.into_iter().zip(ends) {
            match end.lost {
                Some(Lost::Exited) => self.voice.diagnostic(
                    DiagnosticCode::McpServerExited,
                    "an MCP server has exited; its tools fail",
                ),
                Some(Lost::Failed) => self.voice.diagnostic(
                    DiagnosticCode::McpServerFailed,
                    "an MCP server broke the protocol and was stopped; its tools fail",
                ),
                None => {}
            }
            if let Some(o) = c.outcomes.get_mut(j) {
                *o = end.outcome;
            }
        }
        self.complete_batch(c);
    }

    fn client_answered(&mut self, mut c: Calls, ok: bool, output: String) {
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
        self.complete_batch(c);
    }

    /// The client did not answer in time, or the run was cancelled: the client is told.
    fn client_gone(&mut self, mut c: Calls) {
        let Wait::Client { id, .. } = std::mem::replace(&mut c.wait, Wait::Nothing) else {
            return self.phase = Phase::Calls(c);
        };
        let (session_id, run_id) = self.voice.ids();
        self.voice
            .critical(Event::ClientToolCancel(ClientToolCancelData {
                session_id,
                run_id,
                call_id: id,
            }));
        c.outcomes[0] = Some(ToolOutcome::fail(if self.cancelled {
            "cancelled"
        } else {
            "timed out: the client did not answer"
        }));
        self.complete_batch(c);
    }

    /// Completes the batch's calls in order (each call's `post_tool` hooks before the next),
    /// then answers them all.
    fn complete_batch(&mut self, mut c: Calls) {
        while c.done < c.n {
            let slot = std::mem::replace(&mut c.slots[c.done], Slot::Skipped);
            let outcome = c.outcomes[c.done].take();
            c.done += 1;
            let run = match slot {
                Slot::Done(run) => run,
                Slot::Skipped if self.cancelled => cancelled_run(),
                Slot::Skipped => over_activities(),
                Slot::Started(p) => {
                    let p = *p;
                    let ran = outcome
                        .as_ref()
                        .filter(|_| p.refused.is_none())
                        .map(|o| o.ok);
                    let post = (p.post, p.name.clone(), p.input.clone());
                    let run = self.complete(p, outcome);
                    if let (true, name, input, Some(ok)) = (post.0, post.1, post.2, ran) {
                        c.runs.push(run);
                        c.post = Some((name, input));
                        return self.post_hooks(c, 0, ok);
                    }
                    run
                }
            };
            c.runs.push(run);
        }
        for ((call_id, _, _), run) in c.list[c.at..c.at + c.n].iter().zip(c.runs.drain(..)) {
            let record = self.voice.record(Body::ToolResult {
                run_id: self.cfg.run_id.clone(),
                call_id: call_id.clone(),
                output: run.output.clone(),
                is_error: run.is_error,
            });
            self.records.push(record);
            c.results.push(Item::ToolResult {
                call_id: call_id.clone(),
                output: run.output,
                is_error: run.is_error,
            });
        }
        self.next_batch(c);
    }

    /// Runs the `post_tool` hooks matching the completed call from index `from`.
    fn post_hooks(&mut self, mut c: Calls, from: usize, ok: bool) {
        let hooks = &self.cfg.hooks.post_tool;
        let Some((name, input)) = &c.post else {
            c.wait = Wait::Nothing;
            return self.complete_batch(c);
        };
        if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(name)) {
            let stdin = HookInput {
                event: "post_tool",
                input,
                ok: Some(ok),
                session_id: &self.cfg.session_id,
                tool: name,
            };
            self.voice.queue.push_back(Output::Hook {
                command: hooks[i].command.clone(),
                stdin: stdin.bytes(),
            });
            c.wait = Wait::PostHook { hook: i, ok };
            self.phase = Phase::Calls(c);
            return;
        }
        c.post = None;
        c.wait = Wait::Nothing;
        self.complete_batch(c);
    }

    fn post_hook_ended(&mut self, c: Calls, hook: usize, ok: bool, end: HookEnd) {
        match end {
            HookEnd::Exit(0) => self.post_hooks(c, hook + 1, ok),
            // A cancelled run skips the rest.
            HookEnd::Cancelled => {
                let mut c = c;
                c.post = None;
                c.wait = Wait::Nothing;
                self.complete_batch(c);
            }
            end => {
                self.hook_failed("post_tool", &end);
                self.post_hooks(c, hook + 1, ok);
            }
        }
    }

    /// Every call is answered: the step goes into the conversation and its records are stored
    /// before the next request (a crash leaves whole steps).
    fn calls_done(&mut self, mut c: Calls) {
        self.content.charge(&self.records);
        self.items.append(&mut c.step_items);
        self.items.append(&mut c.results);
        if self.activities_full {
            // The bound is reached: the calls past it were answered with an error; the run
            // ends here rather than letting the model go on without tools.
            self.voice.diagnostic(
                DiagnosticCode::ContentLimit,
                &format!("the turn reached its bound of {RUN_ACTIVITIES} tool activities"),
            );
            return self.finish(End::Failed(ErrorCode::ContentLimit));
        }
        self.retried = false;
        self.comp.note(&self.records);
        let records = std::mem::take(&mut self.records);
        self.voice.queue.push_back(Output::Append {
            records,
            kind: super::AppendKind::Step,
        });
        c.wait = Wait::Stored;
        self.phase = Phase::Calls(c);
    }

    /// The step's records' append ended: the next step, or the end (`degraded`).
    pub(super) fn step_stored(&mut self, c: Calls, r: Result<Stored, ErrorCode>) {
        if !matches!(c.wait, Wait::Stored) {
            self.phase = Phase::Calls(c);
            return;
        }
        if r.is_err() {
            self.degraded = true;
            return self.finish(End::Failed(ErrorCode::PersistenceFailed));
        }
        self.begin_step();
    }
}
