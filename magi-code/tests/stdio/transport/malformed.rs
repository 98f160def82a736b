//! Malformed frames sent to the real `serve --stdio` child: each gets the error code and `id`
//! the protocol specifies, and error objects never echo the input
//! (local-agent-protocol.md "Frames, correlation and compatibility").

use super::status;
use crate::common::{assert_error, error_code, result, Env, PROTOCOL};
use serde_json::json;

#[test]
fn empty_line_is_invalid_frame_with_null_id() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send_raw("\n");
    let f = s.next();
    assert_error(&f, None, "invalid_frame");
    // Nonfatal: the connection stays usable.
    let f = s.call("after", "status", &json!({}));
    assert_error(&f, Some("after"), "not_initialized");
    s.shutdown_ok("bye");
}

#[test]
fn invalid_utf8_is_invalid_request_with_null_id() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    let mut line = format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":"u1","method":"status","params":{{"x":""#
    )
    .into_bytes();
    line.extend_from_slice(b"\xff\xfe\"}}\n");
    s.send_raw(line);
    let f = s.next();
    assert_error(&f, None, "invalid_request");
    let f = s.call("after", "status", &json!({}));
    result(&f);
    s.shutdown_ok("bye");
}

#[test]
fn duplicate_id_member_is_invalid_request_with_null_id() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    s.send_line(&format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":"a","id":"b","method":"status","params":{{}}}}"#
    ));
    let f = s.next();
    assert_error(&f, None, "invalid_request");
    // Neither "a" nor "b" was retained: both are still fresh.
    let f = s.call("a", "status", &json!({}));
    result(&f);
    let f = s.call("b", "status", &json!({}));
    result(&f);
    s.shutdown_ok("bye");
}

#[test]
fn unknown_method_is_unsupported_method_with_echoed_id() {
    let env = Env::new();
    let mut s = env.spawn();
    let f = s.call("m1", "session.teleport", &json!({}));
    assert_error(&f, Some("m1"), "unsupported_method");
    s.initialize();
    let f = s.call("m2", "session.teleport", &json!({}));
    assert_error(&f, Some("m2"), "unsupported_method");
    s.shutdown_ok("bye");
}

#[test]
fn non_negotiated_extension_operations_are_unsupported_capability() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    let calls = [
        ("x1", "session.discover", json!({})),
        ("x2", "model.catalog.status", json!({})),
        ("x3", "model.refresh", json!({"provider": "scripted"})),
        ("x4", "operation.cancel", json!({"request_id": "init"})),
    ];
    for (id, method, params) in &calls {
        let f = s.call(id, method, params);
        assert_error(&f, Some(id), "unsupported_capability");
    }
    s.shutdown_ok("bye");
}

/// `k` nested empty arrays (placed inside `params`, which is itself at depth 2).
fn nested_arrays(k: usize) -> String {
    "[".repeat(k) + &"]".repeat(k)
}

#[test]
fn malformed_frames_get_the_specified_codes_and_ids() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    let p = PROTOCOL;
    let long_id = "i".repeat(65);
    let cases: Vec<(String, Option<&str>, &str)> = vec![
        ("not json".into(), None, "invalid_request"),
        (r#"{"protocol":"#.into(), None, "invalid_request"),
        ("[1,2]".into(), None, "invalid_request"),
        (r#""status""#.into(), None, "invalid_request"),
        ("42".into(), None, "invalid_request"),
        (
            format!(r#"{{"protocol":"{p}","version":1,"method":"status","params":{{}}}}"#),
            None,
            "invalid_request",
        ),
        (
            format!(r#"{{"protocol":"{p}","version":1,"id":5,"method":"status","params":{{}}}}"#),
            None,
            "invalid_request",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"a b","method":"status","params":{{}}}}"#
            ),
            None,
            "invalid_request",
        ),
        (
            format!(r#"{{"protocol":"{p}","version":1,"id":"","method":"status","params":{{}}}}"#),
            None,
            "invalid_request",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"{long_id}","method":"status","params":{{}}}}"#
            ),
            None,
            "invalid_request",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f1","method":"status","params":{{}},"extra":1}}"#
            ),
            Some("f1"),
            "invalid_request",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f2","method":"status","method":"status","params":{{}}}}"#
            ),
            Some("f2"),
            "invalid_request",
        ),
        (
            format!(r#"{{"protocol":"{p}","version":1,"id":"f3","method":"status"}}"#),
            Some("f3"),
            "invalid_request",
        ),
        (
            format!(r#"{{"protocol":"{p}","version":1,"id":"f4","method":5,"params":{{}}}}"#),
            Some("f4"),
            "invalid_request",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f5","method":"sta tus","params":{{}}}}"#
            ),
            Some("f5"),
            "invalid_request",
        ),
        (
            format!(r#"{{"protocol":"{p}","version":1,"id":"f6","method":"status","params":[]}}"#),
            Some("f6"),
            "invalid_params",
        ),
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f7","method":"status","params":{{"a":1}}}}"#
            ),
            Some("f7"),
            "invalid_params",
        ),
        // Depth 32 passes the depth check (then params are not an object).
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f8","method":"status","params":[{}]}}"#,
                nested_arrays(30)
            ),
            Some("f8"),
            "invalid_params",
        ),
        // Depth 33 is a framing fault with id null.
        (
            format!(
                r#"{{"protocol":"{p}","version":1,"id":"f9","method":"status","params":[{}]}}"#,
                nested_arrays(31)
            ),
            None,
            "invalid_frame",
        ),
    ];
    for (i, (line, id, code)) in cases.iter().enumerate() {
        s.send_line(line);
        let f = s.next();
        assert_eq!(error_code(&f), *code, "case {i}: {line:.120} answered {f}");
        match id {
            Some(id) => assert_eq!(f["id"], *id, "case {i}: {line:.120} answered {f}"),
            None => assert!(f["id"].is_null(), "case {i}: {line:.120} answered {f}"),
        }
    }
    // CRLF framing of a valid request is fine.
    s.send_raw(format!("{}\r\n", status("crlf")));
    let f = s.response("crlf");
    result(&f);
    s.shutdown_ok("bye");
}

#[test]
fn error_objects_never_echo_input() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    let marker = "SECRET-MARKER-12345";
    s.send_line(&format!(
        r#"{{"protocol":"{PROTOCOL}","version":1,"id":"e1","method":"status","params":{{"{marker}":"{marker}"}}}}"#
    ));
    let f = s.response("e1");
    assert_eq!(f["error"], json!({"code": "invalid_params"}));
    assert!(!f.to_string().contains(marker));
    s.send_line(&format!("{{\"{marker}\": oops"));
    let f = s.next();
    assert_eq!(f["error"], json!({"code": "invalid_request"}));
    assert!(!f.to_string().contains(marker));
    s.shutdown_ok("bye");
}
