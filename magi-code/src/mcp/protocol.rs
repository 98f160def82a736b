//! The MCP messages the client sends and how it reads their answers: `initialize`,
//! `tools/list` pages, `tools/call` results and `notifications/cancelled`.

use serde_json::{json, Value};

/// The protocol revision the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Revisions accepted in a server's `initialize` answer.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
/// Most tools kept from one server; `tools/list` paging stops there.
pub const MAX_TOOLS: usize = 1000;
/// Most `tools/list` pages followed (a server that pages forever is failed).
pub const MAX_PAGES: usize = 100;
/// Longest tool description kept (bytes); longer ones are cut.
pub const DESCRIPTION_BYTES: usize = 4096;

/// A server's answer or exchange could not be used (its detail is never shown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// One tool a server lists.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The server's name for it.
    pub name: String,
    /// Its description (possibly empty).
    pub description: String,
    /// Its `inputSchema` (an object).
    pub input_schema: Value,
}

/// What one `tools/call` gave the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpResult {
    /// False for `isError: true` and for calls that did not complete.
    pub ok: bool,
    /// The joined text content (other kinds as one-line markers), or why it failed.
    pub text: String,
}

/// The `initialize` request's params.
#[must_use]
pub fn initialize_params() -> Value {
    json!({
        "protocolVersion": PROTOCOL_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "magi-code", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// The negotiated revision of an `initialize` answer, None when the client does not speak it.
#[must_use]
pub fn accepted_version(result: &Value) -> Option<&'static str> {
    let v = result.get("protocolVersion")?.as_str()?;
    SUPPORTED_VERSIONS.iter().copied().find(|s| *s == v)
}

/// The `tools/list` params for a page (`cursor` from the previous page's `nextCursor`).
#[must_use]
pub fn list_params(cursor: Option<&str>) -> Value {
    match cursor {
        Some(c) => json!({ "cursor": c }),
        None => json!({}),
    }
}

/// One `tools/list` page: its tools (entries without a string name are skipped) and the
/// cursor of the next page. Err when the answer has no `tools` array.
pub fn parse_tools_page(result: &Value) -> Result<(Vec<RemoteTool>, Option<String>), Malformed> {
    let tools = result
        .get("tools")
        .and_then(Value::as_array)
        .ok_or(Malformed)?;
    let parsed = tools
        .iter()
        .filter_map(|t| {
            let name = t.get("name")?.as_str()?.to_owned();
            let description = t.get("description").and_then(Value::as_str).unwrap_or("");
            let description = crate::util::text::bounded(description, DESCRIPTION_BYTES);
            let input_schema = match t.get("inputSchema") {
                Some(s @ Value::Object(_)) => s.clone(),
                _ => json!({"type": "object"}),
            };
            Some(RemoteTool {
                name,
                description,
                input_schema,
            })
        })
        .collect();
    let next = result
        .get("nextCursor")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok((parsed, next))
}

/// The `tools/call` params.
#[must_use]
pub fn call_params(tool: &str, arguments: &Value) -> Value {
    json!({ "name": tool, "arguments": arguments })
}

/// The `notifications/cancelled` params for request `id`.
#[must_use]
pub fn cancelled_params(id: u64, reason: &str) -> Value {
    json!({ "requestId": id, "reason": reason })
}

/// Reads a `tools/call` result: text blocks joined by newlines, other kinds as a marker line,
/// `isError: true` → not ok.
#[must_use]
pub fn call_result(result: &Value) -> McpResult {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let Some(blocks) = result.get("content").and_then(Value::as_array) else {
        return McpResult {
            ok: false,
            text: "invalid tools/call result: no content".into(),
        };
    };
    let parts: Vec<String> = blocks
        .iter()
        .map(|b| match b.get("type").and_then(Value::as_str) {
            Some("text") => b
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            Some(kind) => format!("[{} content omitted]", marker_kind(kind)),
            None => "[content omitted]".to_owned(),
        })
        .collect();
    McpResult {
        ok: !is_error,
        text: parts.join("\n"),
    }
}

/// A content kind as shown in a marker: known kinds by name, anything else as "other" so a
/// server cannot put arbitrary text in the marker.
fn marker_kind(kind: &str) -> &'static str {
    match kind {
        "image" => "image",
        "audio" => "audio",
        "resource" => "resource",
        "resource_link" => "resource_link",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_asks_for_2025_06_18_and_accepts_the_three_known_revisions() {
        let p = initialize_params();
        assert_eq!(p["protocolVersion"], "2025-06-18");
        assert_eq!(p["capabilities"], json!({}));
        assert_eq!(p["clientInfo"]["name"], "magi-code");
        for v in SUPPORTED_VERSIONS {
            assert_eq!(accepted_version(&json!({ "protocolVersion": v })), Some(v));
        }
        assert_eq!(
            accepted_version(&json!({"protocolVersion": "2099-01-01"})),
            None
        );
        assert_eq!(accepted_version(&json!({"protocolVersion": 5})), None);
        assert_eq!(accepted_version(&json!({})), None);
    }

    #[test]
    fn a_tools_page_keeps_named_tools_and_its_cursor() {
        let page = json!({"tools": [
            {"name": "read", "description": "Reads", "inputSchema": {"type": "object", "properties": {}}},
            {"name": "bare"},
            {"description": "no name"},
        ], "nextCursor": "c2"});
        let (tools, next) = parse_tools_page(&page).unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!(tools[0].description, "Reads");
        assert_eq!(tools[1].input_schema, json!({"type": "object"}));
        assert_eq!(next.as_deref(), Some("c2"));
        assert!(parse_tools_page(&json!({"nope": []})).is_err());
        assert_eq!(list_params(Some("c2")), json!({"cursor": "c2"}));
        assert_eq!(list_params(None), json!({}));
    }

    #[test]
    fn call_results_join_text_and_mark_other_content() {
        let r = call_result(&json!({"content": [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "…", "mimeType": "image/png"},
            {"type": "weird\nkind"},
            {"type": "text", "text": "b"},
        ]}));
        assert_eq!(
            r,
            McpResult {
                ok: true,
                text: "a\n[image content omitted]\n[other content omitted]\nb".into()
            }
        );
        let e =
            call_result(&json!({"content": [{"type": "text", "text": "denied"}], "isError": true}));
        assert!(!e.ok);
        assert_eq!(e.text, "denied");
        assert!(!call_result(&json!({})).ok);
        assert_eq!(
            cancelled_params(4, "cancelled"),
            json!({"requestId": 4, "reason": "cancelled"})
        );
        assert_eq!(
            call_params("t", &json!({"a": 1})),
            json!({"name": "t", "arguments": {"a": 1}})
        );
    }
}
