//! Building request frames and checking output frames against the envelope the protocol
//! promises (fields, `seq` continuity, one `instance_id`, `{"code"}`-only errors).

use super::asserts::assert_keys;
use super::spec::{OUTPUT_FRAME_BYTES, PROTOCOL};
use magi_code::client::pipe::{request, typed_request};
use magi_code::wire::Call;
use serde_json::{json, Value};

/// A request frame (without LF), built by the crate's typed client whenever `method` and
/// `params` are a valid call ([`magi_code::wire::Call`]), so the tests send what a typed
/// client sends; a deliberately wrong call is built as the raw frame.
#[must_use]
pub fn frame(id: &str, method: &str, params: &Value) -> String {
    let call = serde_json::from_value::<Call>(json!({"method": method, "params": params}));
    match call {
        Ok(call) if same_params(&call, params) => typed_request(id, &call),
        _ => request(id, method, params),
    }
}

/// Whether `call` serializes back to exactly `params` (so an explicit `null` or a
/// duplicate-free spelling the test chose is kept byte for byte in meaning).
fn same_params(call: &Call, params: &Value) -> bool {
    serde_json::to_value(call).is_ok_and(|v| &v["params"] == params)
}

/// A `status` request frame padded with spaces inside the JSON to exactly `len` bytes
/// (excluding any line terminator).
#[must_use]
pub fn padded_status(id: &str, len: usize) -> String {
    let head = format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":{},"method":"status","params":{{}}"#,
        Value::from(id)
    );
    assert!(head.len() < len, "padding target too small");
    let mut s = head;
    s.push_str(&" ".repeat(len - s.len() - 1));
    s.push('}');
    assert_eq!(s.len(), len);
    s
}

/// The `initialize` params requiring `caps`.
#[must_use]
pub fn init_params(caps: &[&str]) -> Value {
    json!({ "required_capabilities": caps })
}

/// The result of a response frame; panics on an error response.
#[track_caller]
pub fn result(frame: &Value) -> &Value {
    match frame.get("result") {
        Some(r) => r,
        None => panic!("expected a result, got {frame}"),
    }
}

/// The error code of a response frame; panics on a result.
#[track_caller]
pub fn error_code(frame: &Value) -> &str {
    match frame
        .get("error")
        .and_then(|e| e.get("code"))
        .and_then(Value::as_str)
    {
        Some(c) => c,
        None => panic!("expected an error, got {frame}"),
    }
}

fn is_uuid(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// Checks one output line (with its LF) against the envelope rules and returns the frame.
/// `last_seq` is the last `seq` seen from this child and `instance_id` its `instance_id` so far;
/// both are updated.
#[track_caller]
pub fn check_envelope(line: &[u8], last_seq: &mut u64, instance_id: &mut Option<String>) -> Value {
    let shown = String::from_utf8_lossy(line);
    assert!(
        line.ends_with(b"\n"),
        "partial output line (no LF): {shown:?}"
    );
    assert!(
        line.len() <= OUTPUT_FRAME_BYTES,
        "output frame of {} bytes",
        line.len()
    );
    let text = std::str::from_utf8(&line[..line.len() - 1])
        .unwrap_or_else(|_| panic!("output frame is not UTF-8: {shown:?}"));
    let v: Value = serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("output frame is not JSON ({e}): {shown:?}"));
    assert!(v.is_object(), "output frame is not an object: {v}");
    assert_eq!(v["protocol"], PROTOCOL, "{v}");
    assert!(
        v["version"].is_u64() && v["version"] == 1,
        "version must be the integer 1: {v}"
    );
    let iid = v["instance_id"]
        .as_str()
        .unwrap_or_else(|| panic!("instance_id missing: {v}"));
    assert!(is_uuid(iid), "instance_id is not a UUID: {v}");
    match &*instance_id {
        Some(prev) => assert_eq!(prev, iid, "instance_id changed within one child"),
        None => *instance_id = Some(iid.to_owned()),
    }
    let seq = v["seq"]
        .as_u64()
        .unwrap_or_else(|| panic!("seq must be an integer: {v}"));
    assert_eq!(
        seq,
        *last_seq + 1,
        "seq must start at 1 and increase by exactly 1: {v}"
    );
    *last_seq = seq;
    match v["type"].as_str() {
        Some("response") => {
            let has_result = v.get("result").is_some();
            let has_error = v.get("error").is_some();
            assert!(has_result != has_error, "exactly one of result/error: {v}");
            let last = if has_result { "result" } else { "error" };
            assert_keys(
                &v,
                &[
                    "protocol",
                    "version",
                    "type",
                    "instance_id",
                    "seq",
                    "id",
                    last,
                ],
            );
            assert!(
                v["id"].is_null() || v["id"].is_string(),
                "id must be a string or null: {v}"
            );
            if has_error {
                assert_keys(&v["error"], &["code"]);
                assert!(v["error"]["code"].is_string(), "{v}");
            }
        }
        Some("event") => {
            assert_keys(
                &v,
                &[
                    "protocol",
                    "version",
                    "type",
                    "instance_id",
                    "seq",
                    "event",
                    "data",
                ],
            );
        }
        _ => panic!("unknown frame type: {v}"),
    }
    v
}
