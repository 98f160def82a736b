//! The quick read of a stored line already validated (`decisions.md` 50: its owner read or
//! wrote it, and its derived metadata covers it): typed members instead of a JSON value per
//! member, giving the record the strict read gives.

use super::record::{ActivityKind, ActivityState, Body, HistoryError, Record, RunOutcome};
use serde::Deserialize;

/// Parses a line that was validated before (its owner read or wrote it: the derived
/// metadata covers it) the quick way: typed members, no JSON value per member. The record
/// is the one [`Record::parse`] gives; a line the quick way cannot read is parsed strictly.
pub fn parse_trusted(line: &[u8]) -> Result<Record, HistoryError> {
    // A `null` member reads differently typed (`None`) than strictly (some refuse it).
    if memchr::memmem::find(line, b":null").is_none() {
        let quick = serde_json::from_slice::<Loose>(line)
            .ok()
            .and_then(Loose::record);
        if let Some(r) = quick {
            return Ok(r);
        }
    }
    Record::parse(line)
}

/// Every member a record of this backend may carry, for the quick read of a line that was
/// already validated (`Record::parse_trusted`): typed fields, no `Value` per member.
// Unknown members are refused (the strict read then decides): the strict read tolerates them
// but refuses duplicated keys and invalid UTF-8 inside them, which an ignored member would hide.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Loose {
    #[serde(rename = "type")]
    record_type: String,
    session_id: String,
    ts: String,
    cwd: Option<String>,
    run_id: Option<String>,
    message_id: Option<String>,
    text: Option<String>,
    partial: Option<bool>,
    item_id: Option<String>,
    provider_summary: Option<bool>,
    activity_id: Option<String>,
    kind: Option<ActivityKind>,
    state: Option<ActivityState>,
    name: Option<String>,
    summary: Option<String>,
    title: Option<String>,
    outcome: Option<RunOutcome>,
    error_code: Option<String>,
    call_id: Option<String>,
    output: Option<String>,
    is_error: Option<bool>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cached_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    /// `run_finished` members no record carries into its body.
    #[allow(dead_code)]
    persistence: Option<String>,
    #[allow(dead_code)]
    revision: Option<String>,
}

impl Loose {
    /// The record, for the types whose members are all typed here (others: `None`).
    fn record(self) -> Option<Record> {
        let run_id = self.run_id;
        let body = match self.record_type.as_str() {
            "user_input" => Body::UserInput {
                run_id: run_id?,
                message_id: self.message_id,
                text: self.text?,
            },
            "assistant_chunk" => Body::AssistantChunk {
                run_id: run_id?,
                message_id: self.message_id?,
                text: self.text?,
            },
            "assistant_message" => Body::AssistantMessage {
                run_id: run_id?,
                message_id: self.message_id?,
                text: self.text,
                partial: self.partial.unwrap_or(false),
            },
            "reasoning_summary" => Body::ReasoningSummary {
                run_id: run_id?,
                text: self.text?,
                item_id: self.item_id,
                provider_summary: self.provider_summary,
            },
            "activity" => Body::Activity {
                run_id: run_id?,
                activity_id: self.activity_id?,
                kind: self.kind?,
                state: self.state?,
                name: self.name?,
                summary: self.summary,
            },
            "title" => Body::Title { title: self.title? },
            "run_finished" => Body::RunFinished {
                run_id: run_id?,
                outcome: self.outcome?,
                error_code: self.error_code,
            },
            "tool_result" => Body::ToolResult {
                run_id: run_id?,
                call_id: self.call_id?,
                output: self.output?,
                is_error: self.is_error?,
            },
            "usage" => Body::Usage {
                run_id: run_id?,
                input_tokens: self.input_tokens?,
                output_tokens: self.output_tokens?,
                cached_input_tokens: self.cached_input_tokens,
                cache_creation_input_tokens: self.cache_creation_input_tokens,
            },
            _ => return None,
        };
        Some(Record {
            session_id: self.session_id,
            ts: self.ts,
            cwd: self.cwd,
            body,
        })
    }
}
