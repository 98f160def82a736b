//! MCP servers given up on mid-session for breaking the protocol (garbage past the bound, a
//! line over 1 MiB) while their process is still running: killed at once and reported as
//! `mcp_server_failed`, not `mcp_server_exited` (issue 14).

use crate::common::start_turn;
use crate::mcp::{alive, fake_with_pidfile, finished, ready_in, script_env, session, until};
use serde_json::{json, Value};

/// Runs one turn calling `mcp__fake__echo` twice on a fake server in `mode`; returns the
/// turn's frames and the server's pid.
fn two_calls(mode: &str) -> (Vec<Value>, u32) {
    let probe = crate::common::Env::new();
    let pidfile = probe.root.join("fake.pid");
    let def = fake_with_pidfile(mode, &pidfile);
    let env = script_env(
        &json!([
            {"tool": {"name": "mcp__fake__echo", "input": {"text": "one"}}},
            {"tool": {"name": "mcp__fake__echo", "input": {"text": "two"}}},
            {"text": "still here"},
        ]),
        &[("fake", &def)],
        Some(json!({"mcp": "allow"})),
    );
    let (mut s, _) = ready_in(&env);
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid), "the fake server runs once the child is ready");
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    // Checked before shutdown: teardown would kill it anyway.
    assert!(!alive(pid), "a server given up on is killed at once");
    s.shutdown_ok("bye");
    (frames, pid)
}

fn codes(frames: &[Value]) -> Vec<&str> {
    frames
        .iter()
        .filter(|f| f["event"] == "diagnostic")
        .map(|f| f["data"]["code"].as_str().unwrap())
        // The fake's `bad.name`, reported in the first run.
        .filter(|c| *c != "mcp_tools_left_out")
        .collect()
}

fn check(frames: &[Value]) {
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(codes(frames), ["mcp_server_failed", "mcp_server_failed"]);
    let finals: Vec<(&str, &str)> = frames
        .iter()
        .filter(|f| f["event"] == "activity" && f["data"]["state"] != "started")
        .map(|a| {
            (
                a["data"]["state"].as_str().unwrap(),
                a["data"]["summary"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        finals,
        [("failed", "mcp__fake__echo (text): server failed"); 2]
    );
}

#[test]
fn garbage_past_the_bound_mid_call_kills_the_server_and_reports_mcp_server_failed() {
    let (frames, _) = two_calls("callgarbage:17");
    check(&frames);
}

#[test]
fn a_line_over_the_bound_mid_call_kills_the_server_and_reports_mcp_server_failed() {
    let (frames, _) = two_calls("callhuge");
    check(&frames);
}
