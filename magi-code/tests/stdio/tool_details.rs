//! The `tool.details` extension over real pipes (`docs/extensions/tool-details.md`): the
//! negotiated descriptor, a `tool.output` tail after each tool that ran (at most 8 lines and
//! 2,048 bytes, with the whole output's counts), a `tool.diff` right before a file tool's
//! approval (cut at 16,384 bytes, counts whole), and base clients seeing none of it.

use crate::common::{
    answer_next_approval, events, result, start_session, start_turn, start_with_result,
    until_finished, write_script, Env,
};
use serde_json::{json, Value};

/// One turn: a short shell output, a long one, then a write of `lines` lines that asks.
fn script(env: &Env, lines: usize) {
    let content: String = (0..lines).map(|i| format!("line {i}\n")).collect();
    write_script(
        env,
        json!([{"steps": [
            {"tool": {"name": "shell", "input": {"command": "printf 'one\\ntwo\\n'"}}},
            {"tool": {"name": "shell", "input": {"command": "for i in $(seq 1 100); do printf '%0299d\\n' $i; done"}}},
            {"tool": {"name": "write_file", "input": {"path": "big.txt", "content": content}}},
            {"text": "done"},
        ]}]),
        Some(json!({"shell": "allow", "write": "ask"})),
    );
}

#[test]
fn outputs_have_tails_and_a_write_approval_has_its_diff_first() {
    let env = Env::new();
    script(&env, 20_000);
    let (mut s, init) = start_with_result(&env, &["tool.details", "approval.answer"]);
    assert_eq!(
        init["extensions"],
        json!({"tool.details": {"version": 1, "tail_lines": 8, "tail_bytes": 2048, "diff_bytes": 16384}})
    );
    assert!(init["capabilities"]
        .as_array()
        .unwrap()
        .contains(&json!("tool.details")));
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = start_turn(&mut s, &sid, "go");
    let seen = answer_next_approval(&mut s, &sid, &run_id, false);
    let outputs = events(&seen, "tool.output");
    assert_eq!(outputs.len(), 2, "{seen:#?}");
    // A short output is its own tail.
    let short = &outputs[0]["data"];
    assert_eq!(
        (&short["tail"], &short["lines"], &short["bytes"]),
        (&json!("one\ntwo"), &json!(2), &json!(8))
    );
    // The last activity before each output is its tool's final one.
    let at = |e: &Value| seen.iter().position(|f| f == e).unwrap();
    let ended = &seen[..at(outputs[0])]
        .iter()
        .rev()
        .find(|f| f["event"] == "activity")
        .unwrap()["data"];
    assert_eq!(ended["state"], "completed");
    assert_eq!(ended["activity_id"], short["activity_id"]);
    // A long one: at most 8 lines and 2,048 bytes of its end, and the whole output's counts.
    let long = &outputs[1]["data"];
    let tail = long["tail"].as_str().unwrap();
    assert!(tail.len() <= 2048, "{}", tail.len());
    assert_eq!(
        tail.lines().count(),
        7,
        "six whole lines of 300 bytes and a cut one"
    );
    assert!(tail.ends_with(&format!("{:0299}", 100)), "{tail}");
    assert_eq!(
        (&long["lines"], &long["bytes"]),
        (&json!(100), &json!(30_000))
    );
    // The diff comes right before its approval, names it, and is cut with whole counts.
    let asked = seen.last().unwrap();
    let diff = &seen[seen.len() - 2];
    assert_eq!(diff["event"], "tool.diff", "{seen:#?}");
    let d = &diff["data"];
    assert_eq!(d["approval_id"], asked["data"]["approval_id"]);
    assert_eq!(
        (&d["added"], &d["removed"], &d["truncated"]),
        (&json!(20_000), &json!(0), &json!(true))
    );
    let text = d["diff"].as_str().unwrap();
    assert!(text.len() <= 16_384, "{}", text.len());
    assert!(
        text.starts_with("--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,20000 @@\n+line 0\n"),
        "{text}"
    );
    assert!(
        text.ends_with(" more lines of the diff left out]\n"),
        "{text}"
    );
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    // Denied: nothing written, and a call that did not run has no output event.
    assert!(!env.cwd.join("big.txt").exists());
    assert!(events(&frames, "tool.output").is_empty(), "{frames:#?}");
    s.shutdown_ok("bye");
}

#[test]
fn a_diff_just_within_the_bound_is_whole_and_base_clients_see_nothing() {
    // "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,N @@\n" then "+line i\n" per line: find the
    // largest file whose diff fits 16,384 bytes, and the first that does not.
    let diff_len = |n: usize| {
        let head = format!("--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,{n} @@\n").len();
        head + (0..n).map(|i| format!("+line {i}\n").len()).sum::<usize>()
    };
    let fits = (1..5_000)
        .take_while(|n| diff_len(*n) <= 16_384)
        .last()
        .unwrap();
    for (n, truncated) in [(fits, false), (fits + 1, true)] {
        let env = Env::new();
        script(&env, n);
        let (mut s, sid) = start_session(&env, &["tool.details", "approval.answer"]);
        let run_id = start_turn(&mut s, &sid, "go");
        let seen = answer_next_approval(&mut s, &sid, &run_id, true);
        let d = &events(&seen, "tool.diff")[0]["data"];
        assert_eq!(d["truncated"], truncated, "{n} lines");
        assert_eq!(d["diff"].as_str().unwrap().len() == diff_len(n), !truncated);
        until_finished(&mut s);
        assert!(env.cwd.join("big.txt").exists());
        s.shutdown_ok("bye");
    }
    // Without the capability: no descriptor, no event.
    let env = Env::new();
    script(&env, 3);
    let (mut s, init) = start_with_result(&env, &["approval.answer"]);
    assert!(init.get("extensions").is_none(), "{init}");
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let run_id = start_turn(&mut s, &sid, "go");
    let mut seen = answer_next_approval(&mut s, &sid, &run_id, true);
    seen.extend(until_finished(&mut s));
    for name in ["tool.output", "tool.diff"] {
        assert!(events(&seen, name).is_empty(), "{name}");
    }
    s.shutdown_ok("bye");
}
