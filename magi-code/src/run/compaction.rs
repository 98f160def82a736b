//! Auto-compaction of a live turn (`runner.md` 7), what of it is arithmetic: the budget check
//! before a step, the summary request's transcript and bounds, the compacted conversation.
//! The run's compaction states (`compacting.rs`) drive it.

use crate::history::compact::{self, Pieces, Snapshot, Written};
pub use crate::history::compact::{transcript, TRIMMED_NOTE};
use crate::history::{Body, Item, Record, ToolSpec};
use crate::providers::StepFailure;
use serde_json::json;
use std::path::PathBuf;

/// The system prompt of the summary request.
pub const SUMMARY_SYSTEM: &str =
    "You write the summary that replaces the earlier part of a coding session's conversation.";
/// The fixed instruction after the conversation in the summary request.
pub const SUMMARY_INSTRUCTION: &str = "Summarize the conversation above so that the work can \
continue from your summary alone: the user's goals and requests, what has been done and \
found, decisions made, the current state of the task and what remains to do. Reply with the \
summary only.";
/// Most bytes of a stored summary.
pub const SUMMARY_BYTES: usize = 32 << 10;

/// The bytes a request spends on the instructions and the tool definitions.
#[must_use]
pub fn fixed_bytes(instructions: &str, tools: &[ToolSpec]) -> u64 {
    let tools: usize = tools
        .iter()
        .map(|t| {
            json!({"name": t.name, "description": t.description, "input_schema": t.input_schema})
                .to_string()
                .len()
        })
        .sum();
    (instructions.len() + tools) as u64
}

/// What a turn knows for compaction besides its items.
#[derive(Debug, Clone)]
pub struct Compactor {
    window: u64,
    fixed: u64,
    cwd: PathBuf,
    written: Written,
    /// User inputs before the current turn.
    inputs: Vec<String>,
    /// The record index of the current turn's input.
    through: u64,
    /// The item index of the current turn's input.
    turn_at: usize,
    last_input: Option<u64>,
    bytes_since: u64,
}

impl Compactor {
    /// The compactor of a turn starting from `snap` with `prompt`, and the conversation it
    /// replays, that prompt last.
    #[must_use]
    pub fn start(
        snap: Snapshot,
        window: u64,
        fixed: u64,
        cwd: PathBuf,
        prompt: &str,
    ) -> (Self, Vec<Item>) {
        let items = match &snap.summary {
            Some(summary) => compact::build(
                &Pieces {
                    summary,
                    files: &snap.files,
                    inputs: &snap.inputs[..snap.inputs_before],
                    mid: &snap.mid,
                    after: &snap.after,
                    current: Some(prompt),
                },
                window,
                fixed,
                &cwd,
            ),
            None => {
                let mut items = snap.after;
                items.push(Item::User {
                    text: prompt.to_owned(),
                });
                items
            }
        };
        let c = Self {
            window,
            fixed,
            cwd,
            written: Written::new(snap.files),
            inputs: snap.inputs,
            through: snap.records,
            turn_at: items.len() - 1,
            last_input: snap.last_input_tokens,
            bytes_since: snap.bytes_since_usage,
        };
        (c, items)
    }

    /// The turn's input was stored as record `through`, and is item `turn_at`.
    pub fn begin_turn(&mut self, through: u64, turn_at: usize) {
        self.through = through;
        self.turn_at = turn_at;
    }

    /// Takes records the loop stored: the usage estimate and the files written or edited.
    pub fn note(&mut self, records: &[Record]) {
        for r in records {
            match &r.body {
                Body::Usage { input_tokens, .. } => {
                    self.last_input = Some(*input_tokens);
                    self.bytes_since = 0;
                    continue;
                }
                body => self.written.note(body),
            }
            let line = serde_json::to_vec(r).map_or(0, |v| v.len() + 1);
            self.bytes_since = self.bytes_since.saturating_add(line as u64);
        }
    }

    /// The estimated input tokens of the next request (`runner.md` 7).
    #[must_use]
    pub fn estimate(&self, items: &[Item]) -> u64 {
        match self.last_input {
            Some(t) => t.saturating_add(self.bytes_since / 4),
            None => (self.fixed + compact::items_bytes(items)) / 4,
        }
    }

    /// The record index of the current turn's input.
    #[must_use]
    pub const fn through(&self) -> u64 {
        self.through
    }

    /// The window it compacts for.
    #[must_use]
    pub const fn window(&self) -> u64 {
        self.window
    }

    /// Replaces `items` by what replays after `summary` (the current turn's items kept
    /// verbatim) and returns the record index the `compaction` record names as `through`.
    pub fn replace(&mut self, items: &mut Vec<Item>, summary: &str) -> u64 {
        let turn = items.split_off(self.turn_at.min(items.len()));
        let pieces = Pieces {
            summary,
            files: &self.written.files,
            inputs: &self.inputs,
            mid: &turn,
            after: &[],
            current: None,
        };
        *items = compact::build(&pieces, self.window, self.fixed, &self.cwd);
        self.turn_at = 2;
        self.through
    }

    /// The compaction is stored: the estimate restarts from the whole request, so the next
    /// step does not compact again.
    pub fn restart(&mut self) {
        self.last_input = None;
    }

    /// Whether the next request passes 80% of the window.
    #[must_use]
    pub fn due(&self, items: &[Item]) -> bool {
        compact::over_threshold(self.estimate(items), self.window)
    }
}

/// How a compaction attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compacted {
    /// The summary is stored and the items replaced.
    Done,
    /// Not attempted: the run's activity bound left no room.
    Skipped,
    /// The summary request failed (activity `failed`, diagnostic `compaction_failed`).
    Failed,
    /// The run was cancelled meanwhile.
    Cancelled,
    /// Its records could not be appended: the history no longer holds what the loop would go
    /// on with, so the run ends `persistence_failed` with persistence `degraded`.
    Unstored,
}

/// Most output tokens of the summary request, whatever the window (`decisions.md` 46).
pub const SUMMARY_OUTPUT_MAX: u64 = 4_096;

/// The summary request's output bound: the provider's, at most a quarter of the window and
/// at most [`SUMMARY_OUTPUT_MAX`].
#[must_use]
pub fn summary_output_bound(window: u64, max_output_tokens: u64) -> u64 {
    max_output_tokens.min(window / 4).min(SUMMARY_OUTPUT_MAX)
}

/// The bytes the summary request's conversation may take: the window less its output bound
/// ([`summary_output_bound`]), 4 bytes per token, less the fixed prompt.
#[must_use]
pub fn summary_budget(window: u64, max_output_tokens: u64) -> usize {
    let input_tokens = window - summary_output_bound(window, max_output_tokens);
    let bytes = input_tokens
        .saturating_mul(4)
        .saturating_sub((SUMMARY_SYSTEM.len() + SUMMARY_INSTRUCTION.len() + 64) as u64);
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// The least output bound of a step when the provider's is larger (`decisions.md` 45).
pub const MIN_OUTPUT_TOKENS: u64 = 256;

/// A step's output bound: the provider's, at most the window less the request's `estimate`;
/// `None` when that room is less than [`MIN_OUTPUT_TOKENS`] (or than a smaller provider
/// bound), so the request cannot fit with a useful reply (`context_window_too_small`).
#[must_use]
pub fn output_bound(window: u64, estimate: u64, max_output_tokens: u64) -> Option<u64> {
    let room = window.saturating_sub(estimate);
    (room >= MIN_OUTPUT_TOKENS.min(max_output_tokens)).then(|| max_output_tokens.min(room))
}

/// A step's failure as the turn reads it: an empty `200` after every retry while the
/// request's estimate passes 50% of the window is a context overflow (`decisions.md` 46);
/// otherwise it stays an empty reply (`provider_stream_invalid`).
#[must_use]
pub fn overflowed(f: StepFailure, estimate: u64, window: u64) -> StepFailure {
    match f {
        StepFailure::EmptyReply if estimate.saturating_mul(2) > window => {
            StepFailure::ContextOverflow
        }
        f => f,
    }
}

#[cfg(test)]
mod tests;
