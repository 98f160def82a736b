//! What goes into the run machine and what comes out: its configuration, inputs, outputs,
//! states and the small facts they carry. Types only.

use super::outcome::Finished;
use crate::codemode::text::{CellState, ToolErrorCode};
use crate::config::code_mode::CodePolicies;
use crate::config::{Hooks, Policy};
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::history::{Item, Record};
use crate::mcp::Lost;
use crate::providers::{ModelEvent, StepFailure};
use crate::tools::{ToolKind, ToolOutcome, ToolRegistry};
use crate::wire::events::{MessageDeltaData, ToolDiffData};
use crate::wire::Event;
use protocol_core::ErrorCode;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// `exec`, called directly (`tools.code`).
    pub code: Policy,
}

/// One tool reachable from code: what `ALL_TOOLS` and `describe(name)` show of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellTool {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its one-line TypeScript declaration (`codemode::decl::declaration`).
    pub declaration: String,
}

/// Code Mode for a run that offers `exec` (`code-mode.md` 2).
#[derive(Debug, Clone)]
pub struct CodeConfig {
    /// The policies of nested calls (`code_mode.tools`), never [`Policies`].
    pub policies: CodePolicies,
    /// A cell's wall clock, approval waits not counted.
    pub timeout_ms: u64,
    /// A cell's engine CPU time.
    pub cpu_ms: u64,
    /// A cell's engine heap.
    pub memory_mib: u32,
    /// Nested calls per cell.
    pub max_calls: u32,
    /// The tools reachable from code: every tool of the run's table but `exec`.
    pub tools: Vec<CellTool>,
}

/// One cell for the driver to run in the helper: then [`Input::Call`] for each nested
/// call and [`Input::CellEnded`] once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellJob {
    /// The code as the model sent it (the helper takes its fence off).
    pub code: String,
    /// What `tools`, `ALL_TOOLS` and `describe` reach.
    pub tools: Vec<CellTool>,
    /// Engine CPU time.
    pub cpu_ms: u64,
    /// Engine heap.
    pub memory_mib: u32,
    /// Nested calls per cell.
    pub max_calls: u32,
}

/// What a nested call gives the code: its output, or the `ToolError`'s code and message.
pub type Reply = Result<String, (ToolErrorCode, String)>;

/// Why the machine asks the driver to interrupt the running cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterruptReason {
    /// The cell's wall clock (`timeout_ms`, approval waits not counted) ran out.
    Timeout,
    /// `turn.cancel`, shutdown or EOF.
    Cancel,
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
    /// Send `tool.output` after each tool and a `tool.diff` before a file tool's approval.
    pub tool_details: bool,
    /// The session's cwd (cards show paths relative to it).
    pub cwd: PathBuf,
    /// A `mcp_tools_left_out` summary to report once the input is stored.
    pub left_out: Option<String>,
    /// Code Mode, when the run offers `exec`.
    pub code: Option<CodeConfig>,
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
    /// Send `event` (`tool.details`) with the diff of what file tool `name` with `input`
    /// would change, if it would change anything, before the approval's event goes out.
    Preview {
        /// The tool.
        name: String,
        /// Its input.
        input: Value,
        /// The event, its diff and counts still empty.
        event: ToolDiffData,
    },
    /// Register client tool call `call_id` before its `client.tool.call` event goes out.
    OpenClientCall(String),
    /// Run one hook command with `stdin` (bounded by the hook bound), then [`Input::HookEnded`].
    Hook {
        /// The shell command.
        command: String,
        /// What it reads.
        stdin: Vec<u8>,
        /// Cut it short at this time (a cell's clock), as a cancellation would.
        until: Option<u64>,
    },
    /// Run these tools (concurrently when several), then [`Input::ToolsEnded`] in order.
    Tools {
        /// The tools.
        jobs: Vec<ToolJob>,
        /// Cut them short at this time (a cell's clock), as a cancellation would.
        until: Option<u64>,
    },
    /// Start this cell; it ends with [`Input::CellEnded`].
    Cell(CellJob),
    /// The answer to nested call `call` of the running cell: its output, or the
    /// `ToolError` it throws.
    Answer {
        /// The call, as [`Input::Call`] named it.
        call: u64,
        /// The output text, or the error's code and message.
        result: Reply,
    },
    /// Interrupt the running cell; it still ends with [`Input::CellEnded`].
    Interrupt(InterruptReason),
    /// Nothing more is queued: what the run waits for (the last output of every drain).
    Idle(Idle),
    /// The run's terminal facts: nothing follows.
    Finished(Finished),
}

/// What the run waits for once its queued outputs are out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    /// The client's answer it blocks on, if any (else the outcome of an action the driver
    /// runs, or the time).
    pub waiting: Option<Waiting>,
    /// When to feed [`Input::Tick`] (ms on the driver's clock), if a timer is pending: an
    /// approval's or client call's expiry, a cell's clock.
    pub until: Option<u64>,
    /// The streaming step must stop now (the run's content bound was reached).
    pub stop_streaming: bool,
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
    /// A retry of the request is about to wait `wait_ms` (attempt counts from 1, of `of`).
    Retry {
        /// The attempt.
        attempt: u32,
        /// The most retries the provider makes.
        of: u32,
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
    /// The running cell's code called a tool (answered by [`Output::Answer`]).
    Call {
        /// The helper's number for the call, echoed in the answer.
        call: u64,
        /// The tool's name as the code spelled it.
        name: String,
        /// Its input.
        input: Value,
        /// More calls the helper sent with this one follow at once: they start together.
        more: bool,
        /// Refused by the helper (input it could not send, past `max_calls`): its code and
        /// why; recorded and answered, never run.
        refused: Option<(ToolErrorCode, String)>,
        /// The callee's own ID for the call (a provider's `tool_use` ID): a provider's call
        /// is recorded under it (else under a fresh one).
        id: Option<String>,
    },
    /// The running cell ended.
    CellEnded {
        /// How.
        state: CellState,
        /// Its output lines (console, `text()`, the returned value or the error), LF-joined.
        output: String,
        /// From its start to its end, approval waits included.
        elapsed_ms: u64,
    },
    /// The running cell's helper ended it (its CPU time ran out, or it died) while nested
    /// calls were in flight: they are cut short as an interrupt would cut them.
    CellStopped,
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
    /// Time passed (the deadline of the machine's `Run::timeout` may have come).
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
pub enum After {
    /// Due before a step.
    Due,
    /// The step's reply had no room.
    NoRoom,
    /// The provider refused the step as too long.
    Overflow,
}
