//! The agent loop over real pipes against a fake Chat Completions server (`runner.md` 2, 5):
//! tool calls answered and sent back, error results the model can recover from, retries with
//! `retry-after`, failure diagnostics, and cancellation of a silent stream within 500 ms.

use crate::common::fake_llm::{chat_delta, chat_finish, chat_text, chat_tool_call, FakeLlm, Reply};
use crate::common::{
    cancel_turn, diagnostic_codes, events, fake_llm_env, history_kinds, last_message, reconciled,
    result, start_session, start_turn, until_finished, Env,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const WAIT: Duration = crate::common::STEP;

#[test]
fn a_tool_call_is_run_and_its_result_sent_back() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("call_A", "read_file", r#"{"path":"notes.txt"}"#),
        chat_text(&["The file ", "says hi."]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    std::fs::write(env.cwd.join("notes.txt"), "hi there\n").unwrap();
    std::fs::write(env.cwd.join("AGENTS.md"), "Always answer in haiku.\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "What do my notes say?");
    let frames = until_finished(&mut s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "completed", "{frames:#?}");
    let acts = events(&frames, "activity");
    assert_eq!(acts.len(), 2);
    assert_eq!(acts[0]["data"]["state"], "started");
    assert_eq!(acts[1]["data"]["state"], "completed");
    assert_eq!(acts[1]["data"]["name"], "read_file");
    assert_eq!(reconciled(&frames), "The file says hi.");

    let first = llm.next(WAIT);
    assert_eq!(first.path, "/v1/chat/completions");
    assert!(first
        .headers
        .iter()
        .any(|(k, v)| k == "accept" && v == "text/event-stream"));
    let msgs = first.body["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["role"], "system");
    assert!(
        msgs[0]["content"]
            .as_str()
            .unwrap()
            .contains("Always answer in haiku."),
        "AGENTS.md of the cwd is in the system prompt"
    );
    assert_eq!(
        msgs.last().unwrap(),
        &json!({"role": "user", "content": "What do my notes say?"})
    );
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"shell"),
        "{names:?}"
    );
    let second = llm.next(WAIT);
    let msgs = second.body["messages"].as_array().unwrap();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["role"], "assistant");
    assert_eq!(msgs[n - 2]["tool_calls"][0]["id"], "call_A");
    assert_eq!(
        msgs[n - 2]["tool_calls"][0]["function"]["name"],
        "read_file"
    );
    assert_eq!(msgs[n - 1]["role"], "tool");
    assert_eq!(msgs[n - 1]["tool_call_id"], "call_A");
    assert!(msgs[n - 1]["content"]
        .as_str()
        .unwrap()
        .contains("hi there"));

    let rev = fin["revision"].as_str().unwrap();
    let kinds = history_kinds(&mut s, "p", &sid, rev);
    assert_eq!(kinds, ["user", "activity", "assistant"]);
}

#[test]
fn an_unknown_tool_and_bad_input_are_error_results_and_the_loop_goes_on() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "no_such_tool", "{}"),
        chat_tool_call("c2", "read_file", "{not json"),
        chat_text(&["ok"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "try things");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let failed = events(&frames, "activity")
        .iter()
        .filter(|a| a["data"]["state"] == "failed")
        .count();
    assert_eq!(failed, 2);
    let _ = llm.next(WAIT);
    let second = llm.next(WAIT);
    let msgs = second.body["messages"].as_array().unwrap();
    assert_eq!(msgs.last().unwrap()["tool_call_id"], "c1");
    assert!(msgs.last().unwrap()["content"]
        .as_str()
        .unwrap()
        .contains("unknown tool"));
    let third = llm.next(WAIT);
    let msgs = third.body["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    assert_eq!(last["tool_call_id"], "c2");
    assert!(last["content"].as_str().unwrap().contains("invalid input"));
    // The raw arguments go back as the model sent them.
    assert_eq!(
        msgs[msgs.len() - 2]["tool_calls"][0]["function"]["arguments"],
        "{not json"
    );
}

#[test]
fn a_denied_approval_is_an_error_result_not_a_failed_run() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("w1", "write_file", r#"{"path":"x.txt","content":"x"}"#),
        chat_text(&["understood"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"write": "ask"}}));
    let (mut s, sid) = start_session(&env, &["approval.answer"]);
    let run_id = start_turn(&mut s, &sid, "write x");
    let req = loop {
        let f = s.next();
        if f["event"] == "approval.requested" {
            break f;
        }
    };
    let answer = s.call(
        "a",
        "approval.answer",
        &json!({"session_id": sid, "run_id": run_id, "approval_id": req["data"]["approval_id"], "allow": false}),
    );
    assert_eq!(result(&answer)["recorded"], true);
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert!(!env.cwd.join("x.txt").exists());
    let _ = llm.next(WAIT);
    let second = llm.next(WAIT);
    let last = last_message(&second.body);
    assert_eq!(last["tool_call_id"], "w1");
    assert!(last["content"]
        .as_str()
        .unwrap()
        .contains("denied by the user"));
}

#[test]
fn retry_after_is_honoured_and_announced() {
    // `retry-after: 0` waits 0 ms where the backoff would wait 400-600 ms: the announced wait
    // shows which was used without waiting for either (the 60 s cap and the backoff schedule
    // are `providers::http::tests`, on virtual time).
    let llm = FakeLlm::start(vec![
        Reply::status(429, &json!({"error": {"message": "slow down"}})).header("retry-after", "0"),
        chat_text(&["fine"]),
    ]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hello");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let retries = events(&frames, "diagnostic");
    assert_eq!(retries.len(), 1, "{retries:#?}");
    assert_eq!(retries[0]["data"]["code"], "provider_retry");
    assert_eq!(
        retries[0]["data"]["summary"],
        "retrying the provider request in 0 ms (retry 1 of 4)"
    );
    let _ = (llm.next(WAIT), llm.next(WAIT));
    assert_eq!(reconciled(&frames), "fine");
}

#[test]
fn failures_say_which_and_are_not_retried_when_final() {
    for (reply, code, requests) in [
        (
            Reply::status(401, &json!({"error": {"message": "bad key sk-secret"}})),
            "provider_auth",
            1,
        ),
        (
            Reply::status(404, &json!({"error": {"message": "no route"}})),
            "provider_status",
            1,
        ),
        // A context overflow compacts and retries once: see `compaction.rs`.
    ] {
        let llm = FakeLlm::start(vec![reply]);
        let env = fake_llm_env(&llm, &json!({}));
        let (mut s, sid) = start_session(&env, &[]);
        start_turn(&mut s, &sid, "hello");
        let frames = until_finished(&mut s);
        let fin = &frames.last().unwrap()["data"];
        assert_eq!(fin["outcome"], "failed");
        assert_eq!(fin["error_code"], "execution_failed");
        assert_eq!(diagnostic_codes(&frames), [code]);
        assert!(!frames.iter().any(|f| f.to_string().contains("sk-secret")));
        // A retry is part of the step: every request was made before `run.finished` (the
        // schedule itself is `providers::http::tests`, on virtual time).
        assert_eq!(llm.drain().len(), requests, "{code}: not retried");
    }
}

#[test]
fn a_stream_broken_after_its_first_event_keeps_the_partial_reply() {
    let mut reply = chat_text(&["partial "]);
    reply.chunks.truncate(1);
    reply.cut = true;
    let llm = FakeLlm::start(vec![reply]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hello");
    let frames = until_finished(&mut s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["persistence"], "durable");
    let rec = events(&frames, "message.reconcile");
    assert_eq!(rec.last().unwrap()["data"]["partial"], true);
    assert_eq!(reconciled(&frames), "partial ");
    assert_eq!(diagnostic_codes(&frames), ["provider_stream_invalid"]);
}

#[test]
fn cancel_during_a_silent_stream_ends_within_500_ms() {
    let llm = FakeLlm::start(vec![Reply::sse(vec![]).stalled()]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "hello");
    let _ = llm.next(WAIT);
    assert!(llm.stalled_within(WAIT), "the reply went silent");
    let (frames, took) = cancel_turn(&mut s, &sid, &run_id);
    assert!(took < Duration::from_millis(500), "{took:?}");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "cancelled");
    assert_eq!(fin["persistence"], "durable");
    assert!(diagnostic_codes(&frames).is_empty());
    let closed = llm.closed_within(Duration::from_secs(2));
    assert!(closed.is_some(), "the connection was closed");
}

#[test]
fn shutdown_during_a_silent_stream_finishes_the_run_and_exits_0() {
    let llm = FakeLlm::start(vec![Reply::sse(vec![]).stalled()]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hello");
    let _ = llm.next(WAIT);
    let t0 = Instant::now();
    s.request("bye", "shutdown", &json!({}));
    let frames = s.frames_until_eof();
    let fin = frames
        .iter()
        .find(|f| f["event"] == "run.finished")
        .expect("run.finished before exit");
    assert_eq!(fin["data"]["outcome"], "cancelled");
    assert_eq!(s.exit_code(), 0);
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
}

#[test]
fn a_crash_mid_loop_leaves_a_history_that_replays_as_a_valid_conversation() {
    // Child A (scripted) runs a tool step, which is durable, then sleeps in its next step;
    // it is killed with SIGKILL there. Child B, on a Chat provider, reopens the session.
    let env = Env::new();
    std::fs::write(env.cwd.join("n.txt"), "note\n").unwrap();
    crate::common::write_script(
        &env,
        json!([{"steps": [
            {"tool": {"name": "read_file", "input": {"path": "n.txt"}}},
            {"sleep_ms": 30000},
            {"text": "never"},
        ]}]),
        Some(json!({"read": "allow"})),
    );
    let (mut a, sid) = start_session(&env, &[]);
    start_turn(&mut a, &sid, "read my note");
    loop {
        let f = a.next();
        if f["event"] == "activity" && f["data"]["state"] == "completed" {
            break;
        }
    }
    // The step's records are appended before the next step starts: wait until they are on disk
    // (bounded), so the kill lands in the second step whatever the machine's load.
    let file = crate::common::sessions_dir(&env).join(format!("{sid}.jsonl"));
    crate::common::poll::until(
        Duration::from_secs(10),
        "the tool step was never appended",
        || std::fs::read_to_string(&file).is_ok_and(|t| t.contains("\"tool_result\"")),
    );
    a.crash();

    let llm = FakeLlm::start(vec![chat_text(&["recovered"])]);
    env.use_fake_llm(&llm, &json!({}));
    let mut b = env.spawn();
    let _ = b.call("init", "initialize", &crate::common::init_params(&[]));
    let open = b.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(result(&open)["durable"], true, "{open}");
    start_turn(&mut b, &sid, "go on");
    let frames = until_finished(&mut b);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let req = llm.next(WAIT);
    let msgs = req.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{msgs:#?}"
    );
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["name"], "read_file");
    assert_eq!(msgs[3]["tool_call_id"], msgs[2]["tool_calls"][0]["id"]);
    assert!(msgs[3]["content"].as_str().unwrap().contains("note"));
    assert!(msgs[4]["content"].as_str().unwrap().contains("interrupted"));
    assert_eq!(msgs[5]["content"], "go on");
}

#[test]
fn a_call_cancelled_while_awaiting_approval_replays_with_its_error_result() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("s1", "shell", r#"{"command":"echo hi"}"#),
        chat_text(&["next turn"]),
    ]);
    let env = fake_llm_env(&llm, &json!({"tools": {"shell": "ask"}}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "run it");
    loop {
        if s.next()["event"] == "approval.requested" {
            break;
        }
    }
    s.request(
        "x",
        "turn.cancel",
        &json!({"session_id": sid, "run_id": run_id}),
    );
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "cancelled");
    assert_eq!(frames.last().unwrap()["data"]["persistence"], "durable");
    let _ = llm.next(WAIT);
    start_turn(&mut s, &sid, "again");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let req = llm.next(WAIT);
    let msgs = req.body["messages"].as_array().unwrap();
    let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "assistant", "user"],
        "{msgs:#?}"
    );
    assert_eq!(msgs[3]["tool_call_id"], "s1");
    assert!(msgs[3]["content"].as_str().unwrap().contains("cancelled"));
    assert!(msgs[4]["content"].as_str().unwrap().contains("cancelled"));
}

#[test]
fn the_step_bound_ends_a_runaway_loop() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("a", "list_dir", r#"{"path":"."}"#),
        chat_tool_call("b", "list_dir", r#"{"path":"."}"#),
        chat_tool_call("c", "list_dir", r#"{"path":"."}"#),
    ]);
    let env = Env::new();
    env.use_fake_llm(
        &llm,
        &json!({"runner": {"max_steps": 2}, "tools": {"read": "allow"}}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "loop");
    let frames = until_finished(&mut s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(diagnostic_codes(&frames), ["step_limit"]);
    assert_eq!(
        events(&frames, "activity").len(),
        4,
        "two steps ran their calls"
    );
    let _ = (llm.next(WAIT), llm.next(WAIT));
    // Every request of the run was made before `run.finished`.
    assert!(llm.drain().is_empty(), "no third request");
}

#[test]
fn parallel_read_calls_are_all_answered_in_the_models_order() {
    let calls = Reply::sse(vec![
        chat_delta(
            &json!({"tool_calls": [{"index": 0, "id": "p0", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"f0.txt\"}"}}]}),
        ),
        chat_delta(
            &json!({"tool_calls": [{"index": 1, "id": "p1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"f1.txt\"}"}}]}),
        ),
        chat_delta(
            &json!({"tool_calls": [{"index": 2, "id": "p2", "type": "function", "function": {"name": "grep", "arguments": "{\"pattern\":\"two\"}"}}]}),
        ),
        chat_finish("tool_calls"),
        "data: [DONE]\n\n".to_owned(),
    ]);
    let llm = FakeLlm::start(vec![calls, chat_text(&["read them"])]);
    let env = fake_llm_env(&llm, &json!({"tools": {"read": "allow"}}));
    std::fs::write(env.cwd.join("f0.txt"), "zero\n").unwrap();
    std::fs::write(env.cwd.join("f1.txt"), "one two\n").unwrap();
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "read all");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let states: Vec<String> = events(&frames, "activity")
        .iter()
        .map(|a| {
            format!(
                "{}:{}",
                a["data"]["name"].as_str().unwrap(),
                a["data"]["state"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(states.len(), 6);
    assert!(
        states[..3].iter().all(|s| s.ends_with(":started")),
        "{states:?}"
    );
    assert!(
        states[3..].iter().all(|s| s.ends_with(":completed")),
        "{states:?}"
    );
    let _ = llm.next(WAIT);
    let second = llm.next(WAIT);
    let msgs = second.body["messages"].as_array().unwrap();
    let tools: Vec<&Value> = msgs.iter().filter(|m| m["role"] == "tool").collect();
    let ids: Vec<&str> = tools
        .iter()
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p0", "p1", "p2"]);
    assert!(tools[0]["content"].as_str().unwrap().contains("zero"));
    assert!(tools[1]["content"].as_str().unwrap().contains("one two"));
    assert!(tools[2]["content"].as_str().unwrap().contains("f1.txt"));
}

#[test]
fn an_unreachable_provider_is_retried_then_reported() {
    // Four retryable answers that ask for no wait, then a port closed: the fifth connect is
    // refused. The real pipes carry every retry and the final report, and no backoff is waited
    // for: the schedule of a connect failure (0.5 + 1 + 2 + 4 s, ±20%) and its retries are
    // `providers::http::tests::the_retry_schedule_on_a_virtual_clock` and
    // `a_refused_connect_is_retried_then_unreachable_on_a_virtual_clock`.
    let busy =
        Reply::status(503, &json!({"error": {"message": "busy"}})).header("retry-after", "0");
    let llm = FakeLlm::then_refusing(vec![busy; 4]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hello");
    let frames = until_finished(&mut s);
    assert_eq!(
        diagnostic_codes(&frames),
        [
            "provider_retry",
            "provider_retry",
            "provider_retry",
            "provider_retry",
            "provider_unreachable"
        ]
    );
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(llm.drain().len(), 4, "the fifth attempt reached nothing");
}

#[test]
fn a_configured_provider_with_wire_api_responses_speaks_responses() {
    let done = format!(
        "event: response.completed\ndata: {}\n\n",
        json!({"type": "response.completed", "response": {"id": "r", "status": "completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 1}}})
    );
    let delta = format!(
        "event: response.output_text.delta\ndata: {}\n\n",
        json!({"type": "response.output_text.delta", "item_id": "m", "output_index": 0, "content_index": 0, "delta": "via responses"})
    );
    let llm = FakeLlm::start(vec![Reply::sse(vec![delta, done])]);
    let env = Env::new();
    env.use_fake_llm(
        &llm,
        &json!({"providers": {"local": {"wire_api": "responses"}}}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "hello");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(reconciled(&frames), "via responses");
    let req = llm.next(WAIT);
    assert_eq!(req.path, "/v1/responses");
    assert_eq!(req.body["store"], false);
}

#[test]
fn the_run_activities_bound_refuses_the_4097th_call_and_ends_the_run() {
    // 32 steps of 128 parallel calls reach exactly 4,096 activities; the 33rd step's call is
    // the first past the bound.
    let step = |n: usize, first: usize| {
        let mut chunks: Vec<String> = (0..n)
            .map(|i| {
                // Alternate two spellings of the folder, so no call repeats the one before it.
                let args = if i % 2 == 0 { r#"{"path":"."}"# } else { r#"{"path":"./"}"# };
                chat_delta(&json!({"tool_calls": [{"index": i, "id": format!("c{}", first + i), "type": "function", "function": {"name": "list_dir", "arguments": args}}]}))
            })
            .collect();
        chunks.push(chat_finish("tool_calls"));
        chunks.push("data: [DONE]\n\n".to_owned());
        Reply::sse(chunks)
    };
    let mut replies: Vec<Reply> = (0..32).map(|k| step(128, k * 128)).collect();
    replies.push(step(1, 4096));
    let llm = FakeLlm::start(replies);
    let env = Env::new();
    env.use_fake_llm(
        &llm,
        // The largest window: 4,096 results must not compact the turn.
        &json!({"tools": {"read": "allow"}, "runner": {"context_window": 10_000_000}}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "list a lot");
    let mut started = 0usize;
    let fin = loop {
        let f = s.next();
        if f["event"] == "activity" && f["data"]["state"] == "started" {
            started += 1;
        }
        if f["event"] == "run.finished" {
            break f;
        }
    };
    assert_eq!(
        started, 4_096,
        "the 4,096th activity is emitted, the 4,097th is not"
    );
    assert_eq!(fin["data"]["outcome"], "failed");
    assert_eq!(fin["data"]["error_code"], "content_limit");
}

/// `runner.md` 1: a Chat stream that ends (`[DONE]`) without any `finish_reason` was cut short.
/// Having said nothing (llama-cpp-python's role chunk, then `[DONE]`) it is an empty answer and
/// is retried; having said something, the step fails `provider_stream_invalid` and the partial
/// reply is kept.
#[test]
fn a_chat_stream_cut_short_is_retried_when_empty_and_fails_when_not() {
    let done = "data: [DONE]\n\n".to_owned();
    let role_only = Reply::sse(vec![
        chat_delta(&json!({"role": "assistant"})),
        done.clone(),
    ]);
    let llm = FakeLlm::start(vec![role_only, chat_text(&["after the retry"])]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "go");
    let frames = until_finished(&mut s);
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    assert_eq!(diagnostic_codes(&frames), ["provider_retry"]);
    assert_eq!(reconciled(&frames), "after the retry");
    s.shutdown_ok("bye");

    let partial = Reply::sse(vec![chat_delta(&json!({"content": "half a rep"})), done]);
    let llm = FakeLlm::start(vec![partial]);
    let env = fake_llm_env(&llm, &json!({}));
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "go");
    let frames = until_finished(&mut s);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed", "{frames:#?}");
    assert_eq!(diagnostic_codes(&frames), ["provider_stream_invalid"]);
    assert_eq!(reconciled(&frames), "half a rep");
    s.shutdown_ok("bye");
}
