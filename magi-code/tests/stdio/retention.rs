//! Retention through the real binary (`backend.md` `retention_days`, default 30, 0
//! disables): `magi-code chat` prunes, when it starts, the primary histories whose last
//! durable event is older, never one a running `serve --stdio` child holds, never one it
//! cannot date, never a subagent history; `serve --stdio` itself never prunes.

use crate::common::{meta, rec, result, sessions_dir, start, write_history, write_raw, Env};
use magi_code::util::time::{now_ms, rfc3339};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;

const DAY_MS: i64 = 86_400_000;

/// A history of `id` whose every record is `days_ago` days old.
fn history(env: &Env, id: &str, days_ago: i64) -> PathBuf {
    let ts = rfc3339(now_ms() - days_ago * DAY_MS);
    let mut m = meta(env, id);
    m["ts"] = json!(ts);
    let mut u = rec("title", id, &json!({ "title": id }));
    u["ts"] = json!(ts);
    write_history(env, id, &[m, u])
}

/// Runs `magi-code chat` in `env` with no input (it creates a session and leaves).
fn chat(env: &Env) {
    let mut c = env
        .command(&["chat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(b"").unwrap();
    let out = c.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn chat_prunes_expired_histories_but_not_held_recent_or_undatable_ones() {
    let env = Env::new();
    let old = history(&env, "old", 31);
    let recent = history(&env, "recent", 29);
    let held = history(&env, "held", 40);
    let undatable = write_raw(&env, "undatable.jsonl", b"{\"type\":\"session_meta\"}\n");
    let sub_dir = sessions_dir(&env).join("subagents");
    std::fs::create_dir(&sub_dir).unwrap();
    let sub = sub_dir.join("old-1.jsonl");
    std::fs::copy(&old, &sub).unwrap();
    // A running child holds `held`.
    let mut s = start(&env, &[]);
    let r = s.call("o", "session.open", &json!({ "session_id": "held" }));
    assert_eq!(result(&r)["durable"], true, "{r}");

    chat(&env);
    assert!(!old.exists(), "31 days old: pruned");
    for kept in [&recent, &held, &undatable, &sub] {
        assert!(kept.exists(), "{kept:?} kept");
    }
    // The holder still pages and lists it.
    let list = result(&s.call("l", "session.list", &json!({}))).clone();
    let ids: Vec<&Value> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["session_id"])
        .collect();
    assert!(ids.contains(&&json!("held")), "{list}");
    s.shutdown_ok("bye");
    // Released, the next chat prunes it.
    chat(&env);
    assert!(!held.exists());
    assert!(recent.exists());
}

#[test]
fn retention_zero_keeps_every_history() {
    let env = Env::new();
    env.write_global_settings(&json!({ "retention_days": 0 }));
    let old = history(&env, "old", 400);
    chat(&env);
    assert!(old.exists());
}

#[test]
fn serve_never_prunes() {
    let env = Env::new();
    env.write_global_settings(&json!({ "retention_days": 1 }));
    let old = history(&env, "old", 400);
    let mut s = start(&env, &[]);
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    s.call(
        "t",
        "turn.start",
        &json!({ "session_id": sid, "prompt": "hi" }),
    );
    while s.next()["event"] != "run.finished" {}
    s.call("l", "session.list", &json!({}));
    s.shutdown_ok("bye");
    assert!(old.exists(), "serve --stdio prunes nothing");
    // The same settings do prune from chat: the history was due.
    chat(&env);
    assert!(!old.exists());
}
