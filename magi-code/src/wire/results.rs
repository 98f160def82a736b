//! The result of every method, exactly as the protocol and extension documents write it
//! (`decisions.md` 24: no fields beyond those listed).

use super::common::{
    CacheOnly, CapabilityName, CatalogString, ContextId, ErrorCodeName, Name, Notice, OpaqueId,
    ScopeSession, SessionId, StartupCode, Timestamp, True, Uuid,
};
use super::tool_cards::Card;
use protocol_core::limits;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

pub use super::extensions::{
    ClientToolsDescriptor, Extensions, ToolCardsDescriptor, ToolDetailsDescriptor,
};

/// The `initialize` result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InitializeResult {
    /// The sixteen base names, then `tool.cards` and/or `client.tools` when negotiated.
    #[schemars(with = "Vec<CapabilityName>", length(min = 16, max = limits::REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS))]
    pub capabilities: Vec<String>,
    /// Every advertised bound (`decisions.md` 9).
    pub limits: Limits,
    /// The status at the time of the answer.
    pub status: Status,
    /// One descriptor per negotiated descriptor extension; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Extensions>,
}

/// The `limits` object: one integer per advertised bound, built from
/// `protocol_core::limits::{ADVERTISED, DISCOVER_ADVERTISED, CLIENT_TOOLS_ADVERTISED}`; each
/// key is its constant's value. Extension keys appear only when negotiated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Limits(pub BTreeMap<String, u64>);

impl JsonSchema for Limits {
    fn schema_name() -> Cow<'static, str> {
        "Limits".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let mut props = serde_json::Map::new();
        let mut required = Vec::new();
        let extension = limits::DISCOVER_ADVERTISED
            .iter()
            .chain(limits::CLIENT_TOOLS_ADVERTISED);
        for (k, v) in limits::ADVERTISED {
            props.insert(
                (*k).into(),
                serde_json::json!({ "type": "integer", "const": v }),
            );
            required.push(*k);
        }
        for (k, v) in extension {
            props.insert(
                (*k).into(),
                serde_json::json!({ "type": "integer", "const": v }),
            );
        }
        json_schema!({
            "description": "Advertised bounds. discover_* keys appear exactly when session.discover was negotiated, client_tool* keys exactly when client.tools was.",
            "type": "object",
            "additionalProperties": false,
            "required": required,
            "properties": props
        })
    }
}

/// The `status` result (also `initialize`'s `status`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Status {
    /// `starting`, `idle`, `running` or `failed`.
    pub state: State,
    /// `initializing`, `ready`, or the startup error code after a failure.
    #[schemars(with = "Readiness")]
    pub readiness: String,
    /// The effective provider; null while starting or if unsafe.
    #[schemars(with = "Option<Name>")]
    pub provider: Option<String>,
    /// The effective model; null while starting or if unsafe.
    #[schemars(with = "Option<Name>")]
    pub model: Option<String>,
    /// The context identity; null while starting.
    #[schemars(with = "Option<ContextId>")]
    pub context_id: Option<String>,
    /// The attached session.
    #[schemars(with = "Option<SessionId>")]
    pub session_id: Option<String>,
    /// The active run.
    #[schemars(with = "Option<Uuid>")]
    pub run_id: Option<String>,
    /// The selection; null before readiness and after a failed startup (`decisions.md` 10).
    pub selection: Option<Selection>,
}

/// `status.state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Initialization is pending.
    Starting,
    /// Ready, no run.
    Idle,
    /// Ready, a run is active.
    Running,
    /// Startup failed.
    Failed,
}

/// `status.readiness`: `initializing`, `ready` or a startup error code.
pub struct Readiness;

impl JsonSchema for Readiness {
    fn schema_name() -> Cow<'static, str> {
        "Readiness".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let startup = g.subschema_for::<StartupCode>();
        json_schema!({ "description": "`status.readiness`: `initializing`, `ready` or a startup error code.", "anyOf": [ { "type": "string", "enum": ["initializing", "ready"] }, startup ] })
    }
}

/// An effort value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Effort {
    /// No explicit override.
    Default,
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high`.
    High,
    /// `xhigh`.
    Xhigh,
    /// `max`.
    Max,
}

/// Whether a model's effort controls are known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EffortSupport {
    /// Supported.
    Supported,
    /// Explicitly unsupported.
    Unsupported,
    /// Unknown or unreadable.
    Unknown,
}

/// The selection object (`status.selection`, `selection.set`'s `selection`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// The selection revision.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// The provider, null if unsafe.
    #[schemars(with = "Option<Name>")]
    pub provider: Option<String>,
    /// The model, null if unsafe.
    #[schemars(with = "Option<Name>")]
    pub model: Option<String>,
    /// The backend's retained request.
    pub requested_effort: Effort,
    /// The resolved effort; null when not applicable or unknown.
    pub effective_effort: Option<Effort>,
    /// Whether effort controls are known.
    pub effort_support: EffortSupport,
    /// The efforts a request may name.
    #[schemars(length(max = 6))]
    pub permitted_efforts: Vec<Effort>,
}

/// `shutdown` result: `{"state":"stopping"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShutdownResult {
    /// `stopping`.
    pub state: Stopping,
}

/// `"stopping"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Stopping {
    /// The child stops.
    Stopping,
}

/// `session.create` and `session.open` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionResult {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// Whether history exists on disk (always false for `session.create`).
    pub durable: bool,
    /// The history revision.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// Notices (`cwd_unverified`, `saved_selection_*`).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// A `session.list` / `session.discover` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionEntry {
    /// The session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The durable title, sanitized; null when missing or unsafe.
    #[schemars(length(max = limits::DISCOVERY_TITLE_BYTES))]
    pub title: Option<String>,
    /// The greatest durable event timestamp; null for an empty history.
    #[schemars(with = "Option<Timestamp>")]
    pub updated_at: Option<String>,
    /// `available`, `cwd_unverified` or `busy`.
    pub eligibility: Eligibility,
    /// Notices of this entry.
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// A listing entry's eligibility.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Eligibility {
    /// Openable as far as listing knows.
    Available,
    /// No recorded cwd to verify.
    CwdUnverified,
    /// Another writer's lease is present.
    Busy,
}

/// `session.list` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListResult {
    /// The discovery snapshot.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// This page's entries.
    #[schemars(length(max = limits::DISCOVERY_PAGE_ENTRIES))]
    pub sessions: Vec<SessionEntry>,
    /// The next page's cursor.
    #[schemars(with = "Option<OpaqueId>")]
    pub next_cursor: Option<String>,
    /// Whether this is the last page of a complete snapshot.
    pub complete: bool,
    /// Notices (`sessions_omitted_invalid`).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// `session.discover` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionDiscoverResult {
    /// This call's entries.
    #[schemars(length(max = limits::DISCOVER_PAGE_ENTRIES))]
    pub sessions: Vec<SessionEntry>,
    /// The last examined session ID when more names may follow.
    #[schemars(with = "Option<SessionId>")]
    pub next_cursor: Option<String>,
    /// Whether the call examined every name after the cursor.
    pub complete: bool,
    /// Always `true`.
    pub provisional: True,
    /// Notices (`sessions_omitted_invalid`).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// A `model.catalog` choice.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Choice {
    /// Stable digest of the provider/model tuple.
    #[schemars(with = "OpaqueId")]
    pub selection_id: String,
    /// The provider.
    #[schemars(with = "CatalogString")]
    pub provider: String,
    /// The model.
    #[schemars(with = "CatalogString")]
    pub model: String,
    /// Display name of the provider.
    #[schemars(with = "Option<CatalogString>")]
    pub provider_name: Option<String>,
    /// Display name of the model.
    #[schemars(with = "Option<CatalogString>")]
    pub model_name: Option<String>,
    /// Local authentication readiness.
    pub availability: Availability,
    /// Whether effort controls are known.
    pub effort_support: EffortSupport,
    /// The efforts a request may name.
    #[schemars(length(max = 6))]
    pub permitted_efforts: Vec<Effort>,
}

/// A choice's availability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    /// Locally admitted.
    Available,
    /// No locally available authentication.
    AuthenticationUnavailable,
}

/// `model.catalog` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelCatalogResult {
    /// The catalog snapshot.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// This page's choices.
    #[schemars(length(max = limits::CATALOG_PAGE_ENTRIES))]
    pub choices: Vec<Choice>,
    /// The next page's cursor.
    #[schemars(with = "Option<OpaqueId>")]
    pub next_cursor: Option<String>,
    /// Whether every cached choice was paged.
    pub complete: bool,
    /// Notices (`provider_catalog_unavailable`, `catalog_entries_omitted_unsafe`).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
    /// Always `cache_only`.
    pub source: CacheOnly,
}

/// `model.catalog.status` provider state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderState {
    /// Enabled, valid cache, key available.
    Ready,
    /// Enabled, valid cache, no key.
    AuthenticationUnavailable,
    /// Enabled, no cache.
    CacheMissing,
    /// Enabled, the cache is invalid.
    CacheInvalid,
    /// Enabled, the cache lists no models.
    CacheEmpty,
    /// Not enabled.
    NotEnabled,
}

/// One provider of `model.catalog.status`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderStatus {
    /// The provider.
    #[schemars(with = "CatalogString")]
    pub provider: String,
    /// Its state.
    pub state: ProviderState,
    /// Models in its cache.
    #[schemars(range(max = limits::CATALOG_MODELS))]
    pub cached_models: u64,
    /// The cache's `fetched_at`.
    #[schemars(with = "Option<Timestamp>")]
    pub fetched_at: Option<String>,
}

/// `model.catalog.status` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelCatalogStatusResult {
    /// Providers in ascending byte order.
    #[schemars(length(max = limits::CATALOG_PROVIDERS))]
    pub providers: Vec<ProviderStatus>,
    /// Notices (currently always empty).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// `model.refresh` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelRefreshResult {
    /// The provider.
    #[schemars(with = "Name")]
    pub provider: String,
    /// Models written to the cache.
    #[schemars(range(max = limits::CATALOG_MODELS))]
    pub models: u64,
    /// When they were fetched.
    #[schemars(with = "Timestamp")]
    pub fetched_at: String,
}

/// `{"cancellation_requested": true}` (`turn.cancel`, `operation.cancel`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelResult {
    /// Always `true`.
    pub cancellation_requested: True,
}

/// `{"recorded": true}` (`approval.answer`, `client.tool.result`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedResult {
    /// Always `true`.
    pub recorded: True,
}

/// `selection.set` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectionSetResult {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The new selection.
    pub selection: Selection,
    /// The catalog revision (unchanged).
    #[schemars(with = "OpaqueId")]
    pub catalog_revision: String,
    /// Always `session`.
    pub scope: ScopeSession,
    /// Always `true`.
    pub durable: True,
    /// The refreshed history revision; null when the projection is unavailable.
    #[schemars(with = "Option<OpaqueId>")]
    pub history_revision: Option<String>,
    /// Notices (`selection_normalized`, `metadata_update_failed`, `history_unavailable`).
    #[schemars(with = "Vec<Notice>")]
    pub notices: Vec<String>,
}

/// A history entry's kind (`tool_card` only with `tool.cards`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// The user's prompt.
    User,
    /// Assistant text.
    Assistant,
    /// A provider reasoning summary.
    ReasoningSummary,
    /// A tool, subagent or compaction activity.
    Activity,
    /// A compaction.
    Compaction,
    /// A diagnostic.
    Diagnostic,
    /// A `tool.cards` card.
    ToolCard,
}

/// A `history.page` entry; `card` is present exactly on `tool_card` entries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(extend(
    "if" = { "properties": { "kind": { "const": "tool_card" } } },
    "then" = { "required": ["card"] },
    "else" = { "not": { "required": ["card"] } }
))]
pub struct HistoryEntry {
    /// The message, scoped to session and revision.
    #[schemars(with = "OpaqueId")]
    pub message_id: String,
    /// Its kind.
    pub kind: EntryKind,
    /// This part's text, at most 16,384 UTF-8 bytes.
    #[schemars(length(max = limits::HISTORY_CHUNK_BYTES))]
    pub text: String,
    /// Whether the message is partial.
    pub partial: bool,
    /// The part index.
    #[schemars(with = "super::common::Part")]
    pub part: u64,
    /// Whether this is the message's last part.
    pub last_part: bool,
    /// `tool_card` entries: the activity's last card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Card")]
    pub card: Option<Card>,
}

/// `history.page` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryPageResult {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The history revision.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// This page's entries.
    #[schemars(length(max = limits::HISTORY_PAGE_ENTRIES))]
    pub entries: Vec<HistoryEntry>,
    /// The next page's cursor.
    #[schemars(with = "Option<OpaqueId>")]
    pub next_cursor: Option<String>,
    /// Whether this is the last page of a complete projection.
    pub complete: bool,
}

/// `turn.start` result: admission only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnStartResult {
    /// The run.
    #[schemars(with = "Uuid")]
    pub run_id: String,
    /// Always `true`.
    pub accepted: True,
}

/// The `error` object: `{"code": "…"}`, never text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorObject {
    /// The code.
    #[schemars(with = "ErrorCodeName")]
    pub code: String,
}
