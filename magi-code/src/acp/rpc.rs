//! JSON-RPC 2.0 as ACP frames it, sans IO: newline-delimited messages split from bytes under
//! a bound ([`Lines`]), each classified as a request, a notification, a response or an
//! invalid message ([`parse`]), and the lines the adapter writes ([`response_line`], [`error`],
//! [`request`], [`notification`]). Fuzzed (`fuzz_targets/acp_rpc.rs`).

use serde_json::{json, Map, Value};

/// Most bytes of one incoming line, its LF not counted: a prompt is at most 16 KiB, and an
/// editor's embedded context may be larger (it is refused whole, never cut).
pub const LINE_BYTES: usize = 4 << 20;

/// ACP's error codes (the JSON-RPC ones and the two of its own the adapter uses).
pub mod code {
    /// Not JSON.
    pub const PARSE: i64 = -32700;
    /// JSON, but not a JSON-RPC request or notification (or a second `initialize`).
    pub const INVALID_REQUEST: i64 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// The params do not fit the method.
    pub const INVALID_PARAMS: i64 = -32602;
    /// The backend failed; the message says why in words.
    pub const INTERNAL: i64 = -32603;
    /// No such session.
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
}

/// One incoming message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A call expecting an answer.
    Request {
        /// Its ID (a string or a number).
        id: Value,
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// A call expecting none.
    Notification {
        /// The method.
        method: String,
        /// The params (`null` when absent).
        params: Value,
    },
    /// An answer to a request the adapter sent.
    Response {
        /// The ID the adapter gave.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
    /// Not a message: answered with `code` under `id` (`null` when it could not be read).
    Invalid {
        /// The request's ID when it had a valid one.
        id: Value,
        /// [`code::PARSE`] or [`code::INVALID_REQUEST`].
        code: i64,
    },
}

/// An ID JSON-RPC allows: a string or an integer (`null` only in answers to the unreadable).
fn valid_id(v: &Value) -> bool {
    v.is_string() || v.is_i64() || v.is_u64()
}

/// Classifies one line (without its LF).
#[must_use]
pub fn parse(line: &[u8]) -> Incoming {
    let invalid = |id: Value| Incoming::Invalid {
        id,
        code: code::INVALID_REQUEST,
    };
    let Ok(Value::Object(m)) = serde_json::from_slice::<Value>(line) else {
        return match serde_json::from_slice::<Value>(line) {
            Ok(_) => invalid(Value::Null),
            Err(_) => Incoming::Invalid {
                id: Value::Null,
                code: code::PARSE,
            },
        };
    };
    let id = m.get("id").cloned();
    let id_ok = id.as_ref().is_none_or(valid_id);
    let shown_id = id.clone().filter(valid_id).unwrap_or(Value::Null);
    if m.get("jsonrpc") != Some(&json!("2.0")) || !id_ok {
        return invalid(shown_id);
    }
    let params = m.get("params").cloned().unwrap_or(Value::Null);
    if !matches!(params, Value::Null | Value::Object(_) | Value::Array(_)) {
        return invalid(shown_id);
    }
    match (m.get("method"), id) {
        (Some(Value::String(method)), Some(id)) => Incoming::Request {
            id,
            method: method.clone(),
            params,
        },
        (Some(Value::String(method)), None) => Incoming::Notification {
            method: method.clone(),
            params,
        },
        (None, Some(id)) => response(&m, id).unwrap_or_else(|| invalid(shown_id)),
        _ => invalid(shown_id),
    }
}

/// A response: exactly one of `result` and `error`.
fn response(m: &Map<String, Value>, id: Value) -> Option<Incoming> {
    let outcome = match (m.get("result"), m.get("error")) {
        (Some(r), None) => Ok(r.clone()),
        (None, Some(e @ Value::Object(_))) => Err(e.clone()),
        _ => return None,
    };
    Some(Incoming::Response { id, outcome })
}

/// A result line.
#[must_use]
pub fn response_line(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error line: `code` and a message in words (never echoing what came in).
#[must_use]
pub fn error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// A request line the adapter sends (`session/request_permission`).
#[must_use]
pub fn request(id: &str, method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A notification line (`session/update`).
#[must_use]
pub fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

/// What [`Lines::push`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece {
    /// One whole line, without its LF (and a CR before it).
    Line(Vec<u8>),
    /// A line over [`LINE_BYTES`], dropped through its LF.
    TooLong,
}

/// Splits bytes into LF-ended lines, holding at most [`LINE_BYTES`] of a partial one.
#[derive(Debug, Default)]
pub struct Lines {
    partial: Vec<u8>,
    /// Inside an over-long line: bytes are dropped until its LF.
    skipping: bool,
}

impl Lines {
    /// Feeds `bytes`; the lines (and over-long ones) they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut rest = bytes;
        while !rest.is_empty() {
            let (head, more) = match memchr::memchr(b'\n', rest) {
                Some(i) => (&rest[..i], Some(&rest[i + 1..])),
                None => (rest, None),
            };
            if !self.skipping {
                if self.partial.len() + head.len() > LINE_BYTES {
                    self.partial.clear();
                    self.skipping = true;
                } else {
                    self.partial.extend_from_slice(head);
                }
            }
            match more {
                Some(tail) => {
                    if std::mem::take(&mut self.skipping) {
                        out.push(Piece::TooLong);
                    } else {
                        let mut line = std::mem::take(&mut self.partial);
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                        out.push(Piece::Line(line));
                    }
                    rest = tail;
                }
                None => rest = &[],
            }
        }
        out
    }
}

/// Fuzz entry: any bytes through the line splitter (in two pieces, so a line spans pushes),
/// each line classified and each prompt read, without a panic.
pub fn fuzz(data: &[u8]) {
    let mut lines = Lines::default();
    let cut = data.first().map_or(0, |b| usize::from(*b)).min(data.len());
    let (a, b) = data.split_at(cut);
    for piece in lines.push(a).into_iter().chain(lines.push(b)) {
        let Piece::Line(l) = piece else { continue };
        if let Incoming::Request { params, .. } = parse(&l) {
            let _ = super::map::prompt_text(&params["prompt"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified() {
        let req = parse(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert_eq!(
            req,
            Incoming::Request {
                id: json!(1),
                method: "initialize".into(),
                params: json!({})
            }
        );
        let note =
            parse(br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#);
        assert!(matches!(note, Incoming::Notification { .. }));
        let ok =
            parse(br#"{"jsonrpc":"2.0","id":"p-1","result":{"outcome":{"outcome":"cancelled"}}}"#);
        assert!(matches!(ok, Incoming::Response { outcome: Ok(_), .. }));
        let bad = parse(br#"{"jsonrpc":"2.0","id":"p-1","error":{"code":-32603,"message":"x"}}"#);
        assert!(matches!(
            bad,
            Incoming::Response {
                outcome: Err(_),
                ..
            }
        ));
    }

    #[test]
    fn what_is_not_a_message_is_invalid_with_the_id_it_could_read() {
        let parse_error = Incoming::Invalid {
            id: Value::Null,
            code: code::PARSE,
        };
        assert_eq!(parse(b"{not json"), parse_error);
        assert_eq!(parse(b""), parse_error);
        let invalid = |id: Value| Incoming::Invalid {
            id,
            code: code::INVALID_REQUEST,
        };
        assert_eq!(parse(b"[1,2]"), invalid(Value::Null));
        assert_eq!(
            parse(br#"{"id":3,"method":"x"}"#),
            invalid(json!(3)),
            "no jsonrpc"
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"1.0","id":3,"method":"x"}"#),
            invalid(json!(3))
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#),
            invalid(Value::Null)
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":4,"method":7}"#),
            invalid(json!(4))
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":5,"method":"x","params":3}"#),
            invalid(json!(5))
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":6,"result":1,"error":{}}"#),
            invalid(json!(6))
        );
    }

    #[test]
    fn lines_are_split_and_bounded() {
        let mut l = Lines::default();
        assert_eq!(l.push(b"ab"), []);
        assert_eq!(
            l.push(b"c\r\nd\n"),
            [Piece::Line(b"abc".to_vec()), Piece::Line(b"d".to_vec())]
        );
        // The largest line passes; one byte more is dropped through its LF, and the next line
        // is whole.
        let edge = vec![b'x'; LINE_BYTES];
        assert_eq!(l.push(&edge), []);
        assert_eq!(l.push(b"\n"), [Piece::Line(edge.clone())]);
        assert_eq!(l.push(&edge), []);
        assert_eq!(l.push(b"y"), []);
        assert_eq!(
            l.push(b"zzz\nnext\n"),
            [Piece::TooLong, Piece::Line(b"next".to_vec())]
        );
    }
}
