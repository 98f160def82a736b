//! Session titles over real pipes (`runner.md` 7 "Titles"): one request without tools to the
//! same model within 1 s after the first completed turn's `run.finished`, beside the worker
//! (never delaying `run.finished`, never making a request `busy`); its `title` record is
//! sanitized and cut to 50 characters, shown by `session.list` and `session.discover`, never
//! by a history entry, and leaves the `run.finished` revision valid. Failure is silent; a
//! failed title is asked again after the next completed turn, three times in all.

use crate::common::fake_llm::{chat_text, FakeLlm, Hold, Reply};
use crate::common::{fake_llm_env, result, sessions_dir, start_turn, until_finished, Env, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WAIT: Duration = crate::common::STEP;

fn start(env: &Env) -> (Server, String) {
    crate::common::start_session(env, &["session.discover"])
}

/// Runs one turn; returns the `run.finished` data and when it arrived.
fn turn(s: &mut Server, sid: &str, prompt: &str) -> (Value, Instant) {
    start_turn(s, sid, prompt);
    loop {
        let f = s.next();
        if f["event"] == "run.finished" {
            return (f["data"].clone(), Instant::now());
        }
        assert_ne!(f["event"], "diagnostic", "{f}");
    }
}

/// The `title` records stored for `sid`.
fn stored_titles(env: &Env, sid: &str) -> Vec<String> {
    let path = sessions_dir(env).join(format!("{sid}.jsonl"));
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["type"] == "title")
        .map(|r| r["title"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits (bounded) for the first stored title of `sid`.
fn title_on_disk(env: &Env, sid: &str) -> String {
    crate::common::poll::within(WAIT, || stored_titles(env, sid).pop())
        .expect("no title record in time")
}

fn entry_of<'a>(list: &'a Value, sid: &str) -> &'a Value {
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["session_id"] == sid)
        .unwrap()
}

fn page(s: &mut Server, id: &str, sid: &str, revision: &Value) -> Value {
    let r = s.call(
        id,
        "history.page",
        &json!({"session_id": sid, "revision": revision}),
    );
    result(&r)["entries"].clone()
}

#[test]
fn the_title_request_follows_run_finished_and_its_record_keeps_the_revision() {
    let answer = format!("\"T{}\"\nsecond line", "a".repeat(50));
    // The title's answer is held until the pages before it are read.
    let hold = Hold::default();
    let title = Reply {
        hold: Some(hold.clone()),
        ..chat_text(&[&answer])
    };
    let llm = FakeLlm::with_titles(
        vec![chat_text(&["Hi ", "there."]), chat_text(&["ok"])],
        vec![title],
    );
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start(&env);
    let (fin, finished_at) = turn(&mut s, &sid, "Fix the \u{7}parser");
    assert_eq!(fin["outcome"], "completed", "{fin}");
    let before = page(&mut s, "p1", &sid, &fin["revision"]);

    let req = llm.next_title(WAIT).expect("a title request");
    hold.release();
    assert!(
        req.at.duration_since(finished_at) < Duration::from_secs(1),
        "within 1 s after run.finished"
    );
    assert_eq!(req.body["model"], "tiny", "the same model");
    assert!(req.body.get("tools").is_none(), "no tools: {}", req.body);
    assert!(
        req.body.to_string().contains("Fix the"),
        "the first input is its content"
    );
    assert!(req.body.to_string().contains("Hi there."), "and its reply");

    let stored = title_on_disk(&env, &sid);
    assert_eq!(
        stored,
        format!("T{}", "a".repeat(49)),
        "51 characters cut to 50"
    );
    // The run.finished revision still pages, the same entries, none of them the title.
    let after = page(&mut s, "p2", &sid, &fin["revision"]);
    assert_eq!(after, before);
    assert!(!after.to_string().contains("aaaa"), "{after}");
    let list = result(&s.call("l", "session.list", &json!({}))).clone();
    assert_eq!(entry_of(&list, &sid)["title"], stored.as_str());
    let found = result(&s.call("d", "session.discover", &json!({}))).clone();
    assert_eq!(entry_of(&found, &sid)["title"], stored.as_str());
    s.shutdown_ok("bye");

    // A session with a stored title is never titled again, in another child either.
    let mut s = crate::common::start(&env, &[]);
    let r = s.call("o", "session.open", &json!({"session_id": sid}));
    assert!(r.get("result").is_some(), "{r}");
    let (fin, _) = turn(&mut s, &sid, "more");
    assert_eq!(fin["outcome"], "completed", "{fin}");
    assert!(llm.next_title(Duration::from_millis(1500)).is_none());
    assert_eq!(stored_titles(&env, &sid).len(), 1);
    s.shutdown_ok("bye");
}

#[test]
fn a_slow_title_delays_nothing_and_makes_nothing_busy() {
    let stall = Reply::sse(Vec::new()).stalled();
    let llm = FakeLlm::with_titles(vec![chat_text(&["one"]), chat_text(&["two"])], vec![stall]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start(&env);
    let (fin, _) = turn(&mut s, &sid, "first");
    assert_eq!(fin["outcome"], "completed");
    llm.next_title(WAIT).expect("a title request, now stalled");
    // While it stalls: the next turn runs at once, then a new session is created.
    let (fin2, _) = turn(&mut s, &sid, "second");
    assert_eq!(fin2["outcome"], "completed", "{fin2}");
    let page2 = page(&mut s, "p", &sid, &fin2["revision"]);
    assert_eq!(page2.as_array().unwrap().len(), 4, "{page2}");
    let created = s.call("c2", "session.create", &json!({}));
    assert!(created.get("result").is_some(), "{created}");
    assert!(
        llm.next_title(Duration::from_millis(1500)).is_none(),
        "one title request per session"
    );
    let t0 = Instant::now();
    s.shutdown_ok("bye");
    assert!(
        llm.closed_within(Duration::from_secs(2)).is_some(),
        "shutdown cancels the stalled title request"
    );
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(stored_titles(&env, &sid).is_empty());
}

#[test]
fn a_failed_title_is_silent_and_asked_again_after_each_next_turn_three_times_in_all() {
    // No title reply scripted: every title request gets a 500.
    let replies = (1..=5)
        .map(|n| chat_text(&[&format!("reply {n}")]))
        .collect();
    let llm = FakeLlm::start(replies);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start(&env);
    let (fin, _) = turn(&mut s, &sid, "first");
    assert_eq!(fin["outcome"], "completed");
    llm.next_title(WAIT).expect("a title request");
    assert!(
        llm.next_title(Duration::from_millis(1500)).is_none(),
        "not asked again before the next turn"
    );
    // No event or diagnostic came: the next frame is this response.
    let st = s.call("st", "status", &json!({}));
    assert!(st.get("result").is_some(), "{st}");
    for n in 2..=5 {
        let (fin, finished_at) = turn(&mut s, &sid, &format!("turn {n}"));
        assert_eq!(fin["outcome"], "completed");
        let asked = llm.next_title(Duration::from_millis(1500));
        if n <= 3 {
            let req = asked.unwrap_or_else(|| panic!("try {n} after turn {n}"));
            assert!(req.at.duration_since(finished_at) < Duration::from_secs(1));
        } else {
            assert!(asked.is_none(), "three tries in all per session and child");
        }
    }
    assert!(stored_titles(&env, &sid).is_empty());
    let list = result(&s.call("l", "session.list", &json!({}))).clone();
    assert!(entry_of(&list, &sid)["title"].is_null(), "never made up");
    s.shutdown_ok("bye");
}

#[test]
fn a_title_cut_short_is_asked_again_and_stored_after_the_next_turn() {
    // As llama-cpp-python does when the next turn's request arrives: the title's stream ends
    // with no finish reason (`[DONE]` at once), then the second try answers.
    let cut = Reply::sse(vec!["data: [DONE]\n\n".into()]);
    let llm = FakeLlm::with_titles(
        vec![chat_text(&["one"]), chat_text(&["two"])],
        vec![cut, chat_text(&["Second try"])],
    );
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start(&env);
    let (fin, _) = turn(&mut s, &sid, "first");
    assert_eq!(fin["outcome"], "completed");
    llm.next_title(WAIT).expect("the first try");
    assert!(llm.next_title(Duration::from_millis(1500)).is_none());
    assert!(stored_titles(&env, &sid).is_empty());
    let (fin, _) = turn(&mut s, &sid, "second");
    assert_eq!(fin["outcome"], "completed");
    llm.next_title(WAIT).expect("the second try");
    assert_eq!(title_on_disk(&env, &sid), "Second try");
    s.shutdown_ok("bye");
}

#[test]
fn a_failed_turn_gets_no_title_the_first_completed_one_does() {
    let llm = FakeLlm::with_titles(
        vec![Reply::status(400, &json!({})), chat_text(&["fine"])],
        vec![chat_text(&["Second try"])],
    );
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start(&env);
    start_turn(&mut s, &sid, "first");
    let fin = until_finished(&mut s).pop().unwrap()["data"].clone();
    assert_eq!(fin["outcome"], "failed", "{fin}");
    assert!(
        llm.next_title(Duration::from_millis(1500)).is_none(),
        "no title for a failed turn"
    );
    let (fin2, _) = turn(&mut s, &sid, "again");
    assert_eq!(fin2["outcome"], "completed");
    llm.next_title(WAIT).expect("the first completed turn asks");
    assert_eq!(title_on_disk(&env, &sid), "Second try");
    s.shutdown_ok("bye");
}

#[test]
fn echo_titles_a_session_with_its_first_input() {
    let env = Env::new();
    let (mut s, sid) = start(&env);
    let fifty = "é".repeat(50);
    let (fin, _) = turn(&mut s, &sid, &fifty);
    assert_eq!(fin["outcome"], "completed");
    assert_eq!(title_on_disk(&env, &sid), fifty, "50 characters kept whole");
    let entries = page(&mut s, "p", &sid, &fin["revision"]);
    assert_eq!(entries.as_array().unwrap().len(), 2, "{entries}");
    let found = result(&s.call("d", "session.discover", &json!({}))).clone();
    assert_eq!(entry_of(&found, &sid)["title"], fifty.as_str());
    s.shutdown_ok("bye");
}
