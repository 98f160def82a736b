//! The `extensions` member of the `initialize` result: one descriptor per negotiated
//! extension that has one (`tool.cards`, `client.tools`, `tool.details`).

use super::common::Version;
use protocol_core::limits;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// The `extensions` member of the `initialize` result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Extensions {
    /// The `tool.cards` descriptor.
    #[serde(
        rename = "tool.cards",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_cards: Option<ToolCardsDescriptor>,
    /// The `client.tools` descriptor.
    #[serde(
        rename = "client.tools",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_tools: Option<ClientToolsDescriptor>,
    /// The `tool.details` descriptor.
    #[serde(
        rename = "tool.details",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tool_details: Option<ToolDetailsDescriptor>,
}

/// `{"version": 1, "tail_lines": 8, "tail_bytes": 2048, "diff_bytes": 16384}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDetailsDescriptor {
    /// `1`.
    pub version: u64,
    /// Most lines of a `tool.output` tail.
    pub tail_lines: u64,
    /// Most bytes of a `tool.output` tail.
    pub tail_bytes: u64,
    /// Most bytes of a `tool.diff` diff.
    pub diff_bytes: u64,
}

impl JsonSchema for ToolDetailsDescriptor {
    fn schema_name() -> Cow<'static, str> {
        "ToolDetailsDescriptor".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "`{\"version\": 1, \"tail_lines\": 8, \"tail_bytes\": 2048, \"diff_bytes\": 16384}`.",
            "type": "object",
            "additionalProperties": false,
            "required": ["version", "tail_lines", "tail_bytes", "diff_bytes"],
            "properties": {
                "version": { "type": "integer", "const": 1 },
                "tail_lines": { "type": "integer", "const": limits::TOOL_TAIL_LINES },
                "tail_bytes": { "type": "integer", "const": limits::TOOL_TAIL_BYTES },
                "diff_bytes": { "type": "integer", "const": limits::TOOL_DIFF_BYTES }
            }
        })
    }
}

/// `{"version": 1, "kinds": [all eight], "card_bytes": 4096}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCardsDescriptor {
    /// `1`.
    pub version: u64,
    /// The eight card kinds, in their order.
    pub kinds: Vec<String>,
    /// The largest serialized card.
    pub card_bytes: u64,
}

impl JsonSchema for ToolCardsDescriptor {
    fn schema_name() -> Cow<'static, str> {
        "ToolCardsDescriptor".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "`{\"version\": 1, \"kinds\": [all eight], \"card_bytes\": 4096}`.",
            "type": "object",
            "additionalProperties": false,
            "required": ["version", "kinds", "card_bytes"],
            "properties": {
                "version": { "type": "integer", "const": 1 },
                "kinds": { "type": "array", "const": protocol_core::caps::TOOL_CARD_KINDS },
                "card_bytes": { "type": "integer", "const": limits::CARD_BYTES }
            }
        })
    }
}

/// `{"version": 1, "tools": [names in registration order]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientToolsDescriptor {
    /// `1`.
    #[schemars(with = "Version")]
    pub version: u64,
    /// The registered tool names.
    #[schemars(length(max = limits::CLIENT_TOOLS), inner(length(min = 1, max = limits::CLIENT_TOOL_NAME_BYTES)))]
    pub tools: Vec<String>,
}
