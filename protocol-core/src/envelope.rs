//! The request envelope: everything about a line up to (not including) the ledger step.
//!
//! Precedence (`decisions.md` 5): size (framing) → UTF-8 → depth → JSON syntax → object shape
//! and `id` → `protocol`/`version` → unknown/duplicate/missing top-level fields and `method`
//! grammar. The engine continues with the ledger, method, state, capability and params.

use crate::error::ErrorCode;
use crate::ids::{is_id_grammar, RequestId};
use crate::json::{depth_exceeds, parse_top_level, StrictError, TopLevel};
use crate::limits::JSON_DEPTH;
use serde_json::Value;

/// The protocol name every frame carries.
pub const PROTOCOL: &str = "magi-code.local-agent";
/// The protocol version this backend serves.
pub const VERSION: u64 = 1;

/// A request whose envelope is valid.
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// The request ID (grammar checked).
    pub id: RequestId,
    /// The method name (grammar checked, maybe unknown).
    pub method: String,
    /// The params value (any JSON value; the method checks it).
    pub params: Value,
    /// Whether a duplicate key was seen below the top level (inside `params`).
    pub nested_duplicates: bool,
}

/// A line rejected before the ledger step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    /// The code to answer with.
    pub code: ErrorCode,
    /// The ID to echo, when the identity was recoverable (`decisions.md` 4).
    pub id: Option<RequestId>,
}

fn reject(code: ErrorCode, id: Option<&RequestId>) -> Reject {
    Reject {
        code,
        id: id.cloned(),
    }
}

/// Whether a line holds nothing but JSON white space: an empty line (`decisions.md` 3).
#[must_use]
pub fn is_empty_line(line: &[u8]) -> bool {
    line.iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
}

/// Parses one complete line (LF excluded) into an [`Envelope`].
pub fn parse(line: &[u8]) -> Result<Envelope, Reject> {
    if is_empty_line(line) {
        return Err(reject(ErrorCode::InvalidFrame, None));
    }
    if std::str::from_utf8(line).is_err() {
        return Err(reject(ErrorCode::InvalidRequest, None));
    }
    if depth_exceeds(line, JSON_DEPTH) {
        return Err(reject(ErrorCode::InvalidFrame, None));
    }
    let (mut fields, duplicated, unknown, nested_duplicates) = match parse_top_level(line) {
        Ok(TopLevel::Object {
            fields,
            duplicated,
            unknown,
            nested_duplicates,
        }) => (fields, duplicated, unknown, nested_duplicates),
        Ok(TopLevel::NotObject) => return Err(reject(ErrorCode::InvalidRequest, None)),
        Err(StrictError::Depth) => return Err(reject(ErrorCode::InvalidFrame, None)),
        Err(StrictError::Syntax) => return Err(reject(ErrorCode::InvalidRequest, None)),
    };
    let [protocol, version, id, method, params] = &mut fields;
    let id = if duplicated & (1 << 2) != 0 {
        None
    } else {
        id.as_ref().and_then(Value::as_str).and_then(RequestId::new)
    };
    let Some(id) = id else {
        return Err(reject(ErrorCode::InvalidRequest, None));
    };
    let protocol_ok = protocol
        .as_ref()
        .is_none_or(|p| p.as_str() == Some(PROTOCOL));
    let version_ok = version
        .as_ref()
        .is_none_or(|v| v.as_u64() == Some(VERSION) && v.is_u64());
    if !protocol_ok || !version_ok {
        return Err(reject(ErrorCode::ProtocolMismatch, Some(&id)));
    }
    let shape_ok =
        duplicated == 0 && !unknown && protocol.is_some() && version.is_some() && params.is_some();
    let method = match method.as_ref().and_then(Value::as_str) {
        Some(m) if shape_ok && is_id_grammar(m) => m.to_owned(),
        _ => return Err(reject(ErrorCode::InvalidRequest, Some(&id))),
    };
    let params = params.take().unwrap_or(Value::Null);
    Ok(Envelope {
        id,
        method,
        params,
        nested_duplicates,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(line: &str) -> (ErrorCode, Option<String>) {
        let r = parse(line.as_bytes()).unwrap_err();
        (r.code, r.id.map(|i| i.as_str().to_owned()))
    }

    #[test]
    fn valid() {
        let e = parse(br#"{"protocol":"magi-code.local-agent","version":1,"id":"r1","method":"status","params":{}}"#).unwrap();
        assert_eq!(e.id.as_str(), "r1");
        assert_eq!(e.method, "status");
    }

    #[test]
    fn identity_rules() {
        assert_eq!(code(""), (ErrorCode::InvalidFrame, None));
        assert_eq!(code("\r"), (ErrorCode::InvalidFrame, None));
        assert_eq!(code("[1]"), (ErrorCode::InvalidRequest, None));
        assert_eq!(code("{"), (ErrorCode::InvalidRequest, None));
        assert_eq!(
            code(r#"{"id":"a","id":"b"}"#),
            (ErrorCode::InvalidRequest, None)
        );
        assert_eq!(
            code(r#"{"id":"a b","method":"status"}"#),
            (ErrorCode::InvalidRequest, None)
        );
        assert_eq!(code(r#"{"id":7}"#), (ErrorCode::InvalidRequest, None));
        assert_eq!(
            code(r#"{"protocol":"x","version":1,"id":"a","method":"status","params":{}}"#),
            (ErrorCode::ProtocolMismatch, Some("a".into()))
        );
        assert_eq!(
            code(
                r#"{"protocol":"magi-code.local-agent","version":1.0,"id":"a","method":"status","params":{}}"#
            ),
            (ErrorCode::ProtocolMismatch, Some("a".into()))
        );
        assert_eq!(
            code(
                r#"{"protocol":"magi-code.local-agent","version":1,"id":"a","method":"status","params":{},"x":1}"#
            ),
            (ErrorCode::InvalidRequest, Some("a".into()))
        );
        assert_eq!(
            code(
                r#"{"protocol":"magi-code.local-agent","version":1,"id":"a","method":"status","\u006dethod":"status","params":{}}"#
            ),
            (ErrorCode::InvalidRequest, Some("a".into()))
        );
        assert_eq!(
            code(
                r#"{"protocol":"magi-code.local-agent","version":1,"id":"a","method":"a b","params":{}}"#
            ),
            (ErrorCode::InvalidRequest, Some("a".into()))
        );
        assert_eq!(
            code(r#"{"protocol":"magi-code.local-agent","version":1,"id":"a","method":"status"}"#),
            (ErrorCode::InvalidRequest, Some("a".into()))
        );
    }

    #[test]
    fn invalid_utf8_wins_over_depth() {
        let mut line = vec![b'['; 40];
        line.push(0xff);
        assert_eq!(parse(&line).unwrap_err().code, ErrorCode::InvalidRequest);
        let line = "[".repeat(40);
        assert_eq!(
            parse(line.as_bytes()).unwrap_err().code,
            ErrorCode::InvalidFrame
        );
    }
}
