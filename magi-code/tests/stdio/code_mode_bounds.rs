//! Code Mode past its bounds through the real binary (`decisions.md` 52): a cell's clock and
//! its CPU bound cut a nested call in flight, calls past `max_calls` throw `limit` with no
//! record and no activity until the cell is stopped, and a kill -9 at any moment never leaves
//! a file changed by a nested call without its `code_call` record.

use crate::code_mode::{code_env, exec, header_ok, tool_result, WAIT};
use crate::common::fake_llm::{chat_text, FakeLlm};
use crate::common::procs::alive;
use crate::common::{events, start_session, start_turn, until_finished, until_match, Env};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// A bound far past the 500 ms the decision allows, and far below the nested call's own
/// length: a cell that waits for its call fails it, whatever the machine's load.
const CUT_WITHIN: Duration = Duration::from_secs(8);

/// The session's records, parsed.
fn records(env: &Env, sid: &str) -> Vec<Value> {
    let file = crate::common::sessions_dir(env).join(format!("{sid}.jsonl"));
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The records of type `ty`.
fn of<'r>(records: &'r [Value], ty: &str) -> Vec<&'r Value> {
    records.iter().filter(|r| r["type"] == ty).collect()
}

/// The processes whose command line is `sh -c <command>` or `<command>` split on spaces.
fn running(command: &str) -> bool {
    let want: Vec<u8> = command
        .split(' ')
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == want))
        .any(alive)
}

/// Runs `code` in one cell with `settings`, a nested `shell` of `sleep` in flight; returns
/// the `exec` result the model got and how long the turn took from the shell's start.
fn cut_short(code: &str, settings: &Value, sleep: &str) -> (String, Duration, Vec<Value>) {
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, settings);
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "sleep");
    until_match(&mut s, |f| {
        f["event"] == "activity" && f["data"]["name"] == "shell" && f["data"]["state"] == "started"
    });
    let t0 = Instant::now();
    let frames = until_finished(&mut s);
    let took = t0.elapsed();
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert!(!running(sleep), "the nested shell outlived its cell");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    let shell = events(&frames, "activity")
        .into_iter()
        .rfind(|f| f["data"]["name"] == "shell")
        .expect("the nested shell's final activity");
    assert_eq!(shell["data"]["state"], "failed", "{shell}");
    let stored = records(&env, &sid);
    s.shutdown_ok("bye");
    (text, took, stored)
}

/// The one nested call's records: its `code_call` without output, then its `code_result`.
fn one_cut_call(stored: &[Value]) -> String {
    let calls = of(stored, "code_call");
    let results = of(stored, "code_result");
    assert_eq!((calls.len(), results.len()), (1, 1), "{stored:#?}");
    assert_eq!(calls[0]["call_id"], "c1");
    assert!(calls[0].get("output").is_none(), "{}", calls[0]);
    assert_eq!(
        (results[0]["call_id"].as_str(), results[0]["seq"].as_u64()),
        (Some("c1"), Some(0))
    );
    assert_eq!(results[0]["is_error"], true);
    let at = |r: &Value| stored.iter().position(|x| x == r).unwrap();
    assert!(at(calls[0]) < at(results[0]));
    results[0]["output"].as_str().unwrap().to_owned()
}

#[test]
fn a_cells_clock_cuts_its_nested_call_in_flight() {
    let sleep = "sleep 28.61";
    let code = format!("await tools.shell({{command: \"{sleep}\"}});\nreturn 1;");
    let settings = json!({"code_mode": {"timeout_ms": 1000, "tools": {"shell": "allow"}}});
    let (text, took, stored) = cut_short(&code, &settings, sleep);
    header_ok(&text, "exec timed out", 1);
    assert!(took < CUT_WITHIN, "the cell waited for its call: {took:?}");
    let output = one_cut_call(&stored);
    assert!(output.contains("cancelled"), "{output}");
}

#[test]
fn a_cells_cpu_bound_cuts_its_nested_call_in_flight() {
    // The call goes out, then the code spins: the helper ends the cell on its CPU bound
    // while the backend still runs the call.
    let sleep = "sleep 28.62";
    let code = format!(
        "tools.shell({{command: \"{sleep}\"}}).catch(() => {{}});\nawait null;\nawait null;\nfor (;;) {{}}"
    );
    let settings = json!({"code_mode": {"cpu_ms": 100, "tools": {"shell": "allow"}}});
    let (text, took, stored) = cut_short(&code, &settings, sleep);
    header_ok(&text, "exec timed out", 1);
    assert!(took < CUT_WITHIN, "the cell waited for its call: {took:?}");
    one_cut_call(&stored);
}

/// Runs `code` in one cell allowing 5 calls; the result, the records and the nested
/// activities' final states.
fn past_max_calls(code: &str) -> (String, Vec<Value>, Vec<String>) {
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({"code_mode": {"max_calls": 5}}));
    for i in 0..7 {
        std::fs::write(env.cwd.join(format!("a{i}.txt")), "x\n").unwrap();
    }
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "loop");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    let nested: Vec<String> = events(&frames, "activity")
        .into_iter()
        .filter(|f| f["data"]["name"] == "read_file" && f["data"]["state"] != "started")
        .map(|f| f["data"]["state"].as_str().unwrap().to_owned())
        .collect();
    let stored = records(&env, &sid);
    s.shutdown_ok("bye");
    (text, stored, nested)
}

#[test]
fn calls_past_max_calls_leave_no_record_and_a_loop_of_them_is_stopped() {
    let code = "let n = 0;\nfor (let i = 0; i < 10000; i++) {\n  try { await tools.read_file({path: `a${i % 7}.txt`}); } catch (e) { if (e.code === \"limit\") n++; }\n}\nreturn n;";
    let (text, stored, nested) = past_max_calls(code);
    header_ok(&text, "exec failed", 5);
    let body: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(body[0], "1000 calls refused past max_calls", "{text}");
    assert!(
        body.iter()
            .any(|l| l.contains("stopped: too many calls past max_calls")),
        "{text}"
    );
    let seqs: Vec<u64> = of(&stored, "code_call")
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [0, 1, 2, 3, 4], "N equals the records");
    assert_eq!(of(&stored, "code_result").len(), 5);
    assert_eq!(nested, ["completed"; 5], "no activity past max_calls");
}

#[test]
fn calls_past_max_calls_issued_together_are_refused_without_records() {
    let code = "const r = await Promise.allSettled(Array.from({length: 300}, (_, i) => tools.read_file({path: `a${i % 7}.txt`})));\nreturn r.filter((x) => x.status === \"rejected\" && x.reason.code === \"limit\").length;";
    let (text, stored, nested) = past_max_calls(code);
    header_ok(&text, "exec completed", 5);
    let body: Vec<&str> = text.lines().skip(2).collect();
    assert_eq!(body, ["295 calls refused past max_calls", "295"], "{text}");
    assert_eq!(of(&stored, "code_call").len(), 5);
    assert_eq!(of(&stored, "code_result").len(), 5);
    assert_eq!(nested.len(), 5);
}

/// Files the cell of the kill loop writes, one nested call each.
const WRITES: usize = 12;

#[test]
fn a_kill_at_any_moment_leaves_no_change_without_its_record() {
    let code = format!(
        "for (let i = 0; i < {WRITES}; i++) await tools.write_file({{path: `f${{i}}.txt`, content: \"x\"}});\nreturn 1;"
    );
    let (mut changed, mut partial) = (0, 0);
    for trial in 0..36 {
        let env = Env::new();
        let script = env.root.join("script.json");
        let turns = json!([{"steps": [{"tool": {"name": "exec", "input": {"code": code}}}, {"text": "done"}]}]);
        std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
        env.write_global_settings(&json!({
            "model": "script",
            "providers": {"scripted": {"script": script}},
            "code_mode": {"enabled": true, "tools": {"write": "allow"}},
        }));
        let (mut s, sid) = start_session(&env, &[]);
        start_turn(&mut s, &sid, "write");
        // The kill is spread over the cell by the nested activities seen, not by time.
        let at = trial % (2 * WRITES);
        let mut seen = 0;
        while seen <= at {
            let f = s.next();
            if f["event"] == "run.finished" {
                break;
            }
            if f["event"] == "activity" && f["data"]["name"] == "write_file" {
                seen += 1;
            }
        }
        s.crash();
        let stored = records(&env, &sid);
        let recorded: Vec<&str> = of(&stored, "code_call")
            .iter()
            .filter_map(|r| r["input"]["path"].as_str())
            .collect();
        let written: Vec<String> = (0..WRITES)
            .map(|i| format!("f{i}.txt"))
            .filter(|f| env.cwd.join(f).exists())
            .collect();
        for f in &written {
            assert!(
                recorded.contains(&f.as_str()),
                "trial {trial}: {f} changed without its record {recorded:?}"
            );
        }
        changed += written.len();
        partial += usize::from(!written.is_empty() && written.len() < WRITES);
    }
    // The loop found changes, and found them mid-cell: it checked something.
    assert!(
        changed > 0 && partial > 0,
        "{changed} changes, {partial} cut mid-cell"
    );
}
