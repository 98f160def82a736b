//! One run as a sans-IO state machine (`docs/architecture.md`, "The run machine"): inputs in
//! ([`Run::handle`], with the time they happened), outputs out ([`Run::poll_output`]), no
//! thread, clock, file, socket or process. A driver (`agent::drive`) carries the outputs out —
//! appends, model requests, tool runs, hooks, waits for answers — and feeds their outcomes
//! back; a virtual clock drives it in tests exactly as the real one does.

pub mod call;
pub mod calls;
pub mod compacting;
pub mod compaction;
pub mod content;
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
pub mod outcome;
pub mod repeats;
pub mod segment;
pub mod step;
pub mod voice;

#[cfg(test)]
mod tests;

pub use outcome::{Finished, Persistence, RunOutcome};

use crate::config::{Hooks, Policy};
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::history::{Body, Item, Record};
use crate::mcp::Lost;
use crate::providers::{ModelEvent, StepFailure};
use crate::tools::{ToolKind, ToolOutcome, ToolRegistry};
use crate::wire::events::MessageDeltaData;
use crate::wire::{DiagnosticCode, Event};
use compaction::Compactor;
use content::Content;
use protocol_core::ErrorCode;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use voice::Voice;

/// The policy of each tool class, from the settings.
#[derive(Debug, Clone, Copy)]
pub struct Policies {
    /// Read-class built-ins.
    pub read: Policy,
    /// Write-class built-ins.
    pub write: Policy,
    /// `shell`.
    pub shell: Policy,
    /// `client.tools`.
    pub client: Policy,
    /// MCP tools.
    pub mcp: Policy,
    /// `task`.
    pub task: Policy,
}

/// Everything a run is started with; nothing in it is read from outside later.
#[derive(Debug, Clone)]
pub struct Config {
    /// The session the events name.
    pub session_id: String,
    /// The run the events name.
    pub run_id: String,
    /// The session ID its records carry (a subagent's own, else the session's).
    pub record_session: String,
    /// A subagent: its events but approval requests stay quiet, its revision is its own.
    pub quiet: bool,
    /// Makes the run's fresh IDs unique (the driver draws it at random).
    pub seed: u128,
    /// The turn's prompt.
    pub prompt: String,
    /// The conversation before it.
    pub history: Snapshot,
    /// The provider (settings name): named by the `context_window` diagnostics.
    pub provider: String,
    /// The bytes the instructions and tool definitions take of each request.
    pub fixed_bytes: u64,
    /// The provider's output bound.
    pub max_output_tokens: u64,
    /// Steps per turn.
    pub max_steps: u32,
    /// The model's context window in tokens; `u64::MAX` never compacts.
    pub context_window: u64,
    /// The run's tool table: kind, class, schema and summary of what it offers.
    pub tools: Arc<ToolRegistry>,
    /// The tool classes' policies.
    pub policies: Policies,
    /// The `pre_tool` and `post_tool` hooks.
    pub hooks: Hooks,
    /// Whether the client negotiated `tool.cards`.
    pub tool_cards: bool,
    /// The session's cwd (cards show paths relative to it).
    pub cwd: PathBuf,
    /// A `mcp_tools_left_out` summary to report once the input is stored.
    pub left_out: Option<String>,
}

/// Which records an [`Output::Append`] carries: the driver reports what the machine needs of
/// the store after each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendKind {
    /// The turn's `user_input`: the store reports the input's revision and record count.
    Input,
    /// A compaction's records.
    Compaction,
    /// A tool step's records.
    Step,
    /// The last records with `run_finished`: the store reports the revision that pages them.
    Final,
}

/// What the store says after a successful append.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stored {
    /// The room the session's projection has left now.
    pub room: Option<Room>,
    /// Records the history holds now ([`AppendKind::Input`]; `None` for a subagent).
    pub records: Option<u64>,
    /// The revision of the history now ([`AppendKind::Input`] and [`AppendKind::Final`]).
    pub revision: Option<String>,
}

/// One model request for the driver to stream: the conversation and its output bound. The
/// driver adds the model, the instructions and the tools (none for a summary).
#[derive(Debug, Clone, PartialEq)]
pub struct StepRequest {
    /// The conversation.
    pub items: Vec<Item>,
    /// The output bound.
    pub max_output_tokens: u64,
}

/// One tool for the driver to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolJob {
    /// Built-in, `task` or MCP (client tools are asked with [`Output::Event`]).
    pub kind: ToolKind,
    /// The tool's name.
    pub name: String,
    /// Its input, checked against its schema.
    pub input: Value,
}

/// How one tool job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEnd {
    /// What it produced; `None` when its thread panicked.
    pub outcome: Option<ToolOutcome>,
    /// The MCP server behind it was found gone.
    pub lost: Option<Lost>,
}

/// How one hook run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HookEnd {
    /// The shell exited with this status and every pipe closed.
    Exit(i32),
    /// It failed otherwise: a short phrase (`timed out after 10 s`, `killed by signal 9`).
    Failed(String),
    /// The run's cancellation stopped it (its group was killed).
    Cancelled,
}

/// What the driver must do next, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Send this event; it must arrive ([`Input::OutputLost`] if it cannot).
    Event(Event),
    /// Send this delta if there is room (a `full` chunk may wait a moment); hand a refused
    /// non-full one back with [`Input::DeltaRefused`].
    Delta {
        /// The delta.
        data: MessageDeltaData,
        /// A whole coalesced chunk.
        full: bool,
    },
    /// Append these records durably, then [`Input::Appended`].
    Append {
        /// The records, to stamp with the time.
        records: Vec<Record>,
        /// What they are.
        kind: AppendKind,
    },
    /// Stream one step: [`Input::Model`], [`Input::Flush`] and [`Input::Retry`] as they come,
    /// then [`Input::StepEnded`].
    Step(StepRequest),
    /// Send the summary request (same model, no tools, nothing streamed): its retries as
    /// [`Input::Retry`], then [`Input::SummaryEnded`].
    Summarize(StepRequest),
    /// Register approval `approval_id` so the client's answer can reach the run, before its
    /// `approval.requested` event goes out.
    OpenApproval(String),
    /// Register client tool call `call_id` before its `client.tool.call` event goes out.
    OpenClientCall(String),
    /// Run one hook command with `stdin` (bounded by the hook bound), then [`Input::HookEnded`].
    Hook {
        /// The shell command.
        command: String,
        /// What it reads.
        stdin: Vec<u8>,
    },
    /// Run these tools (concurrently when several), then [`Input::ToolsEnded`] in order.
    Tools(Vec<ToolJob>),
    /// The run's terminal facts: nothing follows.
    Finished(Finished),
}

/// What happened, for the machine to act on.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The last [`Output::Append`] succeeded, or failed with this code.
    Appended(Result<Stored, ErrorCode>),
    /// One event of the streaming step.
    Model(ModelEvent),
    /// The events of one network read are in: coalesced text goes out.
    Flush,
    /// A retry of the request is about to wait `wait_ms` (attempt counts from 1).
    Retry {
        /// The attempt.
        attempt: u32,
        /// The wait.
        wait_ms: u64,
    },
    /// The streaming step ended.
    StepEnded(Result<(), StepFailure>),
    /// The summary request ended with its raw text.
    SummaryEnded(Result<String, StepFailure>),
    /// The tools of the last [`Output::Tools`] ended, in order.
    ToolsEnded(Vec<ToolEnd>),
    /// The last [`Output::Hook`] ended.
    HookEnded(HookEnd),
    /// The client answered approval `approval_id`.
    Approval {
        /// The approval.
        approval_id: String,
        /// Allowed or denied.
        allow: bool,
    },
    /// The client answered client tool call `call_id`.
    ClientResult {
        /// The call.
        call_id: String,
        /// Whether it succeeded.
        ok: bool,
        /// Its output.
        output: String,
    },
    /// A non-full delta found no room.
    DeltaRefused(MessageDeltaData),
    /// A critical event could not be delivered: the run ends `output_unavailable`.
    OutputLost,
    /// `turn.cancel`, shutdown or EOF.
    Cancel,
    /// Time passed (the deadline of [`Run::timeout`] may have come).
    Tick,
}

/// The run's states (`docs/architecture.md` has the table of what each waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Built, not started.
    Admitted,
    /// Its input's append is out.
    PersistingInput,
    /// A compaction is summarizing or storing.
    Compacting,
    /// A model step is streaming.
    Streaming,
    /// Tool calls are being prepared, run or completed (hooks included).
    RunningCalls,
    /// A call waits for the client's approval.
    AwaitingApproval,
    /// A call waits for the client's tool result.
    AwaitingClientTool,
    /// The terminal records are being appended.
    Finishing,
    /// [`Output::Finished`] is out: every further input is ignored.
    Finished,
}

/// What the driver blocks on while nothing else is pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Waiting {
    /// The client's answer to this approval, until the deadline.
    Approval(String),
    /// The client's result of this call, until the deadline.
    ClientCall(String),
}

/// How the step loop ended before the terminal records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The model called no tool.
    Completed,
    /// Cancelled.
    Cancelled,
    /// Failed with this code.
    Failed(ErrorCode),
}

/// Where a compaction was started, so the run resumes there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    /// Due before a step.
    Due,
    /// The step's reply had no room.
    NoRoom,
    /// The provider refused the step as too long.
    Overflow,
}

/// What the run is doing now, with what it needs to go on.
#[derive(Debug)]
enum Phase {
    Admitted,
    Input(Record),
    Compacting(compacting::Compaction),
    Streaming(step::Streaming),
    Calls(calls::Calls),
    Finishing(End),
    Finished,
}

/// One run: a turn, or a subagent's task.
#[derive(Debug)]
pub struct Run {
    cfg: Config,
    voice: Voice,
    phase: Phase,
    now: u64,
    cancelled: bool,
    /// A record could not be stored: the history is not what the run went on with.
    degraded: bool,
    items: Vec<Item>,
    comp: Compactor,
    content: Content,
    /// The run's records not yet appended.
    records: Vec<Record>,
    steps: u32,
    retried: bool,
    repeats: repeats::Repeats,
    activities: usize,
    activities_full: bool,
}

impl Run {
    /// A run admitted with `cfg`; [`Self::start`] begins it.
    #[must_use]
    pub fn new(cfg: Config) -> Self {
        let mut voice = Voice::new(
            cfg.session_id.clone(),
            cfg.run_id.clone(),
            cfg.record_session.clone(),
            cfg.seed,
        );
        voice.quiet = cfg.quiet;
        // Replaced once the input is stored, from the history the run starts on.
        let comp = Compactor::start(
            Snapshot::default(),
            cfg.context_window,
            cfg.fixed_bytes,
            cfg.cwd.clone(),
            "",
        )
        .0;
        Self {
            cfg,
            voice,
            phase: Phase::Admitted,
            now: 0,
            cancelled: false,
            degraded: false,
            items: Vec::new(),
            comp,
            content: Content::start(Room::none()),
            records: Vec::new(),
            steps: 0,
            retried: false,
            repeats: repeats::Repeats::default(),
            activities: 0,
            activities_full: false,
        }
    }

    /// Starts the run at `now` (ms on the driver's clock): its input's append goes out first,
    /// durable before any provider work.
    pub fn start(&mut self, now: u64) {
        self.now = now;
        if !matches!(self.phase, Phase::Admitted) {
            return;
        }
        let message_id = self.voice.fresh_id("u-");
        let user = self.voice.record(Body::UserInput {
            run_id: self.cfg.run_id.clone(),
            message_id: Some(message_id),
            text: self.cfg.prompt.clone(),
        });
        self.voice.queue.push_back(Output::Append {
            records: vec![user.clone()],
            kind: AppendKind::Input,
        });
        self.phase = Phase::Input(user);
    }

    /// The state the run is in.
    #[must_use]
    pub fn state(&self) -> State {
        match &self.phase {
            Phase::Admitted => State::Admitted,
            Phase::Input(_) => State::PersistingInput,
            Phase::Compacting(_) => State::Compacting,
            Phase::Streaming(_) => State::Streaming,
            Phase::Calls(c) => c.state(),
            Phase::Finishing(_) => State::Finishing,
            Phase::Finished => State::Finished,
        }
    }

    /// The next thing for the driver to do.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.voice.queue.pop_front()
    }

    /// The next output if it is an event or a delta: what a driver carries out while a step
    /// streams, leaving the rest for its loop.
    pub fn poll_event(&mut self) -> Option<Output> {
        match self.voice.queue.front() {
            Some(Output::Event(_) | Output::Delta { .. }) => self.voice.queue.pop_front(),
            _ => None,
        }
    }

    /// What the driver waits for when no output is pending, if anything but a driver-run
    /// action's outcome.
    #[must_use]
    pub fn waiting(&self) -> Option<Waiting> {
        match &self.phase {
            Phase::Calls(c) => c.waiting(),
            _ => None,
        }
    }

    /// When the run's pending timer fires (ms on the driver's clock): feed [`Input::Tick`]
    /// then.
    #[must_use]
    pub fn timeout(&self) -> Option<u64> {
        match &self.phase {
            Phase::Calls(c) => c.deadline(),
            _ => None,
        }
    }

    /// Whether the streaming step must stop (the run's content bound was reached).
    #[must_use]
    pub fn stop_streaming(&self) -> bool {
        matches!(&self.phase, Phase::Streaming(s) if s.over)
    }

    /// Whether a critical event was lost (the driver stops sending).
    #[must_use]
    pub const fn output_lost(&self) -> bool {
        self.voice.output_lost
    }

    /// Acts on `input`, which happened at `now`.
    pub fn handle(&mut self, input: Input, now: u64) {
        self.now = self.now.max(now);
        if matches!(self.phase, Phase::Finished | Phase::Admitted) {
            return;
        }
        match input {
            Input::Cancel => self.cancelled = true,
            Input::OutputLost => {
                self.voice.output_lost = true;
                self.cancelled = true;
            }
            Input::DeltaRefused(d) => {
                if let Phase::Streaming(s) = &mut self.phase {
                    let part = usize::try_from(d.part).unwrap_or(usize::MAX);
                    s.seg.refused(&d.message_id, part, d.text);
                }
            }
            Input::Appended(r) => self.on_appended(r),
            Input::Model(ev) => self.on_model(ev),
            Input::Flush => self.on_flush(),
            Input::Retry { attempt, wait_ms } => self.on_retry(attempt, wait_ms),
            Input::StepEnded(r) => self.on_step_ended(r),
            Input::SummaryEnded(r) => self.on_summary(r),
            input => self.on_call_input(input),
        }
        // Waits end at once on cancellation; everything else notices it where it decides.
        if self.cancelled {
            self.on_call_input(Input::Tick);
        }
    }

    fn on_appended(&mut self, r: Result<Stored, ErrorCode>) {
        if let Ok(Stored {
            room: Some(room), ..
        }) = &r
        {
            self.content.refresh(*room);
        }
        match std::mem::replace(&mut self.phase, Phase::Finished) {
            Phase::Input(user) => self.input_stored(user, r),
            Phase::Compacting(c) => self.compaction_stored(c, r),
            Phase::Calls(c) => self.step_stored(c, r),
            Phase::Finishing(end) => self.final_stored(end, r),
            other => self.phase = other,
        }
    }

    fn input_stored(&mut self, user: Record, r: Result<Stored, ErrorCode>) {
        let stored = match r {
            Ok(s) => s,
            Err(code) => {
                return self.finished(Finished {
                    outcome: RunOutcome::Failed,
                    persistence: Persistence::NotStarted,
                    revision: None,
                    error_code: Some(code),
                })
            }
        };
        let message_id = match &user.body {
            Body::UserInput { message_id, .. } => message_id.clone().unwrap_or_default(),
            _ => String::new(),
        };
        let (session_id, run_id) = self.voice.ids();
        self.voice.critical(Event::InputPersisted(
            crate::wire::events::InputPersistedData {
                session_id,
                run_id,
                message_id,
                durable: crate::wire::common::True,
                revision: stored.revision.unwrap_or_default(),
            },
        ));
        if let Some(summary) = self.cfg.left_out.take() {
            self.voice
                .diagnostic(DiagnosticCode::McpToolsLeftOut, &summary);
        }
        let history = std::mem::take(&mut self.cfg.history);
        let (mut comp, items) = Compactor::start(
            history,
            self.cfg.context_window,
            self.cfg.fixed_bytes,
            self.cfg.cwd.clone(),
            &self.cfg.prompt,
        );
        // The input's record index: the history's count less it (a subagent's history is its
        // own file, which its snapshot already counted).
        let through = stored
            .records
            .map_or_else(|| comp_through_default(&comp), |n| n.saturating_sub(1));
        comp.begin_turn(through, items.len() - 1);
        comp.note(std::slice::from_ref(&user));
        self.comp = comp;
        self.items = items;
        self.content = Content::start(stored.room.unwrap_or_else(Room::none));
        self.begin_step();
    }

    /// Whether another activity fits the run's bound (`run_activities`); counts it if so.
    fn take_activity(&mut self) -> bool {
        let room = self.activities < protocol_core::limits::RUN_ACTIVITIES;
        if room {
            self.activities += 1;
        } else {
            self.activities_full = true;
        }
        room
    }

    /// Appends the last records with `run_finished` (unless an earlier record was lost).
    fn finish(&mut self, end: End) {
        let (outcome, code) = self.terminal(end);
        let mut records = std::mem::take(&mut self.records);
        records.push(self.voice.record(Body::RunFinished {
            run_id: self.cfg.run_id.clone(),
            outcome,
            error_code: code.map(|c| c.as_str().to_owned()),
        }));
        if self.degraded {
            return self.finished(Finished {
                outcome,
                persistence: Persistence::Degraded,
                revision: None,
                error_code: code.or(Some(ErrorCode::PersistenceFailed)),
            });
        }
        self.voice.queue.push_back(Output::Append {
            records,
            kind: AppendKind::Final,
        });
        self.phase = Phase::Finishing(end);
    }

    /// The outcome and code `end` reports; a lost output overrides it.
    fn terminal(&self, end: End) -> (RunOutcome, Option<ErrorCode>) {
        if self.voice.output_lost {
            return (RunOutcome::Failed, Some(ErrorCode::OutputUnavailable));
        }
        match end {
            End::Completed => (RunOutcome::Completed, None),
            End::Cancelled => (RunOutcome::Cancelled, None),
            End::Failed(c) => (RunOutcome::Failed, Some(c)),
        }
    }

    fn final_stored(&mut self, end: End, r: Result<Stored, ErrorCode>) {
        let (outcome, code) = self.terminal(end);
        let finished = match r {
            // Every append succeeded: durable, even if the projection cannot be rebuilt (then
            // the revision is null and the client reopens explicitly).
            Ok(stored) => Finished {
                outcome,
                persistence: Persistence::Durable,
                revision: stored.revision,
                error_code: code,
            },
            Err(_) => Finished {
                outcome,
                persistence: Persistence::Degraded,
                revision: None,
                error_code: code.or(Some(ErrorCode::PersistenceFailed)),
            },
        };
        self.finished(finished);
    }

    fn finished(&mut self, f: Finished) {
        self.voice.queue.push_back(Output::Finished(f));
        self.phase = Phase::Finished;
    }
}

/// The input's record index when the store does not count (a subagent's fresh history).
fn comp_through_default(c: &Compactor) -> u64 {
    c.through().max(1)
}
