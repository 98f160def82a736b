//! The provider-neutral conversation's types: what a replay rebuilds, what compaction keeps,
//! and what providers build their requests from.

use serde_json::Value;

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
