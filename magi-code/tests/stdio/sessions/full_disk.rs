//! A full disk under a running child (`decisions.md` 23): an append that fails part way
//! leaves a torn tail the owner cuts before its next append, so later turns go on once space
//! returns, without a reopen; a lazy session whose first append fails leaves no file, so its
//! ID can still become durable and no other child lists it meanwhile.
//!
//! The disk fills by `RLIMIT_FSIZE`, set on the running child with `prlimit(1)` (no root, no
//! mount): a write past the limit stores what fits and then fails (`EFBIG`, with `SIGXFSZ`
//! ignored as `ENOSPC` would), and raising the limit is space returning.

use crate::common::fake_llm::{chat_text, chat_with_usage, FakeLlm, Reply};
use crate::common::{
    events, fake_llm_settings, result, run_turn, sessions_dir, start_turn, until_finished, Env,
    Server, EXE, STEP,
};
use serde_json::{json, Value};
use std::fs;
use std::process::Command;

/// `serve --stdio` in `env` that survives `SIGXFSZ` (ignored across `exec`), initialized.
fn spawn_limitable(env: &Env) -> Server {
    let mut c = Command::new("sh");
    c.args(["-c", "trap '' XFSZ; exec \"$0\" serve --stdio", EXE])
        .current_dir(&env.cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &env.root)
        .env("MC_HOME", &env.mc_home);
    let mut s = Server::spawn(c, true);
    s.initialize();
    s
}

/// Sets the child's file size limit: `Some(bytes)`, or `None` for none.
fn limit_files(s: &Server, bytes: Option<u64>) {
    let v = bytes.map_or_else(|| "unlimited".to_owned(), |b| format!("{b}:unlimited"));
    let st = Command::new("prlimit")
        .args(["--pid", &s.pid().to_string(), &format!("--fsize={v}")])
        .status()
        .expect("prlimit");
    assert!(st.success());
}

fn finished(frames: &[Value]) -> &Value {
    &frames.last().unwrap()["data"]
}

/// The run ended without claiming what it could not store: `persistence_failed`, and
/// `not_started` (its first append failed) or `degraded` (a later one did).
#[track_caller]
fn assert_unsaved(frames: &[Value]) {
    let fin = finished(frames);
    assert_eq!(fin["error_code"], "persistence_failed", "{fin}");
    assert!(
        matches!(
            fin["persistence"].as_str(),
            Some("not_started" | "degraded")
        ),
        "{fin}"
    );
}

/// Every line of the history parses, and the file ends in LF.
fn whole_lines(bytes: &[u8]) -> Vec<Value> {
    assert_eq!(bytes.last(), Some(&b'\n'), "no torn tail");
    bytes[..bytes.len() - 1]
        .split(|b| *b == b'\n')
        .map(|l| serde_json::from_slice(l).expect("a whole record"))
        .collect()
}

fn create(s: &mut Server) -> String {
    result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn turns_go_on_after_a_torn_append_once_space_returns() {
    let env = Env::new();
    let mut s = spawn_limitable(&env);
    let sid = create(&mut s);
    let one = run_turn(&mut s, &sid, "one");
    assert_eq!(finished(&one)["persistence"], "durable");
    let file = sessions_dir(&env).join(format!("{sid}.jsonl"));
    // The first completed turn's title lands after `run.finished`: wait for it, so that the
    // limit below is set on the file as it stays.
    crate::common::poll::until(STEP, "no title record", || {
        fs::read_to_string(&file)
            .unwrap()
            .contains(r#""type":"title""#)
    });
    let size = fs::metadata(&file).unwrap().len();
    // Room for 20 more bytes: the next append stores part of a line and fails.
    limit_files(&s, Some(size + 20));
    let two = run_turn(&mut s, &sid, "two");
    assert_unsaved(&two);
    let torn = fs::read(&file).unwrap();
    assert_eq!(torn.len() as u64, size + 20);
    assert_ne!(
        torn.last(),
        Some(&b'\n'),
        "the failed append left a torn tail"
    );
    // Still full: the next turn is admitted (never session_invalid) and degrades again.
    start_turn(&mut s, &sid, "still full");
    let full = until_finished(&mut s);
    assert_unsaved(&full);
    limit_files(&s, None);
    let three = run_turn(&mut s, &sid, "three");
    let fin = finished(&three);
    assert_eq!(
        (fin["outcome"].as_str(), fin["persistence"].as_str()),
        (Some("completed"), Some("durable")),
        "{fin}"
    );
    assert!(fin["revision"].is_string());
    // The torn fragment was cut before the append: whole lines only.
    let records = whole_lines(&fs::read(&file).unwrap());
    let prompts: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "user_input")
        .filter_map(|r| r["text"].as_str())
        .collect();
    assert_eq!(prompts, ["one", "three"]);
    drop(s);
    // Another child opens it and pages both turns.
    let mut t = crate::common::start(&env, &[]);
    let open = t.call("o", "session.open", &json!({"session_id": sid}));
    let rev = result(&open)["revision"].as_str().unwrap().to_owned();
    let page = t.call(
        "p",
        "history.page",
        &json!({"session_id": sid, "revision": rev}),
    );
    let users: Vec<&str> = result(&page)["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "user")
        .filter_map(|e| e["text"].as_str())
        .collect();
    assert_eq!(users, ["one", "three"]);
}

#[test]
fn a_failed_first_append_leaves_no_file_and_the_id_can_still_become_durable() {
    let env = Env::new();
    let mut s = spawn_limitable(&env);
    let sid = create(&mut s);
    let file = sessions_dir(&env).join(format!("{sid}.jsonl"));
    limit_files(&s, Some(0));
    start_turn(&mut s, &sid, "one");
    let one = until_finished(&mut s);
    assert_unsaved(&one);
    assert!(
        !file.exists(),
        "no history appears without its first record"
    );
    // Another child does not list the never-acknowledged ID.
    let mut other = crate::common::start(&env, &[]);
    let list = other.call("l", "session.list", &json!({}));
    let ids: Vec<&str> = result(&list)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["session_id"].as_str())
        .collect();
    assert!(!ids.contains(&sid.as_str()), "{ids:?}");
    drop(other);
    limit_files(&s, None);
    let two = run_turn(&mut s, &sid, "two");
    assert_eq!(
        finished(&two)["persistence"],
        "durable",
        "{:?}",
        finished(&two)
    );
    let records = whole_lines(&fs::read(&file).unwrap());
    assert_eq!(records[0]["type"], "session_meta");
    // The title that follows a completed turn writes the metadata again on its own thread:
    // once the child is gone, nothing but the history and its lease files is left.
    s.shutdown_ok("bye");
    let leftovers: Vec<String> = fs::read_dir(sessions_dir(&env))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert_eq!(leftovers, Vec::<String>::new());
}

/// A child whose first turn (`one`, answered with usage past 80% of a 10,000-token window)
/// makes the next turn compact before its first step; the model's later `replies` follow.
fn compacting_next(replies: Vec<Reply>) -> (Env, Server, String, FakeLlm) {
    let mut all = vec![chat_with_usage(chat_text(&["hello!"]), 8_001)];
    all.extend(replies);
    let llm = FakeLlm::start(all);
    let env = Env::new();
    env.write_global_settings(&fake_llm_settings(
        &llm,
        &json!({"runner": {"context_window": 10_000}}),
    ));
    let mut s = spawn_limitable(&env);
    let sid = create(&mut s);
    assert_eq!(
        finished(&run_turn(&mut s, &sid, "one"))["persistence"],
        "durable"
    );
    (env, s, sid, llm)
}

/// The compaction activities' states, in order.
fn compactions(frames: &[Value]) -> Vec<&str> {
    events(frames, "activity")
        .iter()
        .filter(|f| f["data"]["kind"] == "compaction")
        .filter_map(|f| f["data"]["state"].as_str())
        .collect()
}

#[test]
fn a_compaction_whose_started_activity_cannot_be_stored_asks_for_no_summary() {
    let (env, mut s, sid, llm) =
        compacting_next(vec![chat_text(&["SUMMARY"]), chat_text(&["done"])]);
    let file = sessions_dir(&env).join(format!("{sid}.jsonl"));
    let stored = fs::read_to_string(&file).unwrap();
    let size = stored.len() as u64;
    // The next input's line is as long as the first one's plus the prompt's extra bytes
    // (fixed-width IDs and timestamps): room for it and 10 bytes more, not for the
    // compaction's `started` activity line.
    let first = stored
        .lines()
        .find(|l| l.contains(r#""type":"user_input""#))
        .unwrap();
    let prompt = "two";
    let input = first.len() as u64 + 1 + (prompt.len() - "one".len()) as u64;
    limit_files(&s, Some(size + input + 10));
    let two = run_turn(&mut s, &sid, prompt);
    let fin = finished(&two);
    assert_eq!(
        (fin["persistence"].as_str(), fin["error_code"].as_str()),
        (Some("degraded"), Some("persistence_failed")),
        "{fin}"
    );
    assert_eq!(
        compactions(&two),
        ["started", "failed"],
        "closed for the client, and no summary asked for"
    );
    let _ = llm.next(STEP);
    assert!(llm.drain().is_empty(), "no request after the failed append");
    let bytes = fs::read(&file).unwrap();
    let whole = &bytes[..=bytes.iter().rposition(|b| *b == b'\n').unwrap()];
    let last = whole_lines(whole).pop().unwrap();
    assert_eq!(last["type"], "user_input", "the input was stored: {last}");
}

#[test]
fn a_compaction_whose_records_cannot_be_stored_ends_the_run_degraded() {
    let summary = "S".repeat(16_000);
    let (env, mut s, sid, _llm) =
        compacting_next(vec![chat_text(&[&summary]), chat_text(&["done"])]);
    let file = sessions_dir(&env).join(format!("{sid}.jsonl"));
    let size = fs::metadata(&file).unwrap().len();
    // Room for the input, the compaction's `started` activity and a turn's last records,
    // not for the 16 KB summary: only the compaction's own append fails (a torn tail, cut
    // before the next append, which then fits).
    limit_files(&s, Some(size + 4_096));
    let two = run_turn(&mut s, &sid, "two");
    let fin = finished(&two);
    assert_eq!(
        (fin["persistence"].as_str(), fin["error_code"].as_str()),
        (Some("degraded"), Some("persistence_failed")),
        "the live loop went on from a summary the history lacks: {fin}"
    );
    assert_eq!(fin["outcome"], "failed", "{fin}");
    // What the file holds: whole lines up to the torn tail the failed append left.
    let bytes = fs::read(&file).unwrap();
    let whole = &bytes[..=bytes.iter().rposition(|b| *b == b'\n').unwrap()];
    let types: Vec<String> = whole_lines(whole)
        .iter()
        .map(|r| r["type"].as_str().unwrap().to_owned())
        .collect();
    assert!(!types.contains(&"compaction".to_owned()), "{types:?}");
    assert_eq!(
        types.last().map(String::as_str),
        Some("activity"),
        "{types:?}"
    );
}
