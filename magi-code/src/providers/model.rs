//! The provider seam: one provider-neutral conversation in, one stream of [`ModelEvent`]s out.
//! The turn loop speaks only these types; each wire API (`anthropic.rs`, `openai_chat.rs`,
//! `openai_responses.rs`) builds its request from a [`ModelRequest`] and decodes its stream
//! into [`ModelEvent`]s with a sans-IO [`StreamDecoder`].

pub use crate::history::replay::{Item, ToolSpec};
use crate::wire::DiagnosticCode;
use serde_json::Value;

pub use crate::config::providers::WireApi;

/// How an Anthropic model takes effort (`backend.md` catalog field `thinking`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Thinking {
    /// `thinking: {type: "adaptive", display: "summarized"}` and `output_config.effort`.
    #[default]
    Adaptive,
    /// `thinking: {type: "enabled", budget_tokens}` (older models).
    Budget,
}

/// One step's request, provider-neutral.
#[derive(Debug, Clone, Copy)]
pub struct ModelRequest<'a> {
    /// The model ID.
    pub model: &'a str,
    /// The provider (settings name) this step goes to: `ProviderItem`s of others are left out.
    pub provider: &'a str,
    /// The system prompt: base prompt and instructions.
    pub instructions: &'a str,
    /// The conversation so far, ending with the new input (and this turn's calls and results).
    pub items: &'a [Item],
    /// The tools offered.
    pub tools: &'a [ToolSpec],
    /// The effective explicit effort (`low` … `max`), `None` for `default` (no effort field).
    pub effort: Option<&'a str>,
    /// How an Anthropic model takes effort.
    pub thinking: Thinking,
    /// The output bound (`max_tokens` / `max_output_tokens`).
    pub max_output_tokens: u64,
}

/// Why a step stopped, as the provider said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model finished its reply.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output bound cut the reply.
    MaxTokens,
    /// Anything else (content filter, refusal, ...).
    Other,
}

/// One step's token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Input tokens of the request.
    pub input_tokens: u64,
    /// Output tokens of the reply.
    pub output_tokens: u64,
    /// Cached input tokens, where reported.
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the cache (Anthropic `cache_creation_input_tokens`).
    pub cache_creation_input_tokens: Option<u64>,
}

/// What a provider stream says, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Assistant text to append to the current segment.
    TextDelta(String),
    /// A complete tool call (its input fully received).
    ToolCall {
        /// The provider's call ID.
        call_id: String,
        /// Tool name.
        name: String,
        /// Parsed input object, or the raw arguments text as a string if it is not one.
        input: Value,
    },
    /// A complete reasoning summary the provider marks as one (Anthropic `thinking` text,
    /// Responses `reasoning_summary_text`), keyed so a later one can replace it.
    ReasoningSummary {
        /// Stable within the step (block index or item ID plus summary index).
        id: String,
        /// The summary text.
        text: String,
    },
    /// Opaque data to store and send back to this provider (see [`Item::ProviderItem`]).
    ProviderItem(Value),
    /// Token usage of the step (may come more than once; the last wins).
    Usage(Usage),
    /// The step ended normally.
    Stop(StopReason),
    /// The provider compacted its own conversation (an agent CLI's automatic compaction): a
    /// `compaction` activity, with no summary of ours to store.
    Compacted,
}

/// Why a stream could not be decoded or what it reported instead of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// A malformed event or an impossible sequence (`provider_stream_invalid`).
    Invalid,
    /// The provider sent an error event (`provider_error`).
    Remote,
    /// The provider's error says the prompt does not fit the context (`context_overflow`).
    ContextOverflow,
    /// The stream ended with no content, no call and no stop: an empty answer, retried as an
    /// empty `200` is (`runner.md` 1).
    Empty,
}

pub use crate::util::sse::SseEvent;

/// A sans-IO decoder of one wire API's stream: SSE events in, model events out.
pub trait StreamDecoder {
    /// Takes one event; returns what it completes.
    fn event(&mut self, ev: &SseEvent) -> Result<Vec<ModelEvent>, DecodeError>;
    /// Whether the stream's terminal event arrived (`message_stop`, `response.completed`,
    /// `[DONE]`); events after it are ignored.
    fn finished(&self) -> bool;
    /// Whether a stream whose body ended here (without its terminal event) said nothing: no
    /// content, no call, no stop. Such an ending is an empty answer, not a broken stream.
    fn said_nothing(&self) -> bool {
        false
    }
}

/// Whether a provider error's code or message names a context overflow (`runner.md` 7): the
/// code `context_length_exceeded`, or a message containing "prompt is too long", "context
/// length" or "context window", case-insensitively.
#[must_use]
pub fn is_overflow(code: Option<&str>, message: Option<&str>) -> bool {
    if code == Some("context_length_exceeded") {
        return true;
    }
    message.is_some_and(|m| {
        let m = m.to_ascii_lowercase();
        ["prompt is too long", "context length", "context window"]
            .iter()
            .any(|p| m.contains(p))
    })
}

/// The tool input a model sent as arguments text: the parsed object, else the text itself.
#[must_use]
pub fn parse_arguments(text: &str) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => v,
        _ => Value::String(text.to_owned()),
    }
}

/// The arguments text to send back for a stored input (see [`Item::ToolCall`]).
#[must_use]
pub fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Why a step failed; each is one `diagnostic` code before `execution_failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepFailure {
    /// The run was cancelled (not a failure of the run: it finishes `cancelled`).
    Cancelled,
    /// Connect, DNS or timeout (`provider_unreachable`).
    Unreachable,
    /// 401 or 403 (`provider_auth`).
    Auth,
    /// The `codex` sign-in is spent or refused (`provider_auth`): only `codex login` helps.
    CodexLogin,
    /// The Claude Code CLI's sign-in was refused (`provider_auth`): `claude auth login`.
    ClaudeLogin,
    /// Another HTTP status (`provider_status`).
    Status(u16),
    /// A malformed stream, or one that ended before its terminal (`provider_stream_invalid`).
    StreamInvalid,
    /// Every attempt ended in a `200` with an empty body (`provider_stream_invalid`, unless
    /// the turn loop reads it as a context overflow: `decisions.md` 46).
    EmptyReply,
    /// The provider sent an error (`provider_error`).
    Remote,
    /// The prompt does not fit the model's context (`context_overflow`).
    ContextOverflow,
    /// The scripted provider's `fail` step (`provider_error`).
    Scripted,
}

impl StepFailure {
    /// The `diagnostic` code, `None` for cancellation.
    #[must_use]
    pub const fn code(self) -> Option<DiagnosticCode> {
        Some(match self {
            Self::Cancelled => return None,
            Self::Unreachable => DiagnosticCode::ProviderUnreachable,
            Self::Auth | Self::CodexLogin | Self::ClaudeLogin => DiagnosticCode::ProviderAuth,
            Self::Status(_) => DiagnosticCode::ProviderStatus,
            Self::StreamInvalid | Self::EmptyReply => DiagnosticCode::ProviderStreamInvalid,
            Self::Remote | Self::Scripted => DiagnosticCode::ProviderError,
            Self::ContextOverflow => DiagnosticCode::ContextOverflow,
        })
    }

    /// A fixed, safe one-line summary (never a provider body).
    #[must_use]
    pub fn summary(self) -> String {
        match self {
            Self::Cancelled => "cancelled".to_owned(),
            Self::Unreachable => "the provider could not be reached".to_owned(),
            Self::Auth => "the provider refused the credentials".to_owned(),
            Self::CodexLogin => {
                "the ChatGPT sign-in was refused or has expired; run `codex login`".to_owned()
            }
            Self::ClaudeLogin => {
                "the Claude sign-in was refused or has expired; run `claude auth login`".to_owned()
            }
            Self::Status(n) => format!("the provider answered HTTP status {n}"),
            Self::StreamInvalid => "the provider's stream was malformed or cut short".to_owned(),
            Self::EmptyReply => {
                "the provider answered every attempt with an empty stream".to_owned()
            }
            Self::Remote => "the provider reported an error".to_owned(),
            Self::ContextOverflow => "the conversation does not fit the model's context".to_owned(),
            Self::Scripted => "the scripted provider failed the step".to_owned(),
        }
    }
}

/// Where a step's events go.
pub trait StepSink {
    /// One model event; false stops the step (the run's content bound was reached).
    fn event(&mut self, ev: ModelEvent) -> bool;
    /// A retry of the step's request is about to wait `wait` (attempt counts from 1, of at
    /// most `of`).
    fn retry(&mut self, attempt: u32, of: u32, wait: std::time::Duration);
    /// The events of one network read are in: text deltas held back to coalesce go out now.
    fn flush(&mut self) {}
    /// Calls the turn's tool `name` with `input` back, mid-step (a provider that runs its own
    /// loop), through the run's whole pipeline, under the provider's own call `id` if it has
    /// one: its output, or the error text the provider hands its model. By default no tool
    /// can be called.
    fn call_tool(
        &mut self,
        _id: Option<&str>,
        _name: &str,
        _input: Value,
    ) -> Result<String, String> {
        Err("unknown tool".to_owned())
    }
}

/// One provider, as the turn loop drives it: each call is one step (one request).
pub trait ModelClient {
    /// Streams one step of `req` into `sink`; returns how it ended. Cancellation ends it
    /// within 500 ms even while the provider is silent.
    fn step(
        &mut self,
        req: &ModelRequest<'_>,
        cancel: &crate::util::cancel::Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), StepFailure>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_and_arguments() {
        assert!(is_overflow(Some("context_length_exceeded"), None));
        assert!(is_overflow(None, Some("Prompt is too long: 300000 tokens")));
        assert!(is_overflow(None, Some("exceeds the CONTEXT WINDOW")));
        assert!(!is_overflow(Some("rate_limit"), Some("slow down")));
        assert_eq!(parse_arguments("{\"a\":1}"), serde_json::json!({"a":1}));
        assert_eq!(parse_arguments("[1]"), Value::String("[1]".into()));
        assert_eq!(arguments_text(&Value::String("{bad".into())), "{bad");
        assert_eq!(arguments_text(&serde_json::json!({"a":1})), "{\"a\":1}");
    }
}
