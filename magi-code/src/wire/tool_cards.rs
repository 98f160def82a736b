//! The `tool.cards` card (`docs/extensions/tool-cards.md`): one shape per kind, each exactly
//! `{kind, title, status, …kind fields}`.

use protocol_core::limits;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A card's `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CardStatus {
    /// The activity is `started`.
    Running,
    /// The activity completed.
    Completed,
    /// The activity failed.
    Failed,
}

/// A display card; the serialized card is at most 4,096 bytes (`card_bytes`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
#[allow(missing_docs)] // Fields are the card members of the extension document.
pub enum Card {
    /// `shell`.
    Command {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        command: String,
        exit_code: Option<i64>,
        #[schemars(range(min = 0))]
        duration_ms: Option<u64>,
    },
    /// `read_file`.
    FileRead {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        path: String,
        #[schemars(range(min = 0))]
        lines: Option<u64>,
    },
    /// `write_file`, `edit_file`, `apply_patch`.
    FileEdit {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        path: String,
        #[schemars(range(min = 0))]
        added: u64,
        #[schemars(range(min = 0))]
        removed: u64,
    },
    /// `grep`, `glob`.
    Search {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        pattern: String,
        #[schemars(length(max = limits::CARD_BYTES))]
        path: Option<String>,
        #[schemars(range(min = 0))]
        matches: Option<u64>,
    },
    /// `mcp__<server>__<tool>`.
    Mcp {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        server: String,
        #[schemars(length(max = limits::CARD_BYTES))]
        tool: String,
    },
    /// A `client.tools` tool.
    Client {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CLIENT_TOOL_NAME_BYTES))]
        name: String,
    },
    /// `task`.
    Subagent {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
        #[schemars(length(max = limits::CARD_BYTES))]
        agent: String,
    },
    /// Anything else.
    Generic {
        #[schemars(length(max = limits::CARD_TITLE_BYTES))]
        title: String,
        status: CardStatus,
    },
}
