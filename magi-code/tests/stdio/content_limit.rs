//! A reply past what a run stores (`content_limit`, 8 MiB of text) over real pipes against the
//! fake Chat model: the run keeps the reply up to the bound, says so with a `diagnostic`,
//! reports its persistence truthfully, and the session it leaves still opens in a new child.
//! The bound is per run (`decisions.md` 48): replies at it, turn after turn, never stop the
//! session from taking the next; the projection window shows the newest of them.

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

/// Opens `sid` in a new child and pages its whole history: the entries and whether the last
/// page said complete.
fn reopened(env: &Env, sid: &str) -> (Vec<Value>, bool) {
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
            return (entries, r["complete"] == true);
        }
        assert_eq!(r["complete"], false);
    }
    unreachable!()
}

/// The assistant text of `entries`, parts joined.
fn assistant_text(entries: &[Value]) -> String {
    entries
        .iter()
        .filter(|e| e["kind"] == "assistant")
        .map(|e| e["text"].as_str().unwrap())
        .collect()
}

/// Whether `entries` start with the window's leading entry.
fn earlier_left_out(entries: &[Value]) -> bool {
    entries[0]["kind"] == "diagnostic" && entries[0]["text"] == "earlier history is not shown"
}

#[test]
fn one_byte_past_the_run_bound_is_kept_to_it_and_the_session_still_opens() {
    let run_bound = 8 << 20;
    let long = text(run_bound + 1);
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
    assert_eq!(kept, long[..run_bound], "kept to the run's bound exactly");
    // A new child opens the session: one turn whose projection is over the snapshot budget
    // shows its newest parts that fit, after the leading entry.
    let (entries, complete) = reopened(&env, &sid);
    assert!(!complete);
    assert!(earlier_left_out(&entries));
    let shown = assistant_text(&entries);
    assert!(
        kept.ends_with(&shown) && shown.len() > (7 << 20),
        "{}",
        shown.len()
    );
    let last = entries.last().unwrap();
    assert_eq!(last["kind"], "diagnostic");
    assert_eq!(last["text"], "The turn failed: content_limit.");
    let bytes: usize = entries.iter().map(|e| e.to_string().len() + 1).sum();
    assert!(bytes <= 8 << 20, "{bytes}");
}

/// Three replies of the run's whole bound, then a short one: each turn is bounded by itself,
/// never by what the turns before it stored.
#[test]
fn replies_at_the_run_bound_never_stop_the_next_turn() {
    let full = text(8 << 20);
    let replies = vec![
        streamed(&full),
        streamed(&full),
        streamed(&full),
        streamed("eleven byte"),
    ];
    let llm = FakeLlm::start(replies);
    // A context window that takes the replayed replies without compacting.
    let env = fake_llm_env(&llm, &json!({"runner": {"context_window": 10_000_000}}));
    let (mut s, sid) = start_session(&env, &[]);
    for n in 0..4 {
        start_turn(&mut s, &sid, "go");
        let frames = until_finished(&mut s);
        let fin = &frames.last().unwrap()["data"];
        assert_eq!(fin["outcome"], "completed", "turn {n}: {fin}");
        assert_eq!(fin["persistence"], "durable");
        let want = if n < 3 { 8 << 20 } else { 11 };
        assert_eq!(reconciled(&frames).len(), want);
    }
    s.shutdown_ok("bye");
    let (entries, complete) = reopened(&env, &sid);
    assert!(!complete && earlier_left_out(&entries));
    assert_eq!(entries.last().unwrap()["text"], "eleven byte");
    let bytes: usize = entries.iter().map(|e| e.to_string().len() + 1).sum();
    assert!(bytes <= 8 << 20, "{bytes}");
}
