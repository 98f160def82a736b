//! The run machine on a virtual clock: a test driver plays the real driver's part
//! (`agent::drive`), answering each output, keeping the appended records as the store.

mod callbacks;
mod code;
mod code_batch;
mod edges;
mod props;

use crate::codemode::text::CellState;
use crate::config::Hooks;
use crate::history::room::Room;
use crate::history::{Body, Item, Record, Replay};
use crate::providers::model::{ModelRequest, Thinking, Usage};
use crate::providers::{anthropic, openai_chat, openai_responses, ModelEvent, StepFailure};
use crate::run::fuzzing::{config, ran};
use crate::run::{
    AppendKind, CellJob, Config, Finished, HookEnd, Idle, Input, InterruptReason, Output, Reply,
    Run, State, StepRequest, Stored, ToolEnd, ToolJob,
};
use crate::tools::ToolOutcome;
use crate::wire::Event;
use protocol_core::ErrorCode;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet, VecDeque};

/// Decides whether append number `n` (from 0) of `kind` fails, and with which code.
type FailAppend = Box<dyn FnMut(usize, AppendKind) -> Option<ErrorCode>>;

/// The test driver: the machine, the virtual clock, the store and everything said.
pub struct Harness {
    pub run: Run,
    /// Milliseconds on the virtual clock.
    pub now: u64,
    /// The records of every successful append, in order.
    pub store: Vec<Record>,
    /// Every output taken, in order.
    pub outputs: Vec<Output>,
    /// Each append's kind and whether it succeeded.
    pub appends: Vec<(AppendKind, bool)>,
    /// The model's events of each step, in order; past the last, the step replies "done".
    pub script: VecDeque<Vec<ModelEvent>>,
    /// The step requests sent.
    pub requests: Vec<StepRequest>,
    /// The tool jobs run.
    pub jobs: Vec<ToolJob>,
    /// Leave tool jobs unanswered (the test feeds `ToolsEnded` itself).
    pub hold_tools: bool,
    /// Leave the steps to the test, which feeds their events itself.
    pub hold_steps: bool,
    /// The exit status every hook ends with (until the cancel).
    pub hook_status: i32,
    /// The cells started, the answers to their nested calls and the interrupts asked for:
    /// the test plays the helper.
    pub cells: Vec<CellJob>,
    pub answers: Vec<(u64, Reply)>,
    pub interrupts: Vec<InterruptReason>,
    /// Play the helper: each cell's code issues these calls at once, ends `completed` once
    /// all are answered, and ends at once on an interrupt.
    pub helper: Option<Vec<(String, Value)>>,
    /// The open cell's first answer's index and its calls.
    open_cell: Option<(usize, u32)>,
    pub fail: FailAppend,
    /// The room each successful append reports.
    pub room: Room,
    /// Inputs fed so far (cancel and crash points count them).
    pub inputs: usize,
    /// Feed `Input::Cancel` before input number `cancel_at`.
    pub cancel_at: Option<usize>,
    /// Drop the machine instead of feeding input number `crash_at`.
    pub crash_at: Option<usize>,
    /// The input count when the cancel was fed.
    pub cancelled_at: Option<usize>,
    pub crashed: bool,
    /// The calls of the last step.
    pub step_calls: usize,
    /// The calls of the step whose calls were in progress at the cancel.
    pub pending_at_cancel: usize,
    /// Model steps and summary requests asked for after the cancel.
    pub steps_after_cancel: usize,
    pub summaries_after_cancel: usize,
    /// Calls the played provider made back mid-step, and whether one is in flight.
    pub callbacks: u64,
    in_call_back: bool,
}

/// A scripted tool call whose ID starts so is a call back mid-step, not the model's call.
pub const CALLBACK: &str = "cb-";
/// The numbers of calls back start here (a played helper's start from 0).
const CALLBACK_BASE: u64 = 1 << 32;

impl Harness {
    /// A harness for `cfg` with `script` for its steps; every append succeeds.
    pub fn new(cfg: Config, script: Vec<Vec<ModelEvent>>) -> Self {
        Self {
            run: Run::new(cfg),
            now: 0,
            store: Vec::new(),
            outputs: Vec::new(),
            appends: Vec::new(),
            script: script.into(),
            requests: Vec::new(),
            jobs: Vec::new(),
            hold_tools: false,
            hold_steps: false,
            hook_status: 0,
            cells: Vec::new(),
            answers: Vec::new(),
            interrupts: Vec::new(),
            helper: None,
            open_cell: None,
            fail: Box::new(|_, _| None),
            room: Room::unbounded(),
            inputs: 0,
            cancel_at: None,
            crash_at: None,
            cancelled_at: None,
            crashed: false,
            step_calls: 0,
            pending_at_cancel: 0,
            steps_after_cancel: 0,
            summaries_after_cancel: 0,
            callbacks: 0,
            in_call_back: false,
        }
    }

    /// The default configuration (200,000-token window, no hooks) with `script`.
    pub fn with(script: Vec<Vec<ModelEvent>>) -> Self {
        Self::new(config(200_000, Hooks::default()), script)
    }

    /// Starts the run at `now` and carries out everything it asks for.
    pub fn start(&mut self, now: u64) {
        self.now = now;
        self.run.start(now);
        self.pump();
    }

    pub fn cancelled(&self) -> bool {
        self.cancelled_at.is_some()
    }

    /// Feeds one input at the clock's time (a cancel first at the cancel point).
    pub fn feed(&mut self, input: Input) {
        if self.crashed {
            return;
        }
        if self.crash_at == Some(self.inputs) {
            self.crashed = true;
            return;
        }
        if self.cancel_at == Some(self.inputs) && !self.cancelled() {
            self.cancel();
        }
        if matches!(input, Input::Cancel | Input::OutputLost) && !self.cancelled() {
            self.note_cancel();
        }
        self.inputs += 1;
        self.run.handle(input, self.now);
    }

    /// Feeds `Input::Cancel` now.
    pub fn cancel(&mut self) {
        self.note_cancel();
        self.inputs += 1;
        self.run.handle(Input::Cancel, self.now);
    }

    /// Notes where the cancel came: the inputs after it count from here.
    fn note_cancel(&mut self) {
        self.cancelled_at = Some(self.inputs + 1);
        let calls = matches!(
            self.run.state(),
            State::RunningCalls | State::AwaitingApproval | State::AwaitingClientTool
        );
        self.pending_at_cancel = if calls {
            self.step_calls
        } else {
            // A call back in flight mid-step is one pending call.
            usize::from(self.in_call_back)
        };
    }

    /// Carries out the outputs until the machine waits for the client or has finished, as
    /// the real driver does; a cancelled run's actions end as the real ones do (cancelled).
    pub fn pump(&mut self) {
        while !self.crashed {
            let o = match self.run.poll_output() {
                None | Some(Output::Idle(_)) => return,
                Some(o) => o,
            };
            self.outputs.push(o.clone());
            match o {
                Output::Append { records, kind } => {
                    let n = self.appends.len();
                    let r = match (self.fail)(n, kind) {
                        Some(code) => Err(code),
                        None => {
                            self.store.extend(records);
                            Ok(Stored {
                                room: Some(self.room),
                                records: Some(self.store.len() as u64),
                                revision: Some(format!("rev-{}", self.store.len())),
                            })
                        }
                    };
                    self.appends.push((kind, r.is_ok()));
                    self.feed(Input::Appended(r));
                }
                Output::Step(req) if self.hold_steps => self.requests.push(req),
                Output::Step(req) => {
                    self.requests.push(req);
                    self.steps_after_cancel += usize::from(self.cancelled());
                    let events = self
                        .script
                        .pop_front()
                        .unwrap_or_else(|| vec![text("done")]);
                    self.step_calls = events
                        .iter()
                        .filter(|e| matches!(e, ModelEvent::ToolCall { .. }))
                        .count();
                    // A cancelled step stops streaming at once, as the provider's does.
                    for e in events {
                        if self.cancelled() || self.crashed {
                            break;
                        }
                        match e {
                            // A provider that runs its own loop calls the tool back mid-step.
                            ModelEvent::ToolCall {
                                call_id,
                                name,
                                input,
                            } if call_id.starts_with(CALLBACK) => self.call_back(name, input),
                            e => self.feed(Input::Model(e)),
                        }
                    }
                    if self.cancelled() {
                        self.feed(Input::StepEnded(Err(StepFailure::Cancelled)));
                        continue;
                    }
                    self.feed(Input::Flush);
                    self.feed(Input::StepEnded(Ok(())));
                }
                Output::Summarize(_) => {
                    self.summaries_after_cancel += usize::from(self.cancelled());
                    let r = if self.cancelled() {
                        Err(StepFailure::Cancelled)
                    } else {
                        Ok("the summary so far".to_owned())
                    };
                    self.feed(Input::SummaryEnded(r));
                }
                Output::Tools { jobs, .. } if self.hold_tools => self.jobs.extend(jobs),
                Output::Tools { jobs, .. } => self.tools(jobs),
                Output::Hook { .. } => {
                    let end = if self.cancelled() {
                        HookEnd::Cancelled
                    } else {
                        HookEnd::Exit(self.hook_status)
                    };
                    self.feed(Input::HookEnded(end));
                }
                Output::Cell(job) => self.cell(job),
                Output::Answer { call, result } => {
                    self.answers.push((call, result));
                    self.helper_answered();
                }
                Output::Interrupt(why) => {
                    self.interrupts.push(why);
                    let state = match why {
                        InterruptReason::Timeout => CellState::TimedOut,
                        InterruptReason::Cancel => CellState::Cancelled,
                    };
                    self.end_cell(state);
                }
                Output::Event(_)
                | Output::Delta { .. }
                | Output::OpenApproval(_)
                | Output::Preview { .. }
                | Output::OpenClientCall(_)
                | Output::Idle(_)
                | Output::Finished(_) => {}
            }
        }
    }

    /// The played provider calls `name` back mid-step and waits for its answer: every output
    /// until the run is idle again is carried out first (an approval it waits for is left to
    /// the test, which then finds no answer).
    fn call_back(&mut self, name: String, input: Value) {
        let call = CALLBACK_BASE + self.callbacks;
        self.callbacks += 1;
        self.in_call_back = true;
        self.feed(Input::Call {
            call,
            name,
            input,
            more: false,
            refused: None,
            id: None,
        });
        self.pump();
        self.in_call_back = false;
    }

    /// The answers the played provider got to its calls back, in order.
    pub fn callback_answers(&self) -> Vec<&Reply> {
        self.answers
            .iter()
            .filter(|(c, _)| *c >= CALLBACK_BASE)
            .map(|(_, r)| r)
            .collect()
    }

    /// A cell starts; the helper, if played, issues its calls.
    fn cell(&mut self, job: CellJob) {
        self.cells.push(job);
        let Some(calls) = self.helper.clone() else {
            return;
        };
        self.open_cell = Some((self.answers.len(), calls.len() as u32));
        let last = calls.len().saturating_sub(1);
        // Sent together, as the helper sends the calls of one flush.
        for (n, (name, input)) in calls.into_iter().enumerate() {
            self.feed(Input::Call {
                call: n as u64,
                name,
                input,
                more: n < last,
                refused: None,
                id: None,
            });
        }
        self.helper_answered();
    }

    /// The played helper ends its cell once every call is answered.
    fn helper_answered(&mut self) {
        if let Some((from, n)) = self.open_cell {
            if self.answers.len() - from >= n as usize {
                self.end_cell(CellState::Completed);
            }
        }
    }

    /// The played helper's cell ends in `state`.
    fn end_cell(&mut self, state: CellState) {
        if self.open_cell.take().is_some() {
            self.feed(Input::CellEnded {
                state,
                output: String::new(),
                elapsed_ms: 0,
            });
        }
    }

    /// Runs the jobs at once: each succeeds, or ends cancelled once the run is.
    fn tools(&mut self, jobs: Vec<ToolJob>) {
        let ends = jobs
            .iter()
            .map(|j| ToolEnd {
                outcome: Some(if self.cancelled() {
                    ToolOutcome::fail("cancelled")
                } else {
                    ran(&format!("out of {}", j.name))
                }),
                lost: None,
            })
            .collect();
        self.jobs.extend(jobs);
        self.feed(Input::ToolsEnded(ends));
    }

    /// What the run waits for now (whatever it has queued).
    pub fn idle(&self) -> Idle {
        self.run.idle_now()
    }

    /// The terminal facts, if out.
    pub fn finished(&self) -> Vec<&Finished> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Finished(f) => Some(f),
                _ => None,
            })
            .collect()
    }

    /// The one `Finished`, last of the outputs.
    pub fn the_end(&self) -> &Finished {
        let f = self.finished();
        assert_eq!(f.len(), 1, "one Finished: {f:?}");
        assert!(
            matches!(self.outputs.last(), Some(Output::Finished(_))),
            "Finished is the last output"
        );
        f[0]
    }

    /// The events sent, in order.
    pub fn events(&self) -> Vec<&Event> {
        self.outputs
            .iter()
            .filter_map(|o| match o {
                Output::Event(e) => Some(e),
                _ => None,
            })
            .collect()
    }

    /// The stored `tool_result` of `call_id`: its output and error flag.
    pub fn result_of(&self, call_id: &str) -> (String, bool) {
        let found: Vec<_> = self
            .store
            .iter()
            .filter_map(|r| match &r.body {
                Body::ToolResult {
                    call_id: c,
                    output,
                    is_error,
                    ..
                } if c == call_id => Some((output.clone(), *is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(found.len(), 1, "one result of {call_id}: {found:?}");
        found[0].clone()
    }
}

/// A text delta.
pub fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta(t.into())
}

/// A tool call.
pub fn call(id: &str, name: &str, input: Value) -> ModelEvent {
    ModelEvent::ToolCall {
        call_id: id.into(),
        name: name.into(),
        input,
    }
}

/// A step's usage.
pub fn usage(input_tokens: u64) -> ModelEvent {
    ModelEvent::Usage(Usage {
        input_tokens,
        output_tokens: 10,
        cached_input_tokens: None,
        cache_creation_input_tokens: None,
    })
}

/// A write call (asks for approval).
pub fn write(id: &str) -> ModelEvent {
    call(id, "write_file", json!({"path": "w.txt", "content": "x"}))
}

/// Every stored `tool_call` has exactly one `tool_result` after it, and every result answers
/// a call stored before it.
pub fn calls_answered(store: &[Record]) -> Result<(), String> {
    let mut open = HashSet::new();
    let mut answered = HashSet::new();
    for r in store {
        match &r.body {
            Body::ToolCall { call_id, .. }
                if !open.insert(call_id.clone()) || answered.contains(call_id) =>
            {
                return Err(format!("call {call_id} stored twice"));
            }
            Body::ToolResult { call_id, .. } => {
                if !open.remove(call_id) {
                    return Err(format!("result {call_id} answers no open call"));
                }
                answered.insert(call_id.clone());
            }
            _ => {}
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("calls without a result: {open:?}"))
    }
}

/// The conversation a later turn replays from `store` (an unfinished turn closed as
/// interrupted), as the session's reader builds it.
pub fn replayed(store: &[Record]) -> Vec<Item> {
    let mut r = Replay::default();
    for rec in store {
        let line = serde_json::to_vec(rec).unwrap().len() + 1;
        r.push(rec, line);
    }
    r.close_open_turn();
    r.items().to_vec()
}

/// User and assistant alternate (a user item only first or after assistant text) and the
/// conversation ends with assistant text (`history::replay`'s own check).
pub fn alternates(items: &[Item]) -> Result<(), String> {
    for (i, it) in items.iter().enumerate() {
        if matches!(it, Item::User { .. })
            && i > 0
            && !matches!(items[i - 1], Item::Assistant { .. })
        {
            return Err(format!("user item {i} does not follow assistant text"));
        }
    }
    match items.last() {
        None | Some(Item::Assistant { .. }) => Ok(()),
        Some(last) => Err(format!("ends with {last:?}")),
    }
}

/// Whether `items`, sent as one request, is valid on all three wire APIs: roles alternate
/// (Anthropic) and every call is answered by the next message (Anthropic), by the `tool`
/// messages right after its assistant message (Chat), before the next message (Responses).
pub fn valid_request(items: &[Item]) -> Result<(), String> {
    let req = ModelRequest {
        model: "m",
        provider: "anthropic",
        instructions: "be good",
        items,
        tools: &[],
        effort: None,
        thinking: Thinking::Adaptive,
        max_output_tokens: 100,
    };
    anthropic_valid(&anthropic::request_body(&req)).map_err(|e| format!("anthropic: {e}"))?;
    chat_valid(&openai_chat::request_body(&req)).map_err(|e| format!("chat: {e}"))?;
    responses_valid(&openai_responses::request_body(&req)).map_err(|e| format!("responses: {e}"))
}

fn blocks<'a>(m: &'a Value, kind: &str, key: &str) -> Vec<&'a str> {
    m["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == kind)
        .filter_map(|b| b[key].as_str())
        .collect()
}

fn anthropic_valid(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let mut uses: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if role != want {
            return Err(format!("message {i} is {role}, not {want}"));
        }
        if role == "user" {
            let mut results = blocks(m, "tool_result", "tool_use_id");
            results.sort_unstable();
            uses.sort_unstable();
            if results != uses {
                return Err(format!("message {i} answers {results:?}, not {uses:?}"));
            }
            uses.clear();
        } else {
            uses = blocks(m, "tool_use", "id");
        }
    }
    match messages.last() {
        Some(m) if m["role"] == "user" => Ok(()),
        _ => Err("the request does not end with a user message".into()),
    }
}

fn chat_valid(body: &Value) -> Result<(), String> {
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or_default();
        if role == "tool" {
            let id = m["tool_call_id"].as_str().unwrap_or_default();
            let Some(k) = open.iter().position(|c| *c == id) else {
                return Err(format!("tool message {i} answers no open call ({id})"));
            };
            open.remove(k);
            continue;
        }
        if !open.is_empty() {
            return Err(format!(
                "message {i} ({role}) before the results of {open:?}"
            ));
        }
        if role == "assistant" {
            open = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["id"].as_str())
                .collect();
        }
    }
    if !open.is_empty() {
        return Err(format!("unanswered calls {open:?}"));
    }
    match messages.last() {
        Some(m) if m["role"] == "user" || m["role"] == "tool" => Ok(()),
        _ => Err("the request ends with the assistant".into()),
    }
}

fn responses_valid(body: &Value) -> Result<(), String> {
    let input = body["input"].as_array().ok_or("no input")?;
    let mut open: HashMap<&str, usize> = HashMap::new();
    let mut seen = HashSet::new();
    for (i, it) in input.iter().enumerate() {
        let id = it["call_id"].as_str().unwrap_or_default();
        match it["type"].as_str() {
            Some("function_call") => {
                if !seen.insert(id) {
                    return Err(format!("call {id} twice"));
                }
                open.insert(id, i);
            }
            Some("function_call_output") if open.remove(id).is_none() => {
                return Err(format!("output {i} answers no open call ({id})"));
            }
            Some("function_call_output") => {}
            _ if !open.is_empty() => {
                return Err(format!("item {i} before the outputs of {open:?}"));
            }
            _ => {}
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!("unanswered calls {open:?}"))
    }
}

/// The replayed conversation from `store`, with a next turn's input: alternates, answers
/// every call, and is a valid request on all three APIs.
pub fn replay_valid(store: &[Record]) -> Result<(), String> {
    let mut items = replayed(store);
    alternates(&items)?;
    items.push(Item::User {
        text: "next".into(),
    });
    valid_request(&items)
}
