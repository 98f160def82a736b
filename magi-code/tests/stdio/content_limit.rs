//! A reply past what a run stores (`content_limit`) over real pipes against the fake Chat
//! model: the run keeps the reply up to the bound, says so with a `diagnostic`, reports its
//! persistence truthfully, and the session it leaves still opens in a new child, which pages
//! the partial reply and the failed turn's diagnostic. The bound that binds on a fresh session
//! is what its history snapshot can still show (8 MiB serialized), below the run's 8 MiB of
//! text: both are measured at the edge.

use crate::common::fake_llm::{chat_delta, chat_finish, FakeLlm, Reply};
use crate::common::{
    diagnostic_codes, events, fake_llm_env, reconciled, result, start, start_session, start_turn,
    until_finished, Env, Server,
};
use serde_json::{json, Value};

/// The reply text: long words of one letter, so that nothing in it looks like a secret and
/// the redactor every text goes through (whose cost is per word) does not dominate the test.
fn text(len: usize) -> String {
    const WORD: &str = "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww ";
    let mut t = WORD.repeat(len / WORD.len() + 1);
    t.truncate(len);
    t
}

/// A Chat reply streaming `t` in deltas of 65,000 bytes.
fn streamed(t: &str) -> Reply {
    let mut chunks: Vec<String> = t
        .as_bytes()
        .chunks(65_000)
        .map(|c| chat_delta(&json!({"content": std::str::from_utf8(c).unwrap()})))
        .collect();
    chunks.push(chat_finish("stop"));
    chunks.push("data: [DONE]\n\n".to_owned());
    Reply::sse(chunks)
}

/// One fresh session's first turn "go" answered by `t`: its frames, the session and `env`.
fn first_turn(t: &str) -> (Vec<Value>, String, Env, FakeLlm) {
    let llm = FakeLlm::start(vec![streamed(t)]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "go");
    let frames = until_finished(&mut s);
    s.shutdown_ok("bye");
    (frames, sid, env, llm)
}

/// Opens `sid` in a new child and pages its whole history: the entries.
fn reopened(env: &Env, sid: &str) -> Vec<Value> {
    let mut s: Server = start(env, &[]);
    let open = s.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&open)["revision"]
        .as_str()
        .unwrap_or_else(|| panic!("session.open failed: {open}"))
        .to_owned();
    let mut entries = Vec::new();
    let mut cursor = Value::Null;
    for n in 0.. {
        let page = s.call(
            &format!("p{n}"),
            "history.page",
            &json!({"session_id": sid, "revision": rev, "cursor": cursor}),
        );
        let r = result(&page);
        entries.extend(r["entries"].as_array().unwrap().iter().cloned());
        cursor = r["next_cursor"].clone();
        if cursor.is_null() {
            assert_eq!(r["complete"], true);
            break;
        }
    }
    entries
}

/// The assistant text of `entries`, parts joined.
fn assistant_text(entries: &[Value]) -> String {
    entries
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .map(|e| e["text"].as_str().unwrap())
        .collect()
}

#[test]
fn a_reply_past_the_bound_is_kept_to_it_and_the_session_still_opens() {
    // Within the run's 8 MiB of text, past what the snapshot can show: stored whole, this
    // reply made every later `session.open` answer `history_limit`.
    let long = text(8 << 20);
    let (frames, sid, env, _llm) = first_turn(&long);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "content_limit");
    assert_eq!(
        fin["persistence"], "durable",
        "the partial reply was stored"
    );
    assert!(fin["revision"].is_string());
    assert_eq!(diagnostic_codes(&frames), ["content_limit"]);
    let kept = reconciled(&frames);
    let reconcile = events(&frames, "message.reconcile");
    assert_eq!(reconcile.last().unwrap()["data"]["partial"], true);
    assert!(
        long.starts_with(&kept),
        "the kept reply is the reply's beginning"
    );
    let l = kept.len();
    // Stopped by what the history can show: close to 8 MiB serialized, below the run bound.
    assert!(l < 8 << 20, "{l}");
    assert!(l > (8 << 20) - (256 << 10), "{l}");
    // A new child opens the session and pages the partial reply and the failed turn.
    let entries = reopened(&env, &sid);
    assert_eq!(assistant_text(&entries), kept);
    let last = entries.last().unwrap();
    assert_eq!(last["kind"], "diagnostic");
    assert_eq!(last["text"], "The turn failed: content_limit.");
    let bytes: usize = entries.iter().map(|e| e.to_string().len() + 1).sum();
    assert!(bytes <= 8 << 20, "{bytes}");

    // The edge: a fresh session's first reply of exactly that length is whole ...
    let (frames, sid, env, _llm) = first_turn(&long[..l]);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{fin}");
    assert_eq!(fin["persistence"], "durable");
    assert_eq!(diagnostic_codes(&frames), Vec::<String>::new());
    assert_eq!(reconciled(&frames).len(), l);
    assert_eq!(assistant_text(&reopened(&env, &sid)).len(), l);
    // ... and one byte more is the first past it, kept to the same length.
    let (frames, sid, env, _llm) = first_turn(&long[..=l]);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["error_code"], "content_limit", "{fin}");
    assert_eq!(diagnostic_codes(&frames), ["content_limit"]);
    assert_eq!(reconciled(&frames).len(), l);
    assert_eq!(assistant_text(&reopened(&env, &sid)).len(), l);
}
