//! Every run event's `data` (protocol "Turns, approvals and events", `tool.cards`,
//! `client.tools`). Each carries `session_id` and `run_id` (`decisions.md` 1).

use super::common::{ErrorCodeName, OpaqueId, Part, SessionId, Summary, True, Uuid};
use super::tool_cards::Card;
use protocol_core::limits;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `input.persisted`: the prompt was appended durably.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputPersistedData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The input's message ID within `revision`.
    #[schemars(with = "OpaqueId")]
    pub message_id: String,
    /// Always `true`.
    pub durable: True,
    /// The acknowledgement revision.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
}

/// `message.delta`: a best-effort append to an assistant segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageDeltaData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The assistant segment.
    #[schemars(with = "OpaqueId")]
    pub message_id: String,
    /// Delta part index.
    #[schemars(with = "Part")]
    pub part: u64,
    /// At most 4,000 UTF-8 bytes.
    #[schemars(length(max = limits::LIVE_CHUNK_BYTES))]
    pub text: String,
}

/// `message.reconcile`: authoritative replacement chunks of a segment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MessageReconcileData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The assistant segment.
    #[schemars(with = "OpaqueId")]
    pub message_id: String,
    /// Reconciliation part index.
    #[schemars(with = "Part")]
    pub part: u64,
    /// At most 4,000 UTF-8 bytes.
    #[schemars(length(max = limits::LIVE_CHUNK_BYTES))]
    pub text: String,
    /// Whether this part completes reconciliation.
    pub last_part: bool,
    /// Whether the segment is partial.
    pub partial: bool,
}

/// An activity's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActivityKind {
    /// A tool call.
    Tool,
    /// A `task` call.
    Subagent,
    /// A compaction.
    Compaction,
}

/// An activity's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActivityState {
    /// Started.
    Started,
    /// Completed.
    Completed,
    /// Failed (refused, denied, expired, cancelled or failed).
    Failed,
}

/// `activity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActivityData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The activity, at most 1,024 bytes.
    #[schemars(length(min = 1, max = limits::ACTIVITY_ID_BYTES))]
    pub activity_id: String,
    /// Its kind.
    pub kind: ActivityKind,
    /// Its state.
    pub state: ActivityState,
    /// The tool's name as offered to the model.
    #[schemars(length(max = limits::SUMMARY_BYTES))]
    pub name: String,
    /// A redacted summary.
    #[schemars(with = "Summary")]
    pub summary: String,
}

/// `approval.requested`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequestedData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The run-scoped approval UUID.
    #[schemars(with = "Uuid")]
    pub approval_id: String,
    /// A safe summary.
    #[schemars(with = "Summary")]
    pub summary: String,
    /// Always 60,000.
    #[schemars(range(min = limits::APPROVAL_EXPIRY_MS, max = limits::APPROVAL_EXPIRY_MS))]
    pub expires_in_ms: u64,
}

/// `diagnostic`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// A fixed code (`provider_retry`, `hook_failed`, an error code …).
    #[schemars(length(min = 1, max = limits::ID_BYTES), regex(pattern = "^[a-z0-9_]+$"))]
    pub code: String,
    /// A redacted summary.
    #[schemars(with = "Summary")]
    pub summary: String,
}

/// A run's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Completed.
    Completed,
    /// Cancelled.
    Cancelled,
    /// Failed.
    Failed,
}

/// What became of a run's records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Persistence {
    /// Every record is durable.
    Durable,
    /// A later append failed.
    Degraded,
    /// The input was never persisted.
    NotStarted,
}

/// `run.finished`: once, after worker and cleanup accounting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFinishedData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The outcome.
    pub outcome: Outcome,
    /// The persistence.
    pub persistence: Persistence,
    /// The history revision for later pages; null means reopen.
    #[schemars(with = "Option<OpaqueId>")]
    pub revision: Option<String>,
    /// Why the run failed.
    #[schemars(with = "Option<ErrorCodeName>")]
    pub error_code: Option<String>,
}

/// `tool.card` (negotiated `tool.cards`): the card after each tool `activity`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCardData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The activity the card shows.
    #[schemars(length(min = 1, max = limits::ACTIVITY_ID_BYTES))]
    pub activity_id: String,
    /// The card.
    pub card: Card,
}

/// `client.tool.call` (negotiated `client.tools`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolCallData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The run-scoped call UUID.
    #[schemars(with = "Uuid")]
    pub call_id: String,
    /// The client tool's name.
    #[schemars(length(min = 1, max = limits::CLIENT_TOOL_NAME_BYTES))]
    pub name: String,
    /// The model's input object, at most 49,152 bytes serialized.
    #[schemars(schema_with = "any_object")]
    pub input: Map<String, Value>,
}

fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "description": "The model's JSON object, at most 49152 bytes serialized.", "type": "object" })
}

/// `client.tool.cancel` (negotiated `client.tools`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolCancelData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The closed call.
    #[schemars(with = "Uuid")]
    pub call_id: String,
}

/// `tool.output` (negotiated `tool.details`): the end of what a tool gave the model, after
/// its final `activity` (and `tool.card`); live only, never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolOutputData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The tool's activity.
    #[schemars(length(min = 1, max = limits::ACTIVITY_ID_BYTES))]
    pub activity_id: String,
    /// The output's last lines (at most 8 lines and 2,048 bytes), sanitized and redacted.
    #[schemars(length(max = limits::TOOL_TAIL_BYTES))]
    pub tail: String,
    /// Lines of the whole output.
    pub lines: u64,
    /// Bytes of the whole output.
    pub bytes: u64,
}

/// `tool.diff` (negotiated `tool.details`): the change a file tool proposes, right before
/// its `approval.requested`; live only, never stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolDiffData {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// The tool's activity.
    #[schemars(length(min = 1, max = limits::ACTIVITY_ID_BYTES))]
    pub activity_id: String,
    /// The approval request it belongs to.
    #[schemars(with = "Uuid")]
    pub approval_id: String,
    /// A unified diff (at most 16,384 bytes), sanitized and redacted.
    #[schemars(length(max = limits::TOOL_DIFF_BYTES))]
    pub diff: String,
    /// Lines the change adds, in all files.
    pub added: u64,
    /// Lines the change removes, in all files.
    pub removed: u64,
    /// The diff was cut to its bound (the counts stay whole).
    pub truncated: bool,
}
