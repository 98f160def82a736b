//! Code Mode's nested calls over real pipes (`code-mode.md` 4, 6, 8): reads issued together
//! run at most 4 at once in issue order, refused calls throw their `ToolError` (unreachable
//! ones still show, those past `max_calls` leave nothing), the heap bound, `turn.cancel` during a nested `shell`,
//! and nested `task`, client and MCP calls under their `code_mode.tools` policies.

use crate::client_tools::{answer, start_with_tools};
use crate::code_mode::{code_env, exec, header_ok, tool_result, WAIT};
use crate::common::fake_llm::{chat_text, FakeLlm};
use crate::common::{
    cancel_turn, events, history_entries, is_event, start_session, start_turn, until_finished,
    until_match,
};
use crate::mcp::{fake, mcp_settings, ready_in, session};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// One activity event: its place among the frames, ID, kind, name, state and summary.
#[derive(Debug)]
struct Act {
    at: usize,
    id: String,
    kind: String,
    name: String,
    state: String,
    summary: String,
}

/// Every `activity` event of `frames`, in order.
fn acts(frames: &[Value]) -> Vec<Act> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    frames
        .iter()
        .enumerate()
        .filter(|(_, f)| f["event"] == "activity")
        .map(|(at, f)| {
            let d = &f["data"];
            Act {
                at,
                id: s(&d["activity_id"]),
                kind: s(&d["kind"]),
                name: s(&d["name"]),
                state: s(&d["state"]),
                summary: s(&d["summary"]),
            }
        })
        .collect()
}

/// The nested calls' activities: one `(started, final)` pair per call, in the order they
/// started; each summary starts `code: ` and the final one comes after the `started` one.
fn nested(frames: &[Value]) -> Vec<(Act, Act)> {
    let all = acts(frames);
    let exec_start = all
        .iter()
        .find(|a| a.name == "exec" && a.summary.starts_with("exec: "))
        .map(|a| a.at)
        .expect("an exec activity");
    let exec_end = all
        .iter()
        .rfind(|a| a.name == "exec" && a.summary.starts_with("exec: "))
        .map(|a| a.at)
        .unwrap();
    let mut pairs = Vec::new();
    let mut rest: Vec<Act> = Vec::new();
    for a in all.into_iter().filter(|a| a.summary.starts_with("code: ")) {
        assert!(
            exec_start < a.at && a.at < exec_end,
            "between exec's entries: {a:?}"
        );
        if a.state == "started" {
            rest.push(a);
        } else {
            let i = rest
                .iter()
                .position(|s| s.id == a.id)
                .unwrap_or_else(|| panic!("a final entry without its start: {a:?}"));
            pairs.push((i, a));
        }
    }
    // Pair each start with its final entry, kept in start order.
    let mut out: Vec<(Act, Option<Act>)> = rest.into_iter().map(|s| (s, None)).collect();
    for (i, a) in pairs {
        assert!(out[i].1.is_none(), "two final entries: {a:?}");
        out[i].1 = Some(a);
    }
    out.into_iter()
        .map(|(s, f)| {
            let f = f.unwrap_or_else(|| panic!("no final entry: {s:?}"));
            (s, f)
        })
        .collect()
}

/// The final `exec` activity of `frames`.
fn exec_end(frames: &[Value]) -> Act {
    acts(frames)
        .into_iter()
        .rfind(|a| a.name == "exec" && a.summary.starts_with("exec: "))
        .expect("an exec activity")
}

#[test]
fn reads_issued_together_run_at_most_four_at_once_in_issue_order() {
    let code = "const r = await Promise.all([\"a\",\"b\",\"c\",\"d\",\"e\"]\
                .map(p => tools.read_file({path: p + \".txt\"})));\nreturn r.length;";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(&llm, &json!({}));
    for p in ["a", "b", "c", "d", "e"] {
        std::fs::write(env.cwd.join(format!("{p}.txt")), p).unwrap();
    }
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "read five");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 5);
    assert!(text.ends_with("\n5"), "{text}");

    let calls = nested(&frames);
    let started: Vec<&str> = calls.iter().map(|(s, _)| s.summary.as_str()).collect();
    assert_eq!(
        started,
        [
            "code: read_file a.txt",
            "code: read_file b.txt",
            "code: read_file c.txt",
            "code: read_file d.txt",
            "code: read_file e.txt",
        ],
        "issue order"
    );
    for (s, f) in &calls {
        assert_eq!((s.kind.as_str(), s.name.as_str()), ("tool", "read_file"));
        assert_eq!(f.state, "completed", "{f:?}");
    }
    // The first four are all in flight before any of them ends; never more than four.
    let first_end = calls[..4].iter().map(|(_, f)| f.at).min().unwrap();
    assert!(
        calls[..4].iter().all(|(s, _)| s.at < first_end),
        "{calls:#?}"
    );
    assert!(calls[4].0.at > first_end, "a fifth at once: {calls:#?}");
    let mut marks: Vec<(usize, i32)> = calls
        .iter()
        .flat_map(|(s, f)| [(s.at, 1), (f.at, -1)])
        .collect();
    marks.sort_unstable();
    let most = marks
        .iter()
        .scan(0, |n, (_, d)| {
            *n += d;
            Some(*n)
        })
        .max();
    assert_eq!(most, Some(4), "{calls:#?}");
}

#[test]
fn unreachable_calls_show_failed_and_calls_past_max_calls_throw_unrecorded() {
    let catch = |call: &str| {
        format!(
            "try {{ await {call}; return \"ran\"; }} \
             catch (e) {{ return [e instanceof ToolError, e.name, e.code, e.message.length > 0]; }}"
        )
    };
    let past = "await tools.read_file({path: \"a.txt\"});\n".to_owned()
        + &catch("tools.read_file({path: \"a.txt\"})");
    let llm = FakeLlm::start(vec![
        exec("c1", &catch("tools.nope({})")),
        exec("c2", &catch("tools.exec({code: \"1\"})")),
        exec("c3", &past),
        chat_text(&["ok"]),
    ]);
    let env = code_env(&llm, &json!({"code_mode": {"max_calls": 1}}));
    std::fs::write(env.cwd.join("a.txt"), "alpha\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "call what is not there");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let unknown = tool_result(&llm.next(WAIT), "c1");
    header_ok(&unknown, "exec completed", 1);
    assert!(
        unknown.ends_with(r#"[true,"ToolError","unknown_tool",true]"#),
        "{unknown}"
    );
    let exec_itself = tool_result(&llm.next(WAIT), "c2");
    header_ok(&exec_itself, "exec completed", 1);
    assert!(
        exec_itself.ends_with(r#"[true,"ToolError","unknown_tool",true]"#),
        "{exec_itself}"
    );
    // Past `max_calls` (decisions.md 52): N counts the one call recorded, the refused one is
    // said in the body and leaves no record and no activity.
    let limit = tool_result(&llm.next(WAIT), "c3");
    header_ok(&limit, "exec completed", 1);
    assert_eq!(
        limit.lines().skip(2).collect::<Vec<_>>(),
        [
            "1 calls refused past max_calls",
            r#"[true,"ToolError","limit",true]"#
        ],
        "{limit}"
    );
    let file = crate::common::sessions_dir(&env).join(format!("{sid}.jsonl"));
    let records: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |ty: &str| -> Vec<(String, u64)> {
        records
            .iter()
            .filter(|r| r["type"] == ty)
            .map(|r| {
                (
                    r["call_id"].as_str().unwrap().to_owned(),
                    r["seq"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let each = ["c1", "c2", "c3"].map(|c| (c.to_owned(), 0));
    assert_eq!(of("code_call"), each);
    assert_eq!(of("code_result"), each);

    // Each cell's activities: its refused call shows with a `code: ` summary, ending failed.
    let cells: Vec<&[Value]> = frames
        .split_inclusive(|f| {
            f["event"] == "activity"
                && f["data"]["name"] == "exec"
                && f["data"]["summary"]
                    .as_str()
                    .is_some_and(|s| s.starts_with("exec: "))
                && f["data"]["state"] != "started"
        })
        .take(3)
        .collect();
    let states = |frames: &[Value]| -> Vec<(String, String)> {
        nested(frames)
            .into_iter()
            .map(|(s, f)| (s.name, f.state))
            .collect()
    };
    assert_eq!(states(cells[0]), [("nope".to_owned(), "failed".to_owned())]);
    assert_eq!(states(cells[1]), [("exec".to_owned(), "failed".to_owned())]);
    assert_eq!(
        states(cells[2]),
        [("read_file".to_owned(), "completed".to_owned())]
    );
    for cell in &cells {
        assert_eq!(exec_end(cell).state, "completed");
    }
    // History projects each nested call's `code_call` as its activity entry, after its exec.
    let rev = frames.last().unwrap()["data"]["revision"].as_str().unwrap();
    let entries = history_entries(&mut s, "h", &sid, rev);
    let shown: Vec<(&str, bool)> = entries
        .iter()
        .filter(|e| e["kind"] == "activity")
        .map(|e| {
            let t = e["text"].as_str().unwrap();
            let (head, summary) = t.split_once(" — ").unwrap_or((t, ""));
            (head, summary.starts_with("code: "))
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("exec: completed", false),
            ("nope: failed", true),
            ("exec: completed", false),
            ("exec: failed", true),
            ("exec: completed", false),
            ("read_file: completed", true),
        ]
    );
    s.shutdown_ok("bye");
}

#[test]
fn an_allocation_bomb_runs_out_of_memory_and_the_next_exec_works() {
    let bomb = "const a = [];\nwhile (true) a.push(\"x\".repeat(1 << 20));";
    let llm = FakeLlm::start(vec![
        exec("c1", bomb),
        exec("c2", "return 6 * 7;"),
        chat_text(&["ok"]),
    ]);
    let env = code_env(&llm, &json!({"code_mode": {"memory_mib": 16}}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "allocate");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let oom = tool_result(&llm.next(WAIT), "c1");
    header_ok(&oom, "exec ran out of memory", 0);
    let next = tool_result(&llm.next(WAIT), "c2");
    header_ok(&next, "exec completed", 0);
    assert!(next.ends_with("\n42"), "{next}");
    let ends: Vec<(String, String)> = acts(&frames)
        .into_iter()
        .filter(|a| a.name == "exec" && a.state != "started")
        .map(|a| (a.summary, a.state))
        .collect();
    assert_eq!(
        ends,
        [
            ("exec: 2 lines".to_owned(), "failed".to_owned()),
            ("exec: 1 line".to_owned(), "completed".to_owned()),
        ]
    );
}

/// Processes whose command line is exactly `argv` (from /proc).
fn processes(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c == want))
        .filter(|p| crate::code_mode::alive(*p))
        .collect()
}

#[test]
fn cancel_during_a_nested_shell_call_ends_the_step_within_500_ms() {
    // A duration no other test sleeps, to find this call's process.
    let sleep = ["sleep", "29.37"];
    let code = format!(
        "await tools.shell({{command: \"{}\"}});\nreturn 1;",
        sleep.join(" ")
    );
    let llm = FakeLlm::start(vec![exec("c1", &code), chat_text(&["after"])]);
    let env = code_env(&llm, &json!({"code_mode": {"tools": {"shell": "allow"}}}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "sleep");
    until_match(&mut s, |f| {
        f["event"] == "activity" && f["data"]["name"] == "shell" && f["data"]["state"] == "started"
    });
    // The call runs: its process is there before the cancel.
    let t0 = Instant::now();
    while processes(&sleep).is_empty() {
        assert!(t0.elapsed() < WAIT, "the nested shell never ran");
        std::thread::yield_now();
    }
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert!(took < Duration::from_millis(500), "{took:?}");
    let shell = acts(&frames)
        .into_iter()
        .rfind(|a| a.name == "shell")
        .expect("the nested shell's final entry");
    assert_eq!(shell.state, "failed", "{shell:?}");
    assert!(shell.summary.starts_with("code: "), "{shell:?}");
    assert_eq!(exec_end(&frames).state, "failed");
    assert!(
        processes(&sleep).is_empty(),
        "the nested shell's process outlived the cancel"
    );
    // The stored `tool_result` is `exec cancelled`: the next turn replays it to the model.
    start_turn(&mut s, &sid, "again");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec cancelled", 1);
    s.shutdown_ok("bye");
}

#[test]
fn a_nested_task_call_is_a_subagent_activity() {
    let code = "return await tools.task({description: \"sub\", prompt: \"Say ok\"});";
    let llm = FakeLlm::start(vec![
        exec("c1", code),
        chat_text(&["sub says ok"]),
        chat_text(&["done"]),
    ]);
    let env = code_env(&llm, &json!({"code_mode": {"tools": {"task": "allow"}}}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "delegate from code");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let calls = nested(&frames);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let (started, fin) = &calls[0];
    for a in [started, fin] {
        assert_eq!((a.kind.as_str(), a.name.as_str()), ("subagent", "task"));
    }
    assert_eq!(fin.state, "completed", "{fin:?}");
    drop(llm.next(WAIT));
    let sub = llm.next(WAIT);
    assert!(
        sub.body["messages"].to_string().contains("Say ok"),
        "the subagent gets the prompt: {}",
        sub.body
    );
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(text.contains("sub says ok"), "{text}");
}

#[test]
fn a_nested_client_tool_call_goes_to_the_client_and_its_output_to_the_code() {
    let code = "const t = await tools.open_tab({url: \"https://example.com\"});\n\
                return t.toUpperCase();";
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["opened"])]);
    let env = code_env(&llm, &json!({"code_mode": {"tools": {"client": "allow"}}}));
    let (mut s, _, sid) = start_with_tools(&env);
    let run_id = start_turn(&mut s, &sid, "open from code");
    let (call, seen) = until_match(&mut s, is_event("client.tool.call"));
    assert!(
        !seen.iter().any(|f| f["event"] == "approval.requested"),
        "code_mode.tools.client allow asks nothing"
    );
    assert_eq!(call["data"]["name"], "open_tab");
    assert_eq!(call["data"]["input"], json!({"url": "https://example.com"}));
    let call_id = call["data"]["call_id"].as_str().unwrap();
    s.request(
        "a1",
        "client.tool.result",
        &answer(&sid, &run_id, call_id, true, "tab 3 opened"),
    );
    let mut frames = seen;
    frames.push(call.clone());
    frames.extend(until_finished(&mut s));
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let calls = nested(&frames);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0].0.name, "open_tab");
    assert_eq!(calls[0].1.state, "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(text.ends_with("\n\"TAB 3 OPENED\""), "{text}");
    s.shutdown_ok("bye");
}

#[test]
fn a_nested_mcp_call_runs_under_its_code_policy_and_asks_with_a_code_summary() {
    let code = "return await tools.mcp__fake__echo({text: \"hi\"});";
    let def = fake("ok");
    let mcp = mcp_settings(&[("fake", &def)], true);

    // `allow`: the code gets the server's output.
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(
        &llm,
        &json!({"mcp": mcp, "code_mode": {"tools": {"mcp": "allow"}}}),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "echo from code");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert!(events(&frames, "approval.requested").is_empty());
    let calls = nested(&frames);
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0].0.name, "mcp__fake__echo");
    assert_eq!(calls[0].1.state, "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(
        text.ends_with(r#""echo: hi\n[image content omitted]""#),
        "{text}"
    );
    s.shutdown_ok("bye");

    // `ask` (also the default): an approval whose summary starts `code: `.
    let llm = FakeLlm::start(vec![exec("c1", code), chat_text(&["ok"])]);
    let env = code_env(
        &llm,
        &json!({"mcp": mcp, "code_mode": {"tools": {"mcp": "ask"}}}),
    );
    let (mut s, _) = ready_in(&env);
    let sid = session(&mut s);
    let run_id = start_turn(&mut s, &sid, "echo from code");
    let (req, _) = until_match(&mut s, is_event("approval.requested"));
    let summary = req["data"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("code: mcp__fake__echo"), "{summary}");
    let approval_id = req["data"]["approval_id"].as_str().unwrap();
    s.request(
        "a1",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": approval_id, "allow": true}),
    );
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = tool_result(&llm.next(WAIT), "c1");
    header_ok(&text, "exec completed", 1);
    assert!(text.contains("echo: hi"), "{text}");
    s.shutdown_ok("bye");
}
