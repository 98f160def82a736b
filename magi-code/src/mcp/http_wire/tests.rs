use super::*;
use crate::mcp::jsonrpc::{GARBAGE_LINES, LINE_BYTES};
use serde_json::json;

fn session_with_request() -> (Session, u64) {
    let mut s = Session::new();
    let id = s.send_request("tools/list", json!({}), None).unwrap();
    while s.poll_write().is_some() {}
    (s, id)
}

#[test]
fn statuses_revisions_session_ids_and_headers() {
    assert_eq!(classify(200, false), Status::Ok);
    assert_eq!(classify(202, true), Status::Ok);
    assert_eq!(classify(401, false), Status::Unauthorized);
    assert_eq!(classify(404, true), Status::SessionGone);
    assert_eq!(classify(404, false), Status::Refused);
    assert_eq!(classify(500, true), Status::Refused);
    assert_eq!(classify(302, true), Status::Refused);
    for v in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        assert_eq!(accepted_version(&json!({"protocolVersion": v})), Some(v));
    }
    assert_eq!(
        accepted_version(&json!({"protocolVersion": "2024-11-05"})),
        None
    );
    assert_eq!(accepted_version(&json!({})), None);
    assert!(valid_session_id("abc-123_~!"));
    assert!(!valid_session_id("") && !valid_session_id("a b") && !valid_session_id("é"));
    assert!(valid_session_id(&"a".repeat(SESSION_ID_BYTES)));
    assert!(!valid_session_id(&"a".repeat(SESSION_ID_BYTES + 1)));
    let h = post_headers(Some("s1"), Some("2025-06-18"));
    assert!(h.contains(&("accept", "application/json, text/event-stream".into())));
    assert!(h.contains(&("content-type", "application/json".into())));
    assert!(h.contains(&("mcp-session-id", "s1".into())));
    assert!(h.contains(&("mcp-protocol-version", "2025-06-18".into())));
    assert_eq!(post_headers(None, None).len(), 2);
}

#[test]
fn a_json_body_is_the_response_once_it_ends() {
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "application/json; charset=utf-8").unwrap();
    let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"tools":[]}}}}"#);
    let (x, y) = body.as_bytes().split_at(10);
    assert_eq!(a.feed(x, &mut s).unwrap(), Fed::More);
    assert_eq!(a.feed(y, &mut s).unwrap(), Fed::More);
    assert_eq!(
        a.finish(&mut s).unwrap(),
        Fed::Done(Ok(json!({"tools": []})))
    );
    assert!(Answer::new(1, "text/html").is_err());
    // A JSON body that is not the response (a notification) is cut short.
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "application/json").unwrap();
    a.feed(br#"{"jsonrpc":"2.0","method":"x"}"#, &mut s)
        .unwrap();
    assert_eq!(a.finish(&mut s), Err(Broken::Cut));
}

#[test]
fn a_json_body_at_the_bound_is_read_and_one_byte_more_is_a_breach() {
    let (mut s, id) = session_with_request();
    let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pad":""#);
    let mut body = head.into_bytes();
    body.resize(LINE_BYTES - 3, b'a');
    body.extend_from_slice(br#""}}"#);
    assert_eq!(body.len(), LINE_BYTES);
    let mut a = Answer::new(id, "application/json").unwrap();
    a.feed(&body, &mut s).unwrap();
    assert!(matches!(a.finish(&mut s), Ok(Fed::Done(Ok(_)))));
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "application/json").unwrap();
    let over = vec![b' '; LINE_BYTES + 3];
    assert_eq!(a.feed(&over, &mut s), Err(Broken::Breach));
}

#[test]
fn a_stream_skips_empty_events_comments_notifications_and_answers_pings() {
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    let stream = format!(
        ": comment\n\nid: 1\ndata:\n\n\
         data: {{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}}\n\n\
         data: {{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}}\n\n\
         data: not json\n\n\
         event: message\ndata: {{\"jsonrpc\":\"2.0\",\ndata: \"id\":{id},\"result\":{{\"ok\":1}}}}\n\n\
         data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"second\"}}\n\n"
    );
    let bytes = stream.as_bytes();
    let mut done = None;
    // Fed one byte at a time: events split anywhere still decode.
    for b in bytes.chunks(1) {
        if let Fed::Done(r) = a.feed(b, &mut s).unwrap() {
            done = Some(r);
            break;
        }
    }
    assert_eq!(done, Some(Ok(json!({"ok": 1}))));
    let pong: Value = serde_json::from_slice(&s.poll_write().unwrap()).unwrap();
    assert_eq!(pong, json!({"jsonrpc":"2.0","id":"p","result":{}}));
}

#[test]
fn a_stream_that_ends_early_is_cut_and_garbage_past_the_bound_is_a_breach() {
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    assert_eq!(
        a.feed(b"data: {\"jsonrpc\":\"2.0\",", &mut s).unwrap(),
        Fed::More
    );
    assert_eq!(a.finish(&mut s), Err(Broken::Cut));
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    let junk = "data: junk\n\n".repeat(GARBAGE_LINES as usize);
    assert_eq!(a.feed(junk.as_bytes(), &mut s).unwrap(), Fed::More);
    assert_eq!(a.feed(b"data: junk\n\n", &mut s), Err(Broken::Breach));
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    assert_eq!(a.feed(b"data: \xff\n\n", &mut s), Err(Broken::Breach));
}

#[test]
fn a_stream_message_at_the_bound_is_read_and_one_byte_more_is_a_breach() {
    let message = |len: usize, id: u64| {
        let mut m = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"pad":""#).into_bytes();
        m.resize(len - 3, b'a');
        m.extend_from_slice(br#""}}"#);
        m
    };
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    let mut ev = b"data:".to_vec();
    ev.extend(message(LINE_BYTES - 5, id));
    ev.extend_from_slice(b"\n\n");
    assert!(matches!(a.feed(&ev, &mut s), Ok(Fed::Done(Ok(_)))));
    let (mut s, id) = session_with_request();
    let mut a = Answer::new(id, "text/event-stream").unwrap();
    let mut ev = b"data:".to_vec();
    ev.extend(message(LINE_BYTES - 4, id));
    ev.extend_from_slice(b"\n\n");
    assert_eq!(a.feed(&ev, &mut s), Err(Broken::Breach));
}
