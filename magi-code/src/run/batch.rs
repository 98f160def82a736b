//! The state of a step's tool calls between inputs: the batch, each call's slot, and what
//! the calls wait for. Types only; `calls` moves them.

use super::call::{Prepared, ToolRun};
use super::io::{State, Waiting};
use crate::history::Item;
use crate::tools::ToolOutcome;
use serde_json::Value;

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
}

/// A step's calls in progress.
#[derive(Debug)]
pub struct Calls {
    pub step_items: Vec<Item>,
    pub list: Vec<(String, String, Value)>,
    pub repeated: Vec<bool>,
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
}

impl Calls {
    /// The run state it stands for.
    pub const fn state(&self) -> State {
        match self.wait {
            Wait::Approval { .. } => State::AwaitingApproval,
            Wait::Client { .. } => State::AwaitingClientTool,
            _ => State::RunningCalls,
        }
    }

    /// What the driver blocks on.
    pub fn waiting(&self) -> Option<Waiting> {
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
