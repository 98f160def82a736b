//! The Claude Code CLI's `stream-json` lines, sans-IO (`backend.md` "Claude through the native
//! CLI"): what one line of its stdout says ([`FromCli`], read by [`parse_line`]) and the lines
//! the backend writes to its stdin (the `initialize` control request declaring the `magi` SDK
//! MCP server, a user message, `interrupt`, answers to its control requests). No process here:
//! the session that runs the CLI feeds lines in and writes these out.
//!
//! Read from the real CLI 2.1.332 (`fixtures/claude_cli/tool_turn.jsonl`): the `magi` server's
//! `initialize`, `notifications/initialized`, `tools/list` and `tools/call` come as
//! `control_request` `mcp_message`s (a call's `params._meta["claudecode/toolUseId"]` is the
//! model's `tool_use` ID), a step's Messages API events as `stream_event`s, each finished
//! message as `assistant` (and the tool results the CLI sent back as `user`), and the turn's
//! end as `result`.

use serde_json::{json, Map, Value};

/// Longest line read from the CLI (an `assistant` message carries whole tool inputs).
pub const LINE_BYTES: usize = 8 << 20;
/// The SDK MCP server the backend's tools are served as.
pub const SERVER: &str = "magi";

/// What one line of the CLI's stdout says.
#[derive(Debug, Clone, PartialEq)]
pub enum FromCli {
    /// A message for the `magi` server (a JSON-RPC request or notification), to answer with
    /// [`mcp_response`] when it has an `id`.
    McpMessage {
        /// The control request to answer.
        request_id: String,
        /// The JSON-RPC message.
        message: Value,
    },
    /// A permission request for a tool outside `magi`: always denied ([`deny`]).
    CanUseTool {
        /// The control request to answer.
        request_id: String,
    },
    /// Another control request (or one for another server): answered with an error.
    Unsupported {
        /// The control request to answer.
        request_id: String,
    },
    /// The answer to one of the backend's control requests.
    ControlResponse {
        /// The backend's request.
        request_id: String,
        /// Whether it succeeded.
        ok: bool,
    },
    /// One Messages API stream event of the current step (`message_start`, `content_block_*`,
    /// `message_delta`, `message_stop`), as the Anthropic wire sends it.
    Stream(Value),
    /// A finished assistant message: its content blocks, and whether it is the provider's
    /// error shown as a message (never shown to the client).
    Assistant {
        /// Its content blocks.
        content: Vec<Value>,
        /// `is_api_error_message: true`.
        api_error: bool,
    },
    /// A `system` line: `init`, `status`, `api_retry`, `compact_boundary`, ...
    System {
        /// Its subtype.
        subtype: String,
        /// The whole line.
        line: Value,
    },
    /// The turn's end.
    Result(TurnResult),
    /// Anything else (`user` echoes of tool results, `rate_limit_event`, newer types).
    Other,
}

/// How a turn ended, as the CLI's `result` line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnResult {
    /// `is_error`.
    pub is_error: bool,
    /// `subtype` (`success`, `error_during_execution`, ...).
    pub subtype: String,
    /// `api_error_status`: the provider's HTTP status behind an error, if any.
    pub api_error_status: Option<u16>,
    /// `usage.input_tokens` and `usage.output_tokens` over the turn's steps.
    pub usage: Option<(u64, u64)>,
}

/// Why a line is not one the CLI writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Over [`LINE_BYTES`].
    TooLong,
    /// Not a JSON object with a string `type`.
    NotJson,
}

/// What one line (without its LF) says.
///
/// # Errors
/// A line that is too long, or not a JSON object with a `type`.
pub fn parse_line(line: &[u8]) -> Result<FromCli, Malformed> {
    if line.len() > LINE_BYTES {
        return Err(Malformed::TooLong);
    }
    let v: Value = serde_json::from_slice(line).map_err(|_| Malformed::NotJson)?;
    let o = v.as_object().ok_or(Malformed::NotJson)?;
    let kind = o
        .get("type")
        .and_then(Value::as_str)
        .ok_or(Malformed::NotJson)?;
    let s = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_str).map(str::to_owned);
    Ok(match kind {
        "control_request" => {
            let request_id = s(o, "request_id").ok_or(Malformed::NotJson)?;
            let request = o.get("request").and_then(Value::as_object);
            let subtype = request.and_then(|r| s(r, "subtype")).unwrap_or_default();
            let server = request.and_then(|r| s(r, "server_name"));
            let message = request
                .and_then(|r| r.get("message"))
                .filter(|m| m.is_object());
            match (subtype.as_str(), server.as_deref(), message) {
                ("mcp_message", Some(SERVER), Some(m)) => FromCli::McpMessage {
                    request_id,
                    message: m.clone(),
                },
                ("can_use_tool", _, _) => FromCli::CanUseTool { request_id },
                _ => FromCli::Unsupported { request_id },
            }
        }
        "control_response" => {
            let r = o.get("response").and_then(Value::as_object);
            FromCli::ControlResponse {
                request_id: r.and_then(|r| s(r, "request_id")).unwrap_or_default(),
                ok: r.and_then(|r| s(r, "subtype")).as_deref() == Some("success"),
            }
        }
        "stream_event" => match o.get("event") {
            Some(e) if e.is_object() => FromCli::Stream(e.clone()),
            _ => FromCli::Other,
        },
        "assistant" => {
            let content = o
                .get("message")
                .and_then(|m| m.get("content"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let api_error = o.get("is_api_error_message").and_then(Value::as_bool) == Some(true);
            FromCli::Assistant { content, api_error }
        }
        "system" => FromCli::System {
            subtype: s(o, "subtype").unwrap_or_default(),
            line: v.clone(),
        },
        "result" => {
            let usage = o.get("usage").and_then(|u| {
                let n = |k: &str| u.get(k).and_then(Value::as_u64);
                Some((n("input_tokens")?, n("output_tokens")?))
            });
            FromCli::Result(TurnResult {
                is_error: o.get("is_error").and_then(Value::as_bool).unwrap_or(true),
                subtype: s(o, "subtype").unwrap_or_default(),
                api_error_status: o
                    .get("api_error_status")
                    .and_then(Value::as_u64)
                    .and_then(|n| u16::try_from(n).ok()),
                usage,
            })
        }
        _ => FromCli::Other,
    })
}

/// One line for the CLI's stdin (LF included).
fn line(v: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(v).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

/// The `initialize` control request `id`, declaring the `magi` SDK MCP server.
#[must_use]
pub fn initialize(id: &str) -> Vec<u8> {
    line(&json!({"type": "control_request", "request_id": id,
        "request": {"subtype": "initialize", "sdkMcpServers": [SERVER]}}))
}

/// The `interrupt` control request `id`: ends the running turn (its `result` follows).
#[must_use]
pub fn interrupt(id: &str) -> Vec<u8> {
    line(&json!({"type": "control_request", "request_id": id,
        "request": {"subtype": "interrupt"}}))
}

/// A user message: one turn's input.
#[must_use]
pub fn user_message(text: &str) -> Vec<u8> {
    line(&json!({"type": "user", "message": {"role": "user", "content": text}}))
}

/// The answer to an `mcp_message` control request: the JSON-RPC `response`.
#[must_use]
pub fn mcp_response(request_id: &str, response: &Value) -> Vec<u8> {
    line(
        &json!({"type": "control_response", "response": {"subtype": "success",
        "request_id": request_id, "response": {"mcp_response": response}}}),
    )
}

/// The answer to a `can_use_tool` control request: always deny.
#[must_use]
pub fn deny(request_id: &str) -> Vec<u8> {
    line(
        &json!({"type": "control_response", "response": {"subtype": "success",
        "request_id": request_id, "response": {"behavior": "deny",
        "message": "only the magi tools may be used"}}}),
    )
}

/// The answer to a control request the backend does not serve.
#[must_use]
pub fn unsupported(request_id: &str) -> Vec<u8> {
    line(
        &json!({"type": "control_response", "response": {"subtype": "error",
        "request_id": request_id, "error": "unsupported"}}),
    )
}

/// The model's `tool_use` ID of a `tools/call` message, as the CLI passes it.
#[must_use]
pub fn tool_use_id(message: &Value) -> Option<&str> {
    message
        .get("params")?
        .get("_meta")?
        .get("claudecode/toolUseId")?
        .as_str()
}

/// Fuzz entry: any bytes, split at LFs, parse without a panic.
pub fn fuzz(data: &[u8]) {
    for l in data.split(|b| *b == b'\n') {
        if let Ok(FromCli::McpMessage { message, .. }) = parse_line(l) {
            let _ = tool_use_id(&message);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines the real CLI 2.1.332 wrote for a turn with one `magi` tool call.
    const TOOL_TURN: &str = include_str!("fixtures/claude_cli/tool_turn.jsonl");

    #[test]
    fn a_real_tool_turn_reads_as_its_parts() {
        let lines: Vec<FromCli> = TOOL_TURN
            .lines()
            .map(|l| parse_line(l.as_bytes()).unwrap())
            .collect();
        let methods: Vec<&str> = lines
            .iter()
            .filter_map(|l| match l {
                FromCli::McpMessage { message, .. } => message["method"].as_str(),
                _ => None,
            })
            .collect();
        assert_eq!(
            methods,
            [
                "initialize",
                "notifications/initialized",
                "tools/list",
                "tools/call"
            ]
        );
        let call = lines
            .iter()
            .find_map(|l| match l {
                FromCli::McpMessage { message, .. } if message["method"] == "tools/call" => {
                    Some(message)
                }
                _ => None,
            })
            .unwrap();
        assert_eq!(tool_use_id(call), Some("toolu_01"));
        assert_eq!(call["params"]["name"], "read_file");
        let streamed = lines
            .iter()
            .filter(|l| matches!(l, FromCli::Stream(_)))
            .count();
        assert!(streamed >= 10, "{streamed}");
        assert!(lines.iter().any(|l| matches!(
            l,
            FromCli::Assistant {
                api_error: false,
                ..
            }
        )));
        assert!(lines
            .iter()
            .any(|l| matches!(l, FromCli::System { subtype, .. } if subtype == "init")));
        let FromCli::Result(r) = lines.last().unwrap() else {
            panic!("the turn ends with its result");
        };
        assert_eq!(
            (r.is_error, r.subtype.as_str(), r.api_error_status),
            (false, "success", None)
        );
        assert!(r.usage.is_some());
    }

    #[test]
    fn lines_the_cli_does_not_write_are_malformed_at_their_bound() {
        assert_eq!(parse_line(b"not json"), Err(Malformed::NotJson));
        assert_eq!(parse_line(b"[1]"), Err(Malformed::NotJson));
        assert_eq!(parse_line(b"{\"no\":\"type\"}"), Err(Malformed::NotJson));
        let pad = |n: usize| format!("{{\"type\":\"other\",\"p\":\"{}\"}}", "x".repeat(n));
        let at = pad(LINE_BYTES - 23);
        assert_eq!(at.len(), LINE_BYTES);
        assert_eq!(parse_line(at.as_bytes()), Ok(FromCli::Other));
        let over = pad(LINE_BYTES - 22);
        assert_eq!(parse_line(over.as_bytes()), Err(Malformed::TooLong));
        let other_server = br#"{"type":"control_request","request_id":"r","request":{"subtype":"mcp_message","server_name":"x","message":{}}}"#;
        assert_eq!(
            parse_line(other_server),
            Ok(FromCli::Unsupported {
                request_id: "r".into()
            })
        );
        let ask = br#"{"type":"control_request","request_id":"q","request":{"subtype":"can_use_tool","tool_name":"Bash"}}"#;
        assert_eq!(
            parse_line(ask),
            Ok(FromCli::CanUseTool {
                request_id: "q".into()
            })
        );
        fuzz(b"{\n\xff\n{\"type\":\"result\",\"api_error_status\":70000}\n");
    }

    #[test]
    fn the_lines_written_to_the_cli_are_one_json_object_each() {
        for bytes in [
            initialize("i"),
            interrupt("x"),
            user_message("hi\nthere"),
            mcp_response("r", &json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            deny("q"),
            unsupported("u"),
        ] {
            assert_eq!(bytes.iter().filter(|b| **b == b'\n').count(), 1);
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            assert!(v["type"].is_string());
        }
        let init: Value = serde_json::from_slice(&initialize("i")).unwrap();
        assert_eq!(init["request"]["sdkMcpServers"], json!(["magi"]));
    }
}
