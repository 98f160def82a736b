//! The state of a step's tool calls between inputs: the batch, each call's slot, and what
//! the calls wait for. Types only; `calls` moves them.

use super::call::{Prepared, ToolRun};
use super::io::{CellJob, End, InterruptReason, State, Waiting};
use crate::codemode::text::ToolErrorCode;
use crate::history::Item;
use crate::tools::ToolOutcome;
use serde_json::Value;
use std::collections::VecDeque;

/// What comes after the calls' state changed.
#[derive(Debug)]
pub enum CallsNext {
    /// They wait (for the driver, the client or the time).
    Wait(Box<Calls>),
    /// Every call is answered and the step's records are stored: the next step.
    Stepped,
    /// The run ends.
    Finish(End),
    /// A cell's nested calls were answered (by the helper's numbers, in issue order): only
    /// the cell that holds them sees this.
    Answered(Vec<(u64, ToolRun)>),
}

/// Where the calls go next without waiting: a loop, not a chain of calls, so a step of
/// thousands of calls that all end at once (refused, skipped) keeps a flat stack.
#[derive(Debug, Clone, Copy)]
pub enum Todo {
    Batch,
    Prepare,
    Execute,
    Complete,
}

/// One move of the calls: on to the next move, or out of the calls.
pub enum Step {
    Go(Box<Calls>, Todo),
    Out(CallsNext),
}

/// Who makes calls back into the run while it waits for them (`callbacks.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The code of the cell of `exec` call `call_id`: `code_mode.tools` policies, summaries
    /// that start `code: `, `code_call`/`code_result` records (`code-mode.md` 6).
    Cell {
        /// The `exec` call.
        call_id: String,
    },
    /// A provider mid-step (one that runs its own loop): the direct policies and summaries,
    /// `tool_call`/`tool_result` records and the conversation's items, as a direct call.
    Step,
}

/// Where a batch of calls back into the run comes from; one entry a call of the batch's
/// list, and the answers so far.
#[derive(Debug)]
pub struct Nested {
    pub origin: Origin,
    pub calls: Vec<NestedCall>,
    pub answers: Vec<(u64, ToolRun)>,
}

impl Nested {
    /// Whether the calls come from a cell's code.
    #[must_use]
    pub const fn from_code(&self) -> bool {
        matches!(self.origin, Origin::Cell { .. })
    }
}

/// The calls of one callee (`callbacks.rs` moves them).
#[derive(Debug)]
pub struct Callbacks {
    /// Who calls.
    pub origin: Origin,
    /// Calls issued so far (the next one's `seq`).
    pub issued: u64,
    /// How many may be (a cell's `max_calls`); past it a call throws `limit` at once.
    pub max_calls: Option<u32>,
    /// The calls in flight, as one batch (read-class ones run together).
    pub inner: Option<Box<Calls>>,
    /// Calls issued while others run, in issue order.
    pub queue: VecDeque<Queued>,
    /// The callee is still sending calls of one flush (the last had `more`): none starts
    /// until the last is in, whatever input comes meanwhile.
    pub gathering: bool,
}

/// How a callee's calls run: held cancelled (the callee interrupted, the run cancelled) and
/// cut short at `until` (a cell's clock).
#[derive(Debug, Clone, Copy)]
pub struct Hold {
    /// Cut every call short, as `turn.cancel` would.
    pub cancel: bool,
    /// When their work must end.
    pub until: Option<u64>,
}

/// One call back into the run: the callee's number for it, its `seq` among the callee's
/// calls, and why it is refused before its policy (by the helper, unreachable from code).
#[derive(Debug, Clone)]
pub struct NestedCall {
    pub call: u64,
    pub seq: u64,
    pub refuse: Option<(String, ToolErrorCode)>,
}

/// A call a callee issued, queued until the calls before it are answered.
#[derive(Debug, Clone)]
pub struct Queued {
    pub call: u64,
    pub name: String,
    pub input: Value,
    /// The helper's refusal, if any.
    pub refused: Option<(ToolErrorCode, String)>,
    /// The callee's own ID for the call (a provider's `tool_use` ID), if it has one.
    pub id: Option<String>,
}

/// A running cell: its clock and its code's calls.
#[derive(Debug)]
pub struct Cell {
    /// When it started, its wall clock, and the approval waits not counted in it.
    pub started: u64,
    pub timeout_ms: u64,
    pub paused: u64,
    pub paused_since: Option<u64>,
    /// The interrupt asked for, if any: nested calls are cancelled from then on.
    pub interrupted: Option<InterruptReason>,
    /// Its code's calls (`Origin::Cell`, at most `max_calls`).
    pub callbacks: Callbacks,
}

impl Cell {
    /// When its wall clock runs out: an interrupted cell, or one waiting for an approval, has
    /// no clock of its own.
    pub fn own_deadline(&self) -> Option<u64> {
        (self.interrupted.is_none() && self.paused_since.is_none()).then(|| {
            self.started
                .saturating_add(self.timeout_ms)
                .saturating_add(self.paused)
        })
    }

    /// When its wall clock runs out, or the nested call's wait expires.
    pub fn deadline(&self) -> Option<u64> {
        let own = self.own_deadline();
        let inner = self.callbacks.inner.as_ref().and_then(|c| c.deadline());
        match (own, inner) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// How its code's calls run now.
    pub fn hold(&self) -> Hold {
        Hold {
            cancel: self.interrupted.is_some(),
            until: self.own_deadline(),
        }
    }
}

/// What a hook reads on stdin: the call as JSON (keys in sorted order).
#[derive(serde::Serialize)]
pub struct HookInput<'a> {
    pub event: &'static str,
    pub input: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    pub session_id: &'a str,
    pub tool: &'a str,
}

impl HookInput<'_> {
    /// The JSON bytes.
    #[must_use]
    pub fn bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// One call of a batch.
#[derive(Debug)]
pub enum Slot {
    /// Answered without running (a repeated call).
    Done(ToolRun),
    /// Never started: the run was cancelled or its activity bound was reached.
    Skipped,
    /// Started: its final activity comes after the batch runs.
    Started(Box<Prepared>),
}

/// What the calls wait for.
#[derive(Debug)]
pub enum Wait {
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
    /// A cell's nested calls' `code_call` records being stored before any of them runs.
    Recorded,
    /// The records so far being stored before the cell of `exec` starts (a crash mid-cell
    /// then leaves the call on disk, answered at replay).
    CellStored(Box<Cell>, CellJob),
    /// The cell of the batch's one `exec` call.
    Cell(Box<Cell>),
}

/// A step's calls in progress.
#[derive(Debug)]
pub struct Calls {
    pub step_items: Vec<Item>,
    pub list: Vec<(String, String, Value)>,
    /// Whether each call repeats the runaway row, once its batch has looked.
    pub repeated: Vec<Option<bool>>,
    /// The batch's first call and size.
    pub at: usize,
    pub n: usize,
    pub slots: Vec<Slot>,
    /// The call being prepared (waiting for its approval or a hook).
    pub current: Option<Prepared>,
    pub outcomes: Vec<Option<ToolOutcome>>,
    /// The batch member being completed, and its post hook's call.
    pub done: usize,
    pub post: Option<(String, Value)>,
    pub runs: Vec<ToolRun>,
    pub results: Vec<Item>,
    pub wait: Wait,
    /// A cell's nested calls: their origin.
    pub nested: Option<Nested>,
}

impl Calls {
    /// The run state it stands for (a cell's: its nested call's).
    pub fn state(&self) -> State {
        match &self.wait {
            Wait::Approval { .. } => State::AwaitingApproval,
            Wait::Client { .. } => State::AwaitingClientTool,
            Wait::Cell(cell) => cell
                .callbacks
                .inner
                .as_ref()
                .map_or(State::RunningCalls, |c| c.state()),
            _ => State::RunningCalls,
        }
    }

    /// What the driver blocks on.
    pub fn waiting(&self) -> Option<Waiting> {
        match &self.wait {
            Wait::Approval { id, .. } => Some(Waiting::Approval(id.clone())),
            Wait::Client { id, .. } => Some(Waiting::ClientCall(id.clone())),
            Wait::Cell(cell) => cell.callbacks.inner.as_ref().and_then(|c| c.waiting()),
            _ => None,
        }
    }

    /// When the wait expires.
    pub(super) fn deadline(&self) -> Option<u64> {
        match &self.wait {
            Wait::Approval { deadline, .. } | Wait::Client { deadline, .. } => Some(*deadline),
            Wait::Cell(cell) => cell.deadline(),
            _ => None,
        }
    }

    /// Whether the calls wait for their cell (its inputs go to `cell`).
    pub const fn in_cell(&self) -> bool {
        matches!(self.wait, Wait::Cell(_))
    }
}
