//! Subagents over real pipes (`runner.md` 7): the `task` tool runs the same loop with its own
//! history under `sessions/subagents/`, its own prompt and tools (never `task`), the parent's
//! approvals and cancellation; the parent sees one `subagent` activity and gets the
//! subagent's final text as the call's result.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm, Reply};
use crate::common::{
    cancel_turn, chat_messages, chat_tool_names, error_code, events, fake_llm_env, history_kinds,
    last_tool_result, result, start_session, start_turn, until_finished, Env, Server,
};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

fn task_call(id: &str, input: &Value) -> Reply {
    chat_tool_call(id, "task", &input.to_string())
}

/// Runs one turn of "delegate" in a fresh session of `env`, asserting it completed: the child,
/// the session ID and the turn's frames.
#[track_caller]
fn delegated(env: &Env) -> (Server, String, Vec<Value>) {
    let (mut s, sid) = start_session(env, &[]);
    start_turn(&mut s, &sid, "delegate");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    (s, sid, frames)
}

fn subagent_file(env: &Env, sid: &str, n: u32) -> PathBuf {
    env.home()
        .join("sessions")
        .join("subagents")
        .join(format!("{sid}-{n}.jsonl"))
}

fn records(path: &PathBuf) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The subagent activity of a parent run: exactly one, started then `state`.
fn assert_one_subagent_activity(frames: &[Value], state: &str, summary: &str) {
    let acts = events(frames, "activity");
    assert_eq!(acts.len(), 2, "{acts:#?}");
    for a in &acts {
        assert_eq!(a["data"]["kind"], "subagent", "{a}");
        assert_eq!(a["data"]["name"], "task", "{a}");
    }
    assert_eq!(acts[0]["data"]["state"], "started");
    assert_eq!(acts[0]["data"]["summary"], "general: running");
    assert_eq!(
        acts[0]["data"]["activity_id"],
        acts[1]["data"]["activity_id"]
    );
    assert_eq!(acts[1]["data"]["state"], state);
    assert_eq!(acts[1]["data"]["summary"], summary);
}

#[test]
fn a_general_subagent_runs_its_own_loop_and_its_reply_is_the_task_result() {
    let llm = FakeLlm::start(vec![
        task_call(
            "k1",
            &json!({"description": "read notes", "prompt": "Summarize notes.txt"}),
        ),
        chat_tool_call("r1", "read_file", r#"{"path":"notes.txt"}"#),
        chat_text(&["Notes say ", "hi."]),
        chat_text(&["Done."]),
        // The second turn's subagent gets the next number.
        task_call("k2", &json!({"description": "again", "prompt": "Say ok"})),
        chat_text(&["ok"]),
        chat_text(&["Again done."]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    std::fs::write(env.cwd.join("notes.txt"), "hi there\n").unwrap();
    std::fs::write(env.cwd.join("AGENTS.md"), "Project rule: be brief.\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "Delegate the notes");
    let frames = until_finished(&mut s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{frames:#?}");
    // One subagent activity; none of the subagent's own calls, text or diagnostics.
    assert_one_subagent_activity(&frames, "completed", "general: completed");
    let texts: Vec<&str> = events(&frames, "message.reconcile")
        .iter()
        .map(|f| f["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["Done."]);
    assert!(events(&frames, "message.delta")
        .iter()
        .all(|f| f["data"]["text"] == "Done."));
    assert!(events(&frames, "diagnostic").is_empty());
    assert!(events(&frames, "input.persisted").len() == 1);
    assert!(
        frames
            .iter()
            .filter(|f| f.get("event").is_some())
            .all(|f| f["data"]["run_id"] == run_id.as_str()
                && f["data"]["session_id"] == sid.as_str())
    );

    let parent1 = llm.next(WAIT);
    let names = chat_tool_names(&parent1.body);
    assert!(names.contains(&"task".to_owned()), "{names:?}");
    let sub1 = llm.next(WAIT);
    let names = chat_tool_names(&sub1.body);
    assert!(!names.contains(&"task".to_owned()), "depth 1: {names:?}");
    for t in [
        "read_file",
        "list_dir",
        "grep",
        "write_file",
        "edit_file",
        "shell",
    ] {
        assert!(names.contains(&t.to_owned()), "{t} in {names:?}");
    }
    let msgs = chat_messages(&sub1.body);
    assert_eq!(
        msgs.len(),
        2,
        "system prompt and the task's prompt only: {msgs:#?}"
    );
    let system = msgs[0]["content"].as_str().unwrap();
    assert!(system.contains("You are a subagent"), "{system}");
    assert!(system.contains("Project rule: be brief."), "{system}");
    assert_eq!(
        msgs[1],
        json!({"role": "user", "content": "Summarize notes.txt"})
    );
    let sub2 = llm.next(WAIT);
    let (call, content) = last_tool_result(&sub2.body);
    assert_eq!(call, "r1");
    assert!(content.contains("hi there"), "{content}");
    let parent2 = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&parent2.body),
        ("k1".to_owned(), "Notes say hi.".to_owned())
    );

    // Its own history: `session_meta` with the cwd first, the same record format.
    let recs = records(&subagent_file(&env, &sid, 1));
    assert_eq!(recs[0]["type"], "session_meta");
    assert_eq!(
        recs[0]["cwd"].as_str().unwrap(),
        std::fs::canonicalize(&env.cwd).unwrap().to_str().unwrap()
    );
    let sub_id = format!("{sid}-1");
    assert!(recs.iter().all(|r| r["session_id"] == sub_id.as_str()));
    let types: Vec<&str> = recs.iter().map(|r| r["type"].as_str().unwrap()).collect();
    for t in [
        "user_input",
        "tool_call",
        "tool_result",
        "assistant_message",
        "run_finished",
    ] {
        assert!(types.contains(&t), "{t} in {types:?}");
    }
    assert_eq!(recs.last().unwrap()["outcome"], "completed");
    // The parent's history shows the one activity, not the subagent's.
    let kinds = history_kinds(&mut s, "p", &sid, fin["revision"].as_str().unwrap());
    assert_eq!(kinds, ["user", "activity", "assistant"]);

    start_turn(&mut s, &sid, "Once more");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let recs = records(&subagent_file(&env, &sid, 2));
    assert_eq!(recs[0]["session_id"], format!("{sid}-2"));

    // Never listed, never opened as sessions.
    let list = s.call("l", "session.list", &json!({}));
    let ids: Vec<&str> = result(&list)["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["session_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [sid.as_str()]);
    let open = s.call("o", "session.open", &json!({"session_id": sub_id}));
    assert_eq!(error_code(&open), "session_missing", "{open}");
}

#[test]
fn a_subagent_call_needing_approval_asks_on_the_parent_run() {
    let llm = FakeLlm::start(vec![
        task_call(
            "k1",
            &json!({"description": "write", "prompt": "Write x.txt"}),
        ),
        chat_tool_call("w1", "write_file", r#"{"path":"x.txt","content":"made"}"#),
        chat_text(&["wrote it"]),
        chat_text(&["all done"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"write": "ask"}}));
    let (mut s, sid) = start_session(&env, &["approval.answer"]);
    let run_id = start_turn(&mut s, &sid, "delegate a write");
    let req = loop {
        let f = s.next();
        assert_ne!(f["event"], "run.finished", "{f}");
        if f["event"] == "approval.requested" {
            break f;
        }
    };
    assert_eq!(req["data"]["run_id"], run_id.as_str());
    assert_eq!(req["data"]["session_id"], sid.as_str());
    assert!(req["data"]["summary"]
        .as_str()
        .unwrap()
        .contains("write_file x.txt"));
    let answer = s.call(
        "a",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": req["data"]["approval_id"], "allow": true}),
    );
    assert!(answer.get("result").is_some(), "{answer}");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(
        std::fs::read_to_string(env.cwd.join("x.txt")).unwrap(),
        "made"
    );
    let acts = events(&frames, "activity");
    assert_eq!(acts.len(), 1, "only the subagent's end follows: {acts:#?}");
    assert_eq!(acts[0]["data"]["summary"], "general: completed");
    let _ = (llm.next(WAIT), llm.next(WAIT), llm.next(WAIT));
    let parent2 = llm.next(WAIT);
    assert_eq!(last_tool_result(&parent2.body).1, "wrote it");
}

#[test]
fn cancel_during_a_subagent_step_cancels_it_and_the_run() {
    let llm = FakeLlm::start(vec![
        task_call(
            "k1",
            &json!({"description": "wait", "prompt": "Think long"}),
        ),
        Reply::sse(vec![]).stalled(),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "delegate");
    let _ = llm.next(WAIT);
    let _ = llm.next(WAIT);
    assert!(llm.stalled_within(WAIT), "the subagent's reply went silent");
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert!(took < Duration::from_millis(500), "{took:?}");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "cancelled");
    assert_eq!(fin["persistence"], "durable");
    let acts = events(&frames, "activity");
    assert_eq!(acts.last().unwrap()["data"]["state"], "failed");
    assert_eq!(
        acts.last().unwrap()["data"]["summary"],
        "general: cancelled"
    );
    let recs = records(&subagent_file(&env, &sid, 1));
    assert_eq!(recs.last().unwrap()["type"], "run_finished");
    assert_eq!(recs.last().unwrap()["outcome"], "cancelled");
    assert!(llm.closed_within(Duration::from_secs(2)).is_some());
    // The parent's stored task result is an error.
    let parent =
        std::fs::read_to_string(env.home().join("sessions").join(format!("{sid}.jsonl"))).unwrap();
    let result_line: Value = parent
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["type"] == "tool_result")
        .unwrap();
    assert_eq!(result_line["is_error"], true);
    assert!(result_line["output"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
}

#[test]
fn a_failed_subagent_is_an_error_result_and_the_parent_goes_on() {
    let llm = FakeLlm::start(vec![
        task_call("k1", &json!({"description": "fail", "prompt": "Do it"})),
        Reply::status(401, &json!({"error": {"message": "secret-body"}})),
        chat_text(&["it failed"]),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let (_s, sid, frames) = delegated(&env);
    assert_one_subagent_activity(&frames, "failed", "general: failed (execution_failed)");
    assert!(
        events(&frames, "diagnostic").is_empty(),
        "the subagent's diagnostics stay its own"
    );
    let _ = (llm.next(WAIT), llm.next(WAIT));
    let parent2 = llm.next(WAIT);
    let (call, content) = last_tool_result(&parent2.body);
    assert_eq!(call, "k1");
    assert!(
        content.starts_with("failed (execution_failed)"),
        "{content}"
    );
    assert!(!content.contains("secret-body"));
    let recs = records(&subagent_file(&env, &sid, 1));
    assert_eq!(recs.last().unwrap()["outcome"], "failed");
}

#[test]
fn tools_task_deny_refuses_the_call_without_a_subagent() {
    let llm = FakeLlm::start(vec![
        task_call("k1", &json!({"description": "x", "prompt": "Do it"})),
        chat_text(&["refused then"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"task": "deny"}}));
    let (_s, _sid, frames) = delegated(&env);
    let acts = events(&frames, "activity");
    assert_eq!(acts[1]["data"]["state"], "failed");
    assert_eq!(acts[1]["data"]["kind"], "subagent");
    let _ = llm.next(WAIT);
    let parent2 = llm.next(WAIT);
    assert_eq!(last_tool_result(&parent2.body).1, "denied by policy");
    assert!(!env.home().join("sessions/subagents").exists());
}

#[test]
fn bad_task_input_is_an_error_result() {
    let llm = FakeLlm::start(vec![
        task_call("k1", &json!({"prompt": "no description"})),
        task_call("k2", &json!({"description": "d", "prompt": "  "})),
        task_call(
            "k3",
            &json!({"description": "d", "prompt": "p", "agent": "nobody"}),
        ),
        chat_text(&["gave up"]),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let (_s, sid, frames) = delegated(&env);
    let _ = llm.next(WAIT);
    let r = llm.next(WAIT);
    assert!(last_tool_result(&r.body).1.starts_with("invalid input"));
    let r = llm.next(WAIT);
    assert!(last_tool_result(&r.body).1.starts_with("invalid input"));
    let r = llm.next(WAIT);
    assert_eq!(last_tool_result(&r.body).1, "unknown agent");
    let summaries: Vec<&str> = events(&frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] == "failed")
        .map(|a| a["data"]["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries[2], "nobody: unknown agent");
    assert!(!subagent_file(&env, &sid, 1).exists());
}

fn profile_md(name: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} profile.\n{extra}---\n{body}")
}

#[test]
fn a_profile_subagent_gets_its_tools_body_and_admitted_model_and_refusals_are_errors() {
    let llm = FakeLlm::start(vec![
        task_call(
            "k1",
            &json!({"description": "read", "prompt": "Read it", "agent": "reader"}),
        ),
        // Outside the profile's tools: refused like an unknown tool.
        chat_tool_call("w1", "write_file", r#"{"path":"x.txt","content":"no"}"#),
        chat_text(&["read only"]),
        task_call(
            "k2",
            &json!({"description": "x", "prompt": "p", "agent": "hidden"}),
        ),
        task_call(
            "k3",
            &json!({"description": "x", "prompt": "p", "agent": "nomodel"}),
        ),
        chat_text(&["finished"]),
    ]);
    let env = fake_llm_env(
        &llm,
        &json!({
            "providers": {"catalog": {"enabled": ["local/big", "local/tiny"]}},
            "tools": {"write": "allow"},
            "agents": {"disabled": ["hidden"]},
        }),
    );
    crate::common::write_catalog_cache(&env, "local", json!([{"id": "big"}, {"id": "tiny"}]));
    let agents = env.home().join("agents");
    std::fs::create_dir_all(&agents).unwrap();
    let put = |f: &str, t: String| std::fs::write(agents.join(f), t).unwrap();
    put(
        "reader.md",
        profile_md(
            "reader",
            "tools: [read_file]\nmodel: local/big\n",
            "READER BODY",
        ),
    );
    put("hidden.md", profile_md("hidden", "", "HIDDEN BODY"));
    put(
        "nomodel.md",
        profile_md("nomodel", "model: local/absent\n", "NOMODEL BODY"),
    );
    let (_s, sid, frames) = delegated(&env);
    let summaries: Vec<&str> = events(&frames, "activity")
        .iter()
        .map(|a| a["data"]["summary"].as_str().unwrap())
        .collect();
    assert_eq!(
        summaries,
        [
            "reader: running",
            "reader: completed",
            "hidden: running",
            "hidden: refused: that agent is disabled",
            "nomodel: running",
            "nomodel: the agent's model is not available",
        ]
    );
    assert!(!env.cwd.join("x.txt").exists());

    let parent1 = llm.next(WAIT);
    assert_eq!(parent1.body["model"], "tiny");
    let task = parent1.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "task")
        .unwrap();
    let description = task["function"]["description"].as_str().unwrap();
    assert!(
        description.contains("\n- reader: The reader profile."),
        "{description}"
    );
    assert!(
        description.contains("\n- nomodel: The nomodel profile."),
        "{description}"
    );
    assert!(!description.contains("hidden"), "{description}");
    assert_eq!(
        task["function"]["parameters"]["properties"]["agent"]["enum"],
        json!(["nomodel", "reader"])
    );
    let sub1 = llm.next(WAIT);
    assert_eq!(sub1.body["model"], "big", "the profile's admitted model");
    assert_eq!(chat_tool_names(&sub1.body), ["read_file"]);
    let system = chat_messages(&sub1.body)[0]["content"].as_str().unwrap();
    assert!(
        system.contains("READER BODY") && !system.contains("HIDDEN BODY"),
        "{system}"
    );
    let sub2 = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&sub2.body),
        ("w1".to_owned(), "unknown tool".to_owned())
    );
    let parent2 = llm.next(WAIT);
    assert_eq!(last_tool_result(&parent2.body).1, "read only");
    let parent3 = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&parent3.body).1,
        "refused: that agent is disabled"
    );
    let parent4 = llm.next(WAIT);
    assert_eq!(
        last_tool_result(&parent4.body).1,
        "the agent's model is not available"
    );
    // Only the subagent that ran has a history.
    assert!(subagent_file(&env, &sid, 1).exists());
    assert!(!subagent_file(&env, &sid, 2).exists());
}
