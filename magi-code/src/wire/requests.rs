//! The params of every method, exactly as `local-agent-protocol.md` and the extension
//! documents write them: unknown fields are refused (`deny_unknown_fields`).

use super::common::{CapabilityName, Name, OpaqueId, PageLimit, RequestId, SessionId};
use protocol_core::limits;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::borrow::Cow;

/// `initialize` params: `required_capabilities` (at most 16 names, 18 with `client.tools`)
/// and, exactly when `client.tools` is required, `client_tools`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitializeParams {
    /// Capability names the client needs.
    pub required_capabilities: Vec<String>,
    /// `client.tools`: the tools the client registers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_tools: Option<Vec<ClientTool>>,
}

impl JsonSchema for InitializeParams {
    fn schema_name() -> Cow<'static, str> {
        "InitializeParams".into()
    }
    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let name = g.subschema_for::<CapabilityName>();
        let tool = g.subschema_for::<ClientTool>();
        let client = json_schema!({ "const": "client.tools" });
        json_schema!({
            "description": "initialize params. Base: at most 16 names and no client_tools. With client.tools among the names: at most 18 names and client_tools required.",
            "oneOf": [
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["required_capabilities"],
                    "properties": {
                        "required_capabilities": {
                            "type": "array", "items": name,
                            "maxItems": limits::REQUIRED_CAPABILITIES,
                            "not": { "contains": client }
                        }
                    }
                },
                {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["required_capabilities", "client_tools"],
                    "properties": {
                        "required_capabilities": {
                            "type": "array", "items": name,
                            "maxItems": limits::REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS,
                            "contains": client
                        },
                        "client_tools": {
                            "type": "array", "items": tool, "maxItems": limits::CLIENT_TOOLS
                        }
                    }
                }
            ]
        })
    }
}

/// One `client.tools` definition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientTool {
    /// 1–64 bytes of `[A-Za-z0-9_-]`; not a built-in, `task` or `mcp__` name.
    #[schemars(length(min = 1, max = limits::CLIENT_TOOL_NAME_BYTES), regex(pattern = "^[A-Za-z0-9_-]+$"))]
    pub name: String,
    /// What the model reads about the tool.
    #[schemars(length(max = limits::CLIENT_TOOL_DESCRIPTION_BYTES))]
    pub description: String,
    /// A JSON object schema (`"type": "object"`), at most 16,384 bytes serialized.
    #[schemars(schema_with = "object_schema")]
    pub input_schema: Value,
}

fn object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "A JSON Schema object whose type is \"object\", at most 16384 bytes serialized.",
        "type": "object",
        "required": ["type"],
        "properties": { "type": { "const": "object" } }
    })
}

/// Params exactly `{}` (`status`, `shutdown`, `session.create`, `model.catalog.status`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyParams {}

/// `session.open` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionOpenParams {
    /// The exact session ID.
    #[schemars(with = "SessionId")]
    pub session_id: String,
}

/// `session.list` and `model.catalog` params: a fresh snapshot (both null or omitted) or a
/// continuation (both set).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotPageParams {
    /// The snapshot revision; null for a fresh one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<OpaqueId>")]
    pub revision: Option<String>,
    /// The cursor of the next page; null for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<OpaqueId>")]
    pub cursor: Option<String>,
    /// Entries requested: 1–100, default 100 (omitted, never null).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PageLimit")]
    pub limit: Option<u64>,
}

/// `session.discover` params.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionDiscoverParams {
    /// The last examined session ID of the previous call; null for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<OpaqueId>")]
    pub cursor: Option<String>,
    /// Entries requested: 1–100, default 100 (omitted, never null).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "PageLimit")]
    pub limit: Option<u64>,
}

/// `model.refresh` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelRefreshParams {
    /// The provider whose model list to fetch.
    #[schemars(with = "Name")]
    pub provider: String,
}

/// `operation.cancel` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OperationCancelParams {
    /// The ID of the request that started the operation.
    #[schemars(with = "RequestId")]
    pub request_id: String,
}

/// An explicit effort level of `selection.set`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum EffortLevel {
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

/// The `effort` object of `selection.set`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "lowercase", deny_unknown_fields)]
pub enum EffortRequest {
    /// Keep the previously requested effort.
    Keep,
    /// Reset to the backend's no-override policy.
    Default,
    /// Request this explicit level.
    Set {
        /// The level.
        value: EffortLevel,
    },
}

/// `selection.set` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectionSetParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// `status.selection.revision`.
    #[schemars(with = "OpaqueId")]
    pub selection_revision: String,
    /// The catalog revision the choice came from.
    #[schemars(with = "OpaqueId")]
    pub catalog_revision: String,
    /// The provider.
    #[schemars(with = "Name")]
    pub provider: String,
    /// The model.
    #[schemars(with = "Name")]
    pub model: String,
    /// The effort request; omitted means `{"mode":"keep"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "EffortRequest")]
    pub effort: Option<EffortRequest>,
}

/// `history.page` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryPageParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The history revision.
    #[schemars(with = "OpaqueId")]
    pub revision: String,
    /// The cursor of the next page; null or omitted for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<OpaqueId>")]
    pub cursor: Option<String>,
}

/// `turn.start` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnStartParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The prompt: 1–16,384 UTF-8 bytes, not all white space.
    #[schemars(length(min = 1, max = limits::PROMPT_BYTES), regex(pattern = "\\S"))]
    pub prompt: String,
}

/// `turn.cancel` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnCancelParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The active run.
    #[schemars(with = "OpaqueId")]
    pub run_id: String,
}

/// `approval.answer` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswerParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The active run.
    #[schemars(with = "OpaqueId")]
    pub run_id: String,
    /// The approval of `approval.requested`.
    #[schemars(with = "OpaqueId")]
    pub approval_id: String,
    /// The decision.
    pub allow: bool,
}

/// `client.tool.result` params.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolResultParams {
    /// The attached session.
    #[schemars(with = "SessionId")]
    pub session_id: String,
    /// The active run.
    #[schemars(with = "OpaqueId")]
    pub run_id: String,
    /// The call of `client.tool.call`.
    #[schemars(with = "OpaqueId")]
    pub call_id: String,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The tool's output, at most 49,152 UTF-8 bytes.
    #[schemars(length(max = limits::CLIENT_TOOL_OUTPUT_BYTES))]
    pub output: String,
}
