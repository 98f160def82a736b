//! Replay: the provider-neutral conversation rebuilt from stored records (`runner.md` 4), never
//! from the display projection, and the tools it offers. Providers build their requests from
//! these types; tools describe themselves with [`ToolSpec`].

use super::record::{Body, Record, RunOutcome};
use serde_json::Value;

/// The output of a synthetic result for a stored call whose result was never recorded.
pub const INTERRUPTED_RESULT: &str = "interrupted: no result was recorded";
/// The assistant note after a failed turn that has no reply.
pub const NO_REPLY_FAILED: &str = "no reply: the turn failed";
/// The assistant note after a cancelled turn that has no reply.
pub const NO_REPLY_CANCELLED: &str = "no reply: the turn was cancelled";
/// The assistant note after an interrupted turn (no `run_finished`) that has no reply.
pub const NO_REPLY_INTERRUPTED: &str = "no reply: the turn was interrupted";
/// The assistant note after a completed turn whose model produced no text.
pub const NO_REPLY_EMPTY: &str = "no reply: the turn ended without one";

/// One item of the provider-neutral conversation, in the order the model saw or produced it.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// The user's text.
    User {
        /// The prompt.
        text: String,
    },
    /// One segment of assistant text.
    Assistant {
        /// The text.
        text: String,
    },
    /// A tool call the model made.
    ToolCall {
        /// The provider's call ID (`tool_use.id`, `call_id`, `tool_calls[].id`).
        call_id: String,
        /// The tool name as offered to the model.
        name: String,
        /// The input: a JSON object, or the raw arguments text as a string when the model
        /// produced no valid object (sent back as it came).
        input: Value,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        /// The call it answers.
        call_id: String,
        /// The bounded output text (at most 64 KiB).
        output: String,
        /// Whether the call failed, was refused or was cut short.
        is_error: bool,
    },
    /// Opaque data the provider needs back verbatim: an Anthropic `thinking` or
    /// `redacted_thinking` block with its signature, a Responses `reasoning` item with its
    /// `encrypted_content`. Only sent to the provider that produced it.
    ProviderItem {
        /// The provider (settings name) that produced it.
        provider: String,
        /// The block or item, exactly as received.
        item: Value,
    },
}

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// Name (`read_file`, `mcp__fs__read`, ...).
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its input object.
    pub input_schema: Value,
}

/// The turn being replayed: its run, and its calls still waiting for a result (call ID and
/// the index of the call's item).
#[derive(Debug, Clone)]
struct Turn {
    run_id: String,
    pending: Vec<(String, usize)>,
}

/// Builds the conversation record by record so that any stored history replays as a valid
/// one: every call answered, and every turn closed by an assistant item (`runner.md` 4, 5).
#[derive(Debug, Clone, Default)]
pub struct Replay {
    items: Vec<Item>,
    turn: Option<Turn>,
    last_input_tokens: Option<u64>,
    bytes_since_usage: u64,
}

impl Replay {
    /// Takes the next stored record; `bytes` is its stored line length (LF included).
    pub fn push(&mut self, r: &Record, bytes: usize) {
        if let Body::Usage { input_tokens, .. } = &r.body {
            self.last_input_tokens = Some(*input_tokens);
            self.bytes_since_usage = 0;
            return;
        }
        self.bytes_since_usage = self.bytes_since_usage.saturating_add(bytes as u64);
        if let Body::UserInput { run_id, text, .. } = &r.body {
            self.close(None);
            self.items.push(Item::User { text: text.clone() });
            self.turn = Some(Turn {
                run_id: run_id.clone(),
                pending: Vec::new(),
            });
            return;
        }
        // Only records inside an open turn replay: anything else would break alternation.
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        let item = match &r.body {
            Body::AssistantMessage { text: Some(t), .. } if !t.is_empty() => {
                Item::Assistant { text: t.clone() }
            }
            Body::ToolCall {
                call_id,
                name,
                input,
                ..
            } => {
                turn.pending.push((call_id.clone(), self.items.len()));
                Item::ToolCall {
                    call_id: call_id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                }
            }
            Body::ToolResult {
                call_id,
                output,
                is_error,
                ..
            } => {
                // A result without a waiting call (orphan or duplicate) would be invalid.
                let Some(k) = turn.pending.iter().position(|(c, _)| c == call_id) else {
                    return;
                };
                turn.pending.remove(k);
                Item::ToolResult {
                    call_id: call_id.clone(),
                    output: output.clone(),
                    is_error: *is_error,
                }
            }
            Body::ProviderItem { provider, item, .. } => Item::ProviderItem {
                provider: provider.clone(),
                item: item.clone(),
            },
            Body::RunFinished {
                run_id, outcome, ..
            } => {
                if *run_id == turn.run_id {
                    self.close(Some(*outcome));
                }
                return;
            }
            _ => return,
        };
        self.items.push(item);
    }

    /// Ends a read of the stored history: a turn still open there was interrupted (the reader
    /// holds the writer lease, so no live loop owns it).
    pub fn finish_read(&mut self) {
        self.close(None);
    }

    /// Closes the open turn with its outcome (`None`: interrupted): unanswered calls get a
    /// synthetic error result right after their block of calls and results, and a turn that
    /// does not end with assistant text gets a fixed note.
    fn close(&mut self, outcome: Option<RunOutcome>) {
        let Some(turn) = self.turn.take() else {
            return;
        };
        let mut positions: Vec<usize> = turn.pending.iter().map(|(_, at)| *at).collect();
        for (k, (call_id, _)) in turn.pending.into_iter().enumerate() {
            let mut at = positions[k] + 1;
            while matches!(
                self.items.get(at),
                Some(Item::ToolCall { .. } | Item::ToolResult { .. })
            ) {
                at += 1;
            }
            self.items.insert(
                at,
                Item::ToolResult {
                    call_id,
                    output: INTERRUPTED_RESULT.to_owned(),
                    is_error: true,
                },
            );
            for p in positions.iter_mut().skip(k + 1) {
                if *p >= at {
                    *p += 1;
                }
            }
        }
        if !matches!(self.items.last(), Some(Item::Assistant { .. })) {
            let note = match outcome {
                Some(RunOutcome::Failed) => NO_REPLY_FAILED,
                Some(RunOutcome::Cancelled) => NO_REPLY_CANCELLED,
                Some(RunOutcome::Completed) => NO_REPLY_EMPTY,
                None => NO_REPLY_INTERRUPTED,
            };
            self.items.push(Item::Assistant {
                text: note.to_owned(),
            });
        }
    }

    /// The conversation so far, in order (the open turn as recorded so far).
    #[must_use]
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// The `input_tokens` of the last `usage` record, if any.
    #[must_use]
    pub const fn last_input_tokens(&self) -> Option<u64> {
        self.last_input_tokens
    }

    /// Stored bytes of the records after the last `usage` record (all of them if none).
    #[must_use]
    pub const fn bytes_since_usage(&self) -> u64 {
        self.bytes_since_usage
    }
}
