//! The typed history record: one enum for every writer and the reader
//! (`docs/history-format.md`). Unknown fields are tolerated; an unknown `type` is malformed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Effort values a `session_preferences` record may hold.
pub const STORED_EFFORTS: [&str; 6] = ["default", "low", "medium", "high", "xhigh", "max"];

/// One stored line: the members every record has, and the typed body.
// Reading is hand-written (`Record::parse`) rather than derived: serde's flatten and internal
// tagging buffer every member twice, which made reopening a 64 MiB history 27% slower.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Record {
    /// Equal to the file's session ID.
    pub session_id: String,
    /// RFC 3339 timestamp.
    pub ts: String,
    /// Any record may carry the canonical cwd it was written from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The typed part, tagged by `type`.
    #[serde(flatten)]
    pub body: Body,
}

/// The type-specific part of a record.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Body {
    /// The first record this project writes.
    SessionMeta {},
    /// The prompt of a turn, durable before any provider work.
    UserInput {
        /// The turn.
        run_id: String,
        /// The live message ID of the prompt.
        #[serde(skip_serializing_if = "Option::is_none")]
        message_id: Option<String>,
        /// The prompt.
        text: String,
    },
    /// A streamed piece of assistant text (legacy writers; superseded by its message).
    AssistantChunk {
        /// The turn.
        run_id: String,
        /// The message it belongs to.
        message_id: String,
        /// The piece.
        text: String,
    },
    /// A reconciled assistant segment.
    AssistantMessage {
        /// The turn.
        run_id: String,
        /// The segment's message ID.
        message_id: String,
        /// The whole text; absent in legacy records, whose chunks stand.
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The reply was cut short by failure or cancellation; written only when true.
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        partial: bool,
    },
    /// A reasoning summary.
    ReasoningSummary {
        /// The turn.
        run_id: String,
        /// The summary.
        text: String,
        /// A later summary with the same run and item replaces the earlier one.
        #[serde(skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
        /// Only provider summaries are projected.
        #[serde(skip_serializing_if = "Option::is_none")]
        provider_summary: Option<bool>,
    },
    /// One state of an activity (a tool call, a subagent, a compaction).
    Activity {
        /// The turn.
        run_id: String,
        /// The activity.
        activity_id: String,
        /// What it is.
        kind: ActivityKind,
        /// Its state.
        state: ActivityState,
        /// Display name.
        name: String,
        /// One-line summary.
        #[serde(skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
    },
    /// A `tool.cards` display card of a tool activity, stored after that activity's record
    /// (whatever the writer negotiated; projected only for children that negotiated it).
    ToolCard {
        /// The turn.
        run_id: String,
        /// The activity the card shows.
        activity_id: String,
        /// The card object, bounded when written.
        card: Value,
    },
    /// The session's selection preferences, restored by `session.open`.
    SessionPreferences {
        /// Provider.
        provider: String,
        /// Model.
        model: String,
        /// One of [`STORED_EFFORTS`].
        effort: String,
    },
    /// The session title.
    Title {
        /// The title.
        title: String,
    },
    /// A compaction point.
    Compaction {
        /// The summary that replaces what came before.
        #[serde(skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// How many records before it the summary replaces, from the session's start.
        #[serde(skip_serializing_if = "Option::is_none")]
        through: Option<u64>,
        /// A title chosen with it (legacy records; still read).
        #[serde(skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The end of a turn.
    RunFinished {
        /// The turn.
        run_id: String,
        /// How it ended.
        outcome: RunOutcome,
        /// The error code of a failed turn; another type is tolerated as absent.
        #[serde(skip_serializing_if = "Option::is_none")]
        error_code: Option<String>,
    },
    /// A tool call the model made (replayed, never projected).
    ToolCall {
        /// The turn.
        run_id: String,
        /// The provider's call ID.
        call_id: String,
        /// The tool name as offered to the model.
        name: String,
        /// A JSON object, or the raw arguments text as a string.
        input: Value,
    },
    /// The bounded result of a tool call (replayed, never projected).
    ToolResult {
        /// The turn.
        run_id: String,
        /// The call it answers.
        call_id: String,
        /// The output text given to the model.
        output: String,
        /// Whether the call failed, was refused or was cut short.
        is_error: bool,
    },
    /// One call a Code Mode cell's code made (`code-mode.md` 6): never replayed, never
    /// re-run; only its activity entry is projected.
    #[serde(rename = "code_call")]
    CellCall {
        /// The turn.
        run_id: String,
        /// The `exec` call whose cell made it.
        call_id: String,
        /// Its place among that cell's calls, from 0, without gaps.
        seq: u64,
        /// The tool name as the code spelled it.
        name: String,
        /// Its input as the code gave it.
        input: Value,
        /// What the code got, in older histories only (now a [`Body::CellResult`] follows).
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<String>,
        /// Whether it threw, in older histories only.
        #[serde(skip_serializing_if = "Option::is_none")]
        is_error: Option<bool>,
    },
    /// How a nested call of a Code Mode cell ended (`decisions.md` 52): appended when it
    /// ends, after its [`Body::CellCall`], paired with it by `call_id` and `seq`.
    #[serde(rename = "code_result")]
    CellResult {
        /// The turn.
        run_id: String,
        /// The `exec` call whose cell made the call.
        call_id: String,
        /// The call's place among that cell's calls.
        seq: u64,
        /// What the code got: the output, or the error's message.
        output: String,
        /// Whether it threw (refused, failed or cut short).
        is_error: bool,
    },
    /// Opaque data a provider needs back verbatim (replayed to that provider only).
    ProviderItem {
        /// The turn.
        run_id: String,
        /// The provider (settings name) that produced it.
        provider: String,
        /// The block or item, exactly as received.
        item: Value,
    },
    /// One step's token usage (never projected; feeds compaction).
    Usage {
        /// The turn.
        run_id: String,
        /// Input tokens of the step.
        input_tokens: u64,
        /// Output tokens of the step.
        output_tokens: u64,
        /// Cached input tokens, where the provider reports them.
        #[serde(skip_serializing_if = "Option::is_none")]
        cached_input_tokens: Option<u64>,
        /// Input tokens written to the provider's cache, where reported (Anthropic).
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_creation_input_tokens: Option<u64>,
    },
}

/// What an activity is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityKind {
    /// A tool call.
    Tool,
    /// A subagent.
    Subagent,
    /// A compaction.
    Compaction,
}

/// The state of an activity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActivityState {
    /// Running.
    Started,
    /// Done.
    Completed,
    /// Failed or refused (`decisions.md` 28).
    Failed,
}

impl ActivityState {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Completed => "completed",
            Self::Failed => "failed",
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunOutcome {
    /// The model finished.
    Completed,
    /// The client cancelled it.
    Cancelled,
    /// It failed; the error code says why.
    Failed,
}

impl RunOutcome {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Failed => "failed",
        }
    }
}

type Parsed<T> = Result<T, HistoryError>;

/// A record's members in a flat list: a record has about ten, so a scan beats the map's
/// rebalancing on removal.
type Fields = Vec<(String, Value)>;

fn take(m: &mut Fields, k: &str) -> Option<Value> {
    let i = m.iter().position(|(key, _)| key == k)?;
    Some(m.swap_remove(i).1)
}

/// A required string member, moved out.
fn req(m: &mut Fields, k: &str) -> Parsed<String> {
    match take(m, k) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(HistoryError::Invalid),
    }
}

/// An optional string member: absent or `null` is `None`, another type is malformed.
fn opt(m: &mut Fields, k: &str) -> Parsed<Option<String>> {
    match take(m, k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(HistoryError::Invalid),
    }
}

/// A bool that may be absent but not `null`.
fn present_bool(m: &mut Fields, k: &str) -> Parsed<Option<bool>> {
    match take(m, k) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(b)),
        Some(_) => Err(HistoryError::Invalid),
    }
}

/// A required member of any JSON type.
fn any(m: &mut Fields, k: &str) -> Parsed<Value> {
    take(m, k).ok_or(HistoryError::Invalid)
}

/// A required non-negative integer.
fn count(m: &mut Fields, k: &str) -> Parsed<u64> {
    take(m, k)
        .and_then(|v| v.as_u64())
        .ok_or(HistoryError::Invalid)
}

/// An optional non-negative integer: absent or `null` is `None`, anything else malformed.
fn opt_count(m: &mut Fields, k: &str) -> Parsed<Option<u64>> {
    match take(m, k) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v.as_u64().map(Some).ok_or(HistoryError::Invalid),
    }
}

/// A string, or absent when the member holds anything else.
fn lenient(m: &mut Fields, k: &str) -> Option<String> {
    match take(m, k) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    }
}

/// A unit-variant enum member by its wire name.
fn named<T: for<'de> Deserialize<'de>>(m: &mut Fields, k: &str) -> Parsed<T> {
    match take(m, k) {
        Some(v @ Value::String(_)) => serde_json::from_value(v).map_err(|_| HistoryError::Invalid),
        _ => Err(HistoryError::Invalid),
    }
}

impl Body {
    fn from_fields(kind: &str, m: &mut Fields) -> Parsed<Self> {
        Ok(match kind {
            "session_meta" => Self::SessionMeta {},
            "user_input" => Self::UserInput {
                run_id: req(m, "run_id")?,
                message_id: opt(m, "message_id")?,
                text: req(m, "text")?,
            },
            "assistant_chunk" => Self::AssistantChunk {
                run_id: req(m, "run_id")?,
                message_id: req(m, "message_id")?,
                text: req(m, "text")?,
            },
            "assistant_message" => Self::AssistantMessage {
                run_id: req(m, "run_id")?,
                message_id: req(m, "message_id")?,
                text: opt(m, "text")?,
                partial: present_bool(m, "partial")?.unwrap_or(false),
            },
            "reasoning_summary" => Self::ReasoningSummary {
                run_id: req(m, "run_id")?,
                text: req(m, "text")?,
                item_id: opt(m, "item_id")?,
                provider_summary: present_bool(m, "provider_summary")?,
            },
            "activity" => Self::Activity {
                run_id: req(m, "run_id")?,
                activity_id: req(m, "activity_id")?,
                kind: named(m, "kind")?,
                state: named(m, "state")?,
                name: req(m, "name")?,
                summary: opt(m, "summary")?,
            },
            "tool_card" => Self::ToolCard {
                run_id: req(m, "run_id")?,
                activity_id: req(m, "activity_id")?,
                card: match any(m, "card")? {
                    v @ Value::Object(_) => v,
                    _ => return Err(HistoryError::Invalid),
                },
            },
            "session_preferences" => {
                let (provider, model, effort) =
                    (req(m, "provider")?, req(m, "model")?, req(m, "effort")?);
                if !STORED_EFFORTS.contains(&effort.as_str()) {
                    return Err(HistoryError::Invalid);
                }
                Self::SessionPreferences {
                    provider,
                    model,
                    effort,
                }
            }
            "title" => Self::Title {
                title: req(m, "title")?,
            },
            "compaction" => Self::Compaction {
                summary: opt(m, "summary")?,
                through: opt_count(m, "through")?,
                title: opt(m, "title")?,
            },
            "run_finished" => Self::RunFinished {
                run_id: req(m, "run_id")?,
                outcome: named(m, "outcome")?,
                error_code: lenient(m, "error_code"),
            },
            "tool_call" => Self::ToolCall {
                run_id: req(m, "run_id")?,
                call_id: req(m, "call_id")?,
                name: req(m, "name")?,
                input: any(m, "input")?,
            },
            "tool_result" => Self::ToolResult {
                run_id: req(m, "run_id")?,
                call_id: req(m, "call_id")?,
                output: req(m, "output")?,
                is_error: present_bool(m, "is_error")?.ok_or(HistoryError::Invalid)?,
            },
            "code_call" => Self::CellCall {
                run_id: req(m, "run_id")?,
                call_id: req(m, "call_id")?,
                seq: count(m, "seq")?,
                name: req(m, "name")?,
                input: any(m, "input")?,
                output: opt(m, "output")?,
                is_error: present_bool(m, "is_error")?,
            },
            "code_result" => Self::CellResult {
                run_id: req(m, "run_id")?,
                call_id: req(m, "call_id")?,
                seq: count(m, "seq")?,
                output: req(m, "output")?,
                is_error: present_bool(m, "is_error")?.ok_or(HistoryError::Invalid)?,
            },
            "provider_item" => Self::ProviderItem {
                run_id: req(m, "run_id")?,
                provider: req(m, "provider")?,
                item: any(m, "item")?,
            },
            "usage" => Self::Usage {
                run_id: req(m, "run_id")?,
                input_tokens: count(m, "input_tokens")?,
                output_tokens: count(m, "output_tokens")?,
                cached_input_tokens: opt_count(m, "cached_input_tokens")?,
                cache_creation_input_tokens: opt_count(m, "cache_creation_input_tokens")?,
            },
            // Stored reads reject diagnostics; unknown types fail closed.
            _ => return Err(HistoryError::Invalid),
        })
    }
}

/// Why a stored history was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryError {
    /// Malformed (`session_invalid`).
    Invalid,
    /// A record larger than the read window (`history_limit`).
    TooLarge,
    /// Replay items the window no longer keeps are needed: read the window again.
    Evicted,
}

impl Record {
    /// A record of `session_id` stamped now, without a cwd.
    #[must_use]
    pub fn now(session_id: &str, body: Body) -> Self {
        Self {
            session_id: session_id.to_owned(),
            ts: crate::util::time::rfc3339(crate::util::time::now_ms()),
            cwd: None,
            body,
        }
    }

    /// Parses one stored line strictly: a JSON object without duplicate keys, of a known type
    /// with its required members well-typed, and a `session_preferences` effort it knows.
    pub fn parse(line: &[u8]) -> Result<Self, HistoryError> {
        let (v, dups) =
            protocol_core::json::parse_strict(line).map_err(|_| HistoryError::Invalid)?;
        if !dups.top.is_empty() || dups.nested || !v.is_object() {
            return Err(HistoryError::Invalid);
        }
        let Value::Object(map) = v else {
            return Err(HistoryError::Invalid);
        };
        let mut m: Fields = map.into_iter().collect();
        let kind = req(&mut m, "type")?;
        let session_id = req(&mut m, "session_id")?;
        let ts = req(&mut m, "ts")?;
        let cwd = opt(&mut m, "cwd")?;
        let body = Body::from_fields(&kind, &mut m)?;
        Ok(Self {
            session_id,
            ts,
            cwd,
            body,
        })
    }

    /// The run this record belongs to, if any.
    #[must_use]
    pub fn run_id(&self) -> Option<&str> {
        match &self.body {
            Body::UserInput { run_id, .. }
            | Body::AssistantChunk { run_id, .. }
            | Body::AssistantMessage { run_id, .. }
            | Body::ReasoningSummary { run_id, .. }
            | Body::Activity { run_id, .. }
            | Body::ToolCard { run_id, .. }
            | Body::RunFinished { run_id, .. }
            | Body::ToolCall { run_id, .. }
            | Body::ToolResult { run_id, .. }
            | Body::CellCall { run_id, .. }
            | Body::CellResult { run_id, .. }
            | Body::ProviderItem { run_id, .. }
            | Body::Usage { run_id, .. } => Some(run_id),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: &Value) -> Result<Record, HistoryError> {
        Record::parse(v.to_string().as_bytes())
    }

    #[test]
    fn round_trip_and_unknown_fields() {
        let r = Record::now(
            "s",
            Body::RunFinished {
                run_id: "r".into(),
                outcome: RunOutcome::Failed,
                error_code: Some("execution_failed".into()),
            },
        );
        let line = serde_json::to_string(&r).unwrap();
        assert_eq!(Record::parse(line.as_bytes()).unwrap(), r);
        let v = json!({"type":"title","session_id":"s","ts":"t","title":"x","extra":[1]});
        assert!(matches!(parse(&v).unwrap().body, Body::Title { .. }));
        let v = json!({"type":"run_finished","session_id":"s","ts":"t","run_id":"r","outcome":"completed","error_code":5});
        assert!(
            parse(&v).is_ok(),
            "a mistyped optional error_code is tolerated"
        );
    }

    #[test]
    fn rejections() {
        for v in [
            json!({"type":"diagnostic","session_id":"s","ts":"t"}),
            json!({"type":"nope","session_id":"s","ts":"t"}),
            json!({"session_id":"s","ts":"t"}),
            json!({"type":"title","ts":"t","title":"x"}),
            json!({"type":"user_input","session_id":"s","ts":"t","text":"x"}),
            json!({"type":"user_input","session_id":"s","ts":"t","run_id":"r","text":5}),
            json!({"type":"activity","session_id":"s","ts":"t","run_id":"r","activity_id":"a","kind":"x","state":"started","name":"n"}),
            json!({"type":"reasoning_summary","session_id":"s","ts":"t","run_id":"r","text":"x","provider_summary":null}),
            json!({"type":"session_preferences","session_id":"s","ts":"t","provider":"p","model":"m","effort":"huge"}),
            json!({"type":"session_meta","session_id":"s","ts":"t","cwd":3}),
            json!([1]),
        ] {
            assert_eq!(parse(&v), Err(HistoryError::Invalid), "{v}");
        }
        assert_eq!(
            Record::parse(
                br#"{"type":"title","type":"title","session_id":"s","ts":"t","title":"x"}"#
            ),
            Err(HistoryError::Invalid)
        );
    }

    /// The quick read of a validated line gives what the strict read gives, and refuses
    /// (through the strict read) what it refuses.
    #[test]
    fn the_quick_read_equals_the_strict_one() {
        let lines = [
            json!({"type":"user_input","session_id":"s","ts":"t","run_id":"r","message_id":"m","text":"q\"é\n"}),
            json!({"type":"user_input","session_id":"s","ts":"t","run_id":"r","text":"q","cwd":"/w","extra":{"a":[1]}}),
            json!({"type":"assistant_chunk","session_id":"s","ts":"t","run_id":"r","message_id":"m","text":"x"}),
            json!({"type":"assistant_message","session_id":"s","ts":"t","run_id":"r","message_id":"m","text":"x","partial":true}),
            json!({"type":"assistant_message","session_id":"s","ts":"t","run_id":"r","message_id":"m"}),
            json!({"type":"reasoning_summary","session_id":"s","ts":"t","run_id":"r","text":"x","item_id":"i","provider_summary":true}),
            json!({"type":"reasoning_summary","session_id":"s","ts":"t","run_id":"r","text":"x","provider_summary":null}),
            json!({"type":"activity","session_id":"s","ts":"t","run_id":"r","activity_id":"a","kind":"tool","state":"started","name":"n","summary":"s"}),
            json!({"type":"activity","session_id":"s","ts":"t","run_id":"r","activity_id":"a","kind":"x","state":"started","name":"n"}),
            json!({"type":"title","session_id":"s","ts":"t","title":"x"}),
            json!({"type":"run_finished","session_id":"s","ts":"t","run_id":"r","outcome":"failed","error_code":"content_limit"}),
            json!({"type":"run_finished","session_id":"s","ts":"t","run_id":"r","outcome":"completed","error_code":5}),
            json!({"type":"tool_result","session_id":"s","ts":"t","run_id":"r","call_id":"c","output":"o","is_error":false}),
            json!({"type":"tool_result","session_id":"s","ts":"t","run_id":"r","call_id":"c","output":"o"}),
            json!({"type":"usage","session_id":"s","ts":"t","run_id":"r","input_tokens":5,"output_tokens":6,"cached_input_tokens":1}),
            json!({"type":"usage","session_id":"s","ts":"t","run_id":"r","input_tokens":-5,"output_tokens":6}),
            json!({"type":"usage","session_id":"s","ts":"t","run_id":"r","input_tokens":5.5,"output_tokens":6}),
            json!({"type":"compaction","session_id":"s","ts":"t","summary":"x","through":3}),
            json!({"type":"tool_call","session_id":"s","ts":"t","run_id":"r","call_id":"c","name":"n","input":{"k":[1,{"x":null}]}}),
            json!({"type":"session_meta","session_id":"s","ts":"t","cwd":3}),
            json!({"type":"nope","session_id":"s","ts":"t"}),
        ];
        for v in &lines {
            let b = v.to_string();
            assert_eq!(
                crate::history::quick::parse_trusted(b.as_bytes()),
                Record::parse(b.as_bytes()),
                "{v}"
            );
        }
        let dup = br#"{"type":"title","session_id":"s","ts":"t","title":"x","title":"y"}"#;
        assert_eq!(
            crate::history::quick::parse_trusted(dup),
            Err(HistoryError::Invalid)
        );
        for r in loop_records() {
            let line = serde_json::to_vec(&Record::now("s", r)).unwrap();
            assert_eq!(
                crate::history::quick::parse_trusted(&line),
                Record::parse(&line)
            );
        }
    }

    fn loop_records() -> Vec<Body> {
        vec![
            Body::ToolCall {
                run_id: "r".into(),
                call_id: "c1".into(),
                name: "read_file".into(),
                input: json!({"path": "a"}),
            },
            Body::ToolCall {
                run_id: "r".into(),
                call_id: "c2".into(),
                name: "shell".into(),
                input: json!("{not an object"),
            },
            Body::ToolResult {
                run_id: "r".into(),
                call_id: "c1".into(),
                output: "text".into(),
                is_error: true,
            },
            Body::ProviderItem {
                run_id: "r".into(),
                provider: "anthropic".into(),
                item: json!({"type": "thinking", "signature": "s"}),
            },
            Body::Usage {
                run_id: "r".into(),
                input_tokens: u64::MAX,
                output_tokens: 0,
                cached_input_tokens: Some(3),
                cache_creation_input_tokens: None,
            },
            Body::Usage {
                run_id: "r".into(),
                input_tokens: 1,
                output_tokens: 2,
                cached_input_tokens: None,
                cache_creation_input_tokens: None,
            },
            Body::AssistantMessage {
                run_id: "r".into(),
                message_id: "a".into(),
                text: Some("cut".into()),
                partial: true,
            },
            Body::ToolCard {
                run_id: "r".into(),
                activity_id: "t-1".into(),
                card: json!({"kind": "generic", "title": "x", "status": "running"}),
            },
            Body::CellCall {
                run_id: "r".into(),
                call_id: "x1".into(),
                seq: 3,
                name: "read_file".into(),
                input: json!({"path": "a"}),
                output: None,
                is_error: None,
            },
            Body::CellCall {
                run_id: "r".into(),
                call_id: "x1".into(),
                seq: 2,
                name: "read_file".into(),
                input: json!({"path": "a"}),
                output: Some("an older history's call".into()),
                is_error: Some(false),
            },
            Body::CellResult {
                run_id: "r".into(),
                call_id: "x1".into(),
                seq: 3,
                output: "denied by policy".into(),
                is_error: true,
            },
        ]
    }

    #[test]
    fn loop_records_round_trip() {
        for body in loop_records() {
            let r = Record::now("s", body);
            let line = serde_json::to_string(&r).unwrap();
            assert_eq!(Record::parse(line.as_bytes()).unwrap(), r, "{line}");
            assert_eq!(r.run_id(), Some("r"));
        }
        let whole = Record::now(
            "s",
            Body::AssistantMessage {
                run_id: "r".into(),
                message_id: "a".into(),
                text: Some("x".into()),
                partial: false,
            },
        );
        let line = serde_json::to_string(&whole).unwrap();
        assert!(
            !line.contains("partial"),
            "partial is written only when true"
        );
        let v = json!({"type":"tool_result","session_id":"s","ts":"t","run_id":"r","call_id":"c","output":"","is_error":false,"later":{"a":1}});
        assert!(matches!(parse(&v).unwrap().body, Body::ToolResult { .. }));
        let v = json!({"type":"usage","session_id":"s","ts":"t","run_id":"r","input_tokens":1,"output_tokens":2,"cached_input_tokens":null});
        assert!(matches!(
            parse(&v).unwrap().body,
            Body::Usage {
                cached_input_tokens: None,
                cache_creation_input_tokens: None,
                ..
            }
        ));
        let v = json!({"type":"tool_call","session_id":"s","ts":"t","run_id":"r","call_id":"c","name":"n","input":null});
        assert!(parse(&v).is_ok(), "input may be any JSON value");
    }

    #[test]
    fn loop_record_rejections() {
        let base = |extra: Value| {
            let mut v = json!({"session_id":"s","ts":"t","run_id":"r"});
            v.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            v
        };
        for v in [
            base(json!({"type":"tool_call","call_id":"c","name":"n"})),
            base(json!({"type":"tool_call","call_id":5,"name":"n","input":{}})),
            base(json!({"type":"tool_result","call_id":"c","output":"o"})),
            base(json!({"type":"tool_result","call_id":"c","output":"o","is_error":"no"})),
            base(json!({"type":"tool_result","call_id":"c","output":{},"is_error":false})),
            base(json!({"type":"provider_item","provider":"p"})),
            base(json!({"type":"provider_item","provider":1,"item":{}})),
            base(json!({"type":"usage","input_tokens":-1,"output_tokens":0})),
            base(json!({"type":"usage","input_tokens":1.5,"output_tokens":0})),
            base(json!({"type":"usage","input_tokens":1})),
            base(json!({"type":"usage","input_tokens":1,"output_tokens":"2"})),
            base(
                json!({"type":"usage","input_tokens":1,"output_tokens":2,"cached_input_tokens":-3}),
            ),
            base(json!({"type":"assistant_message","message_id":"a","partial":"yes"})),
            base(json!({"type":"assistant_message","message_id":"a","partial":null})),
            base(json!({"type":"tool_use","call_id":"c"})),
            base(json!({"type":"tool_card","activity_id":"t","card":"not an object"})),
            base(json!({"type":"tool_card","activity_id":"t"})),
            base(json!({"type":"tool_card","card":{}})),
            base(
                json!({"type":"code_call","call_id":"x","name":"n","input":{},"output":"o","is_error":false}),
            ),
            base(
                json!({"type":"code_call","call_id":"x","seq":-1,"name":"n","input":{},"output":"o","is_error":false}),
            ),
            base(
                json!({"type":"code_call","call_id":"x","seq":0,"name":"n","input":{},"output":1}),
            ),
            base(
                json!({"type":"code_call","call_id":"x","seq":0,"name":"n","input":{},"is_error":null}),
            ),
            base(json!({"type":"code_result","call_id":"x","seq":0,"output":"o"})),
            base(json!({"type":"code_result","call_id":"x","seq":-1,"output":"o","is_error":true})),
            base(json!({"type":"code_result","call_id":"x","output":"o","is_error":true})),
            base(json!({"type":"code_result","seq":0,"output":"o","is_error":true})),
            base(json!({"type":"code_result","call_id":"x","seq":0,"is_error":true})),
            base(
                json!({"type":"code_call","call_id":"x","seq":0,"name":"n","output":"o","is_error":true}),
            ),
        ] {
            assert_eq!(parse(&v), Err(HistoryError::Invalid), "{v}");
        }
        let v = json!({"type":"tool_call","session_id":"s","ts":"t","call_id":"c","name":"n","input":{}});
        assert_eq!(parse(&v), Err(HistoryError::Invalid), "run_id is required");
    }
}
