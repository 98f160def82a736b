//! The typed history record: one enum for every writer and the reader
//! (`docs/history-format.md`). Unknown fields are tolerated; an unknown `type` is malformed.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// Effort values a `session_preferences` record may hold.
pub const STORED_EFFORTS: [&str; 6] = ["default", "low", "medium", "high", "xhigh", "max"];

/// One stored line: the members every record has, and the typed body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Equal to the file's session ID.
    pub session_id: String,
    /// RFC 3339 timestamp.
    pub ts: String,
    /// Any record may carry the canonical cwd it was written from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The typed part, tagged by `type`.
    #[serde(flatten)]
    pub body: Body,
}

/// The type-specific part of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Body {
    /// The first record this project writes.
    SessionMeta {},
    /// The prompt of a turn, durable before any provider work.
    UserInput {
        /// The turn.
        run_id: String,
        /// The live message ID of the prompt.
        #[serde(default, skip_serializing_if = "Option::is_none")]
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// A reasoning summary.
    ReasoningSummary {
        /// The turn.
        run_id: String,
        /// The summary.
        text: String,
        /// A later summary with the same run and item replaces the earlier one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
        /// Only provider summaries are projected.
        #[serde(
            default,
            deserialize_with = "present_bool",
            skip_serializing_if = "Option::is_none"
        )]
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
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
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// A title chosen with it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// The end of a turn.
    RunFinished {
        /// The turn.
        run_id: String,
        /// How it ended.
        outcome: RunOutcome,
        /// The error code of a failed turn; another type is tolerated as absent.
        #[serde(
            default,
            deserialize_with = "lenient_str",
            skip_serializing_if = "Option::is_none"
        )]
        error_code: Option<String>,
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

/// A bool that may be absent but not `null`.
fn present_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    bool::deserialize(d).map(Some)
}

/// A string, or absent when the member holds anything else.
fn lenient_str<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// Why a stored history was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryError {
    /// Malformed (`session_invalid`).
    Invalid,
    /// Over the projection budget (`history_limit`).
    TooLarge,
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
        let r: Self = serde_json::from_value(v).map_err(|_| HistoryError::Invalid)?;
        if let Body::SessionPreferences { effort, .. } = &r.body {
            if !STORED_EFFORTS.contains(&effort.as_str()) {
                return Err(HistoryError::Invalid);
            }
        }
        Ok(r)
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
            | Body::RunFinished { run_id, .. } => Some(run_id),
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
}
