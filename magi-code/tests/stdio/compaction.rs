//! Auto-compaction over real pipes against a fake Chat Completions server (`runner.md` 7): the
//! trigger by reported usage, the summary request, the `compaction` record, activity and
//! history entry, the compacted replay (mid-task), no second compaction right after, a trimmed
//! summary request, the overflow retry, a twice-compacted session reopened in a new child, and
//! the usage trigger on the Anthropic Messages and Responses wires.

use crate::common::fake_llm::{chat_text, chat_tool_call, chat_with_usage, FakeLlm, Reply};
use crate::common::{
    chat_messages, diagnostic_codes, events, fake_llm_settings, history_entries, meta, outcome,
    result, run, run_turn, start, start_session, write_history, Env, Server,
};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;
/// The small window every test uses (80%: 8,000 tokens; 50%: 5,000).
const WINDOW: u64 = 10_000;

fn settings(llm: &FakeLlm) -> Value {
    fake_llm_settings(
        llm,
        &json!({
            "providers": {"local": {"max_output_tokens": 1000}},
            "tools": {"read": "allow", "write": "allow"},
            "runner": {"context_window": WINDOW},
        }),
    )
}

/// The compaction activities' states, in order.
fn compactions(frames: &[Value]) -> Vec<String> {
    events(frames, "activity")
        .iter()
        .filter(|f| f["data"]["kind"] == "compaction")
        .map(|f| f["data"]["state"].as_str().unwrap().to_owned())
        .collect()
}

/// A summary request: no tools, the summarization system prompt, one user message.
fn assert_summary_request(body: &Value) -> String {
    assert!(body.get("tools").is_none(), "{body:#}");
    let msgs = body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{msgs:#?}");
    assert_eq!(msgs[0]["role"], "system");
    assert!(msgs[0]["content"].as_str().unwrap().contains("summary"));
    assert_eq!(msgs[1]["role"], "user");
    let text = msgs[1]["content"].as_str().unwrap().to_owned();
    assert!(text.contains("Summarize the conversation above"), "{text}");
    text
}

/// A fresh [`Env`] with [`settings`] and a child with one new session in it.
fn session_on(llm: &FakeLlm) -> (Env, Server, String) {
    let env = Env::new();
    env.write_global_settings(&settings(llm));
    let (s, sid) = start_session(&env, &[]);
    (env, s, sid)
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

#[test]
fn usage_past_80_percent_compacts_mid_task_and_the_next_step_does_not_compact_again() {
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["hello!"]), 400),
        chat_with_usage(
            chat_tool_call("w1", "write_file", r#"{"path":"out.txt","content":"x"}"#),
            8_001,
        ),
        chat_text(&["SUMMARY-ONE: greeted, now writing out.txt"]),
        chat_with_usage(
            chat_tool_call("r1", "read_file", r#"{"path":"out.txt"}"#),
            3_000,
        ),
        chat_with_usage(chat_text(&["done"]), 3_100),
    ]);
    let (env, mut s, sid) = session_on(&llm);
    assert_eq!(
        outcome(&run_turn(&mut s, &sid, "first task: say hello")),
        "completed"
    );
    let frames = run_turn(&mut s, &sid, "second task: write out.txt");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);
    assert!(diagnostic_codes(&frames).is_empty(), "{frames:#?}");
    // The summary text is not a message: nothing of it streams or reconciles.
    assert!(!format!("{frames:?}").contains("SUMMARY-ONE"));

    let seen: Vec<Value> = (0..5).map(|_| llm.next(WAIT).body).collect();
    assert!(
        llm.drain().is_empty(),
        "one summary request, no second compaction"
    );
    let sum = assert_summary_request(&seen[2]);
    assert!(sum.contains("[user]\nfirst task: say hello"), "{sum}");
    assert!(sum.contains("[tool call: write_file]"), "{sum}");
    for step in [&seen[1], &seen[3], &seen[4]] {
        assert!(step.get("tools").is_some());
    }

    // The step after: instructions, the summary with the files and the earlier input, then
    // this turn's input, call and result verbatim.
    let m = chat_messages(&seen[3]);
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user", "assistant", "tool"],
        "{m:#?}"
    );
    let ctx = content(&m[1]);
    assert!(ctx.contains("SUMMARY-ONE: greeted"), "{ctx}");
    assert!(ctx.contains("- out.txt"), "{ctx}");
    assert!(
        ctx.contains("<user_input>\nfirst task: say hello\n</user_input>"),
        "{ctx}"
    );
    assert!(!ctx.contains("second task"), "{ctx}");
    assert_eq!(content(&m[3]), "second task: write out.txt");
    assert_eq!(m[4]["tool_calls"][0]["id"], "w1");
    assert_eq!(m[5]["tool_call_id"], "w1");
    // It fits in half the window (1 token per 4 bytes).
    assert!(seen[3].to_string().len() <= (WINDOW * 2) as usize);

    let recs = crate::common::session_records(&env, &sid);
    let second_input = recs
        .iter()
        .position(|r| r["type"] == "user_input" && r["text"] == "second task: write out.txt")
        .unwrap();
    let comp: Vec<&Value> = recs.iter().filter(|r| r["type"] == "compaction").collect();
    assert_eq!(comp.len(), 1);
    assert_eq!(comp[0]["through"], second_input, "{:#?}", comp[0]);
    assert!(comp[0]["summary"]
        .as_str()
        .unwrap()
        .starts_with("SUMMARY-ONE"));
    let acts: Vec<&Value> = recs
        .iter()
        .filter(|r| r["type"] == "activity" && r["kind"] == "compaction")
        .collect();
    assert_eq!(acts.len(), 2);

    let rev = frames.last().unwrap()["data"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let entries = history_entries(&mut s, "p", &sid, &rev);
    let comp = entries.iter().find(|e| e["kind"] == "compaction").unwrap();
    assert!(content_of(comp).contains("SUMMARY-ONE"), "{comp}");
}

fn content_of(e: &Value) -> &str {
    e["text"].as_str().unwrap()
}

#[test]
fn an_oversized_conversation_is_summarized_from_its_newest_part() {
    let env = Env::new();
    let id = "big-history_1";
    let mut recs = vec![meta(&env, id)];
    for i in 0..30 {
        let prompt = format!("input-{i:02} {}", "p".repeat(2_000));
        recs.extend(run(
            id,
            &format!("r{i}"),
            &prompt,
            Some(&format!("reply-{i:02}")),
        ));
    }
    write_history(&env, id, &recs);
    let llm = FakeLlm::start(vec![
        chat_text(&["SUMMARY-BIG"]),
        chat_with_usage(chat_text(&["ok"]), 2_000),
    ]);
    env.write_global_settings(&settings(&llm));
    let mut s = start(&env, &[]);
    let open = s.call("o", "session.open", &json!({"session_id": id}));
    assert_eq!(result(&open)["durable"], true, "{open}");
    let frames = run_turn(&mut s, id, "next");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);

    let summary = llm.next(WAIT).body;
    let text = assert_summary_request(&summary);
    // Window 10,000 less the 1,000-token output bound, 4 bytes a token.
    assert!(text.len() <= 36_000, "{}", text.len());
    assert!(text.starts_with("[the oldest part of the conversation was left out]"));
    assert!(!text.contains("input-00"), "the oldest inputs are left out");
    assert!(text.contains("input-29") && text.contains("[user]\nnext"));

    let step = llm.next(WAIT).body;
    let m = chat_messages(&step);
    let ctx = content(&m[1]);
    assert!(ctx.contains("SUMMARY-BIG"));
    // The recent inputs fit in 20% of the window (8,000 bytes): the newest three.
    assert!(
        ctx.contains("input-29") && ctx.contains("input-27"),
        "{ctx}"
    );
    assert!(!ctx.contains("input-26"), "{ctx}");
    assert_eq!(content(m.last().unwrap()), "next");
    assert!(step.to_string().len() <= (WINDOW * 2) as usize);
}

fn overflow() -> Reply {
    Reply::status(
        400,
        &json!({"error": {"message": "This model's maximum context length is 10000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}),
    )
}

#[test]
fn a_context_overflow_compacts_and_retries_the_step_once() {
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["hi"]), 100),
        overflow(),
        chat_text(&["SUMMARY-OVER"]),
        chat_with_usage(chat_text(&["retried fine"]), 900),
    ]);
    let (_env, mut s, sid) = session_on(&llm);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "one")), "completed");
    let frames = run_turn(&mut s, &sid, "two");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert!(diagnostic_codes(&frames).is_empty(), "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);
    let seen: Vec<Value> = (0..4).map(|_| llm.next(WAIT).body).collect();
    assert_summary_request(&seen[2]);
    let m = chat_messages(&seen[3]);
    assert!(content(&m[1]).contains("SUMMARY-OVER"));
    assert_eq!(content(m.last().unwrap()), "two");
}

#[test]
fn a_step_that_overflows_after_compaction_fails_the_run() {
    let llm = FakeLlm::start(vec![overflow(), chat_text(&["SUMMARY"]), overflow()]);
    let (_env, mut s, sid) = session_on(&llm);
    let frames = run_turn(&mut s, &sid, "one");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed", "{frames:#?}");
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(diagnostic_codes(&frames), ["context_overflow"]);
    let d = &events(&frames, "diagnostic")[0]["data"]["summary"];
    assert!(
        d.as_str()
            .unwrap()
            .contains("providers.local.context_window"),
        "{d}"
    );
    assert_eq!(compactions(&frames), ["started", "completed"]);
    let seen: Vec<Value> = (0..3).map(|_| llm.next(WAIT).body).collect();
    assert_summary_request(&seen[1]);
    assert!(seen[2].get("tools").is_some(), "the retried step");
    assert!(llm.drain().is_empty(), "exactly one retry");
}

#[test]
fn a_failed_summary_request_is_reported_and_the_step_proceeds() {
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["hi"]), 8_500),
        Reply::status(400, &json!({"error": {"message": "bad"}})),
        chat_text(&["went on"]),
    ]);
    let (env, mut s, sid) = session_on(&llm);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "one")), "completed");
    let frames = run_turn(&mut s, &sid, "two");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "failed"]);
    assert_eq!(diagnostic_codes(&frames), ["compaction_failed"]);
    assert!(!crate::common::session_records(&env, &sid)
        .iter()
        .any(|r| r["type"] == "compaction"));
}

#[test]
fn a_session_compacted_twice_replays_the_second_summary_in_a_new_child() {
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["ok alpha"]), 8_500),
        chat_text(&["SUMMARY-ONE"]),
        chat_with_usage(chat_text(&["ok beta"]), 8_600),
        chat_text(&["SUMMARY-TWO"]),
        chat_with_usage(chat_text(&["ok gamma"]), 1_000),
    ]);
    let (env, mut a, sid) = session_on(&llm);
    for p in ["alpha", "beta", "gamma"] {
        assert_eq!(outcome(&run_turn(&mut a, &sid, p)), "completed");
    }
    let seen: Vec<Value> = (0..5).map(|_| llm.next(WAIT).body).collect();
    assert_summary_request(&seen[1]);
    let second = assert_summary_request(&seen[3]);
    assert!(
        second.contains("SUMMARY-ONE"),
        "the second summary sees the first"
    );
    drop(a);
    let comps: Vec<Value> = crate::common::session_records(&env, &sid)
        .into_iter()
        .filter(|r| r["type"] == "compaction")
        .collect();
    assert_eq!(comps.len(), 2);

    let llm = FakeLlm::start(vec![chat_with_usage(chat_text(&["ok delta"]), 1_200)]);
    env.write_global_settings(&settings(&llm));
    let mut b = start(&env, &[]);
    let open = b.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(result(&open)["durable"], true, "{open}");
    let frames = run_turn(&mut b, &sid, "delta");
    assert_eq!(outcome(&frames), "completed");
    assert!(
        compactions(&frames).is_empty(),
        "no compaction in the reopened child"
    );
    let body = llm.next(WAIT).body;
    println!("request after two compactions, reopened: {body:#}");
    let m = chat_messages(&body);
    let shown: Vec<(&str, &str)> = m
        .iter()
        .skip(1)
        .map(|x| (x["role"].as_str().unwrap(), content(x)))
        .collect();
    let ctx = shown[0].1;
    assert!(
        ctx.contains("SUMMARY-TWO") && !ctx.contains("SUMMARY-ONE"),
        "{ctx}"
    );
    assert!(ctx.contains("<user_input>\nalpha\n</user_input>"), "{ctx}");
    assert!(ctx.contains("<user_input>\nbeta\n</user_input>"), "{ctx}");
    assert!(!ctx.contains("gamma"), "{ctx}");
    assert_eq!(
        &shown[1..],
        &[
            (
                "assistant",
                "Understood. I will continue from this summary."
            ),
            ("user", "gamma"),
            ("assistant", "ok gamma"),
            ("user", "delta"),
        ]
    );
}

/// Runs `alpha` (whose reply reports 8,500 input tokens of the 10,000 window) and `beta` in
/// one session; asserts `beta` compacted first. The three requests' bodies: the `alpha` step,
/// the summary request and the `beta` step.
fn compacts_before_the_second_turn(env: &Env, llm: &FakeLlm) -> [Value; 3] {
    let (mut s, sid) = start_session(env, &[]);
    let frames = run_turn(&mut s, &sid, "alpha");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert!(compactions(&frames).is_empty(), "{frames:#?}");
    let frames = run_turn(&mut s, &sid, "beta");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);
    assert!(diagnostic_codes(&frames).is_empty(), "{frames:#?}");
    assert!(!format!("{frames:?}").contains("SUMMARY-V"));
    let seen = [
        llm.next(WAIT).body,
        llm.next(WAIT).body,
        llm.next(WAIT).body,
    ];
    assert!(llm.drain().is_empty(), "one summary request");
    assert!(seen[0].get("tools").is_some(), "{:#}", seen[0]);
    assert!(seen[1].get("tools").is_none(), "{:#}", seen[1]);
    assert!(seen[2].get("tools").is_some(), "{:#}", seen[2]);
    let recs = crate::common::session_records(env, &sid);
    let comp: Vec<&Value> = recs.iter().filter(|r| r["type"] == "compaction").collect();
    assert_eq!(comp.len(), 1);
    assert_eq!(comp[0]["summary"], "SUMMARY-V");
    seen
}

/// The text of a message's `content`: a string, or its `text`/`input_text` blocks joined.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

#[test]
fn reported_usage_compacts_an_anthropic_session() {
    use crate::common::anthropic_sse::{reply_with_usage, stop, text};
    let llm = FakeLlm::start(vec![
        reply_with_usage(vec![text(0, "ok alpha"), stop("end_turn")], 8_500),
        reply_with_usage(vec![text(0, "SUMMARY-V"), stop("end_turn")], 3_000),
        reply_with_usage(vec![text(0, "ok beta"), stop("end_turn")], 1_000),
    ]);
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": llm.base, "max_output_tokens": 1000}},
        "tools": {"read": "allow"},
        "runner": {"context_window": WINDOW},
    }));
    let seen = compacts_before_the_second_turn(&env, &llm);

    // The summary request: the summarization system prompt, one user message with the
    // transcript.
    let sum = &seen[1];
    assert!(text_of(&sum["system"]).contains("summary"), "{sum:#}");
    let m = chat_messages(sum);
    assert_eq!(m.len(), 1, "{m:#?}");
    assert_eq!(m[0]["role"], "user");
    let t = text_of(&m[0]["content"]);
    assert!(t.contains("Summarize the conversation above"), "{t}");
    assert!(t.contains("[user]\nalpha") && t.contains("ok alpha"), "{t}");

    // The next step opens with the summary and ends with this turn's input.
    let m = chat_messages(&seen[2]);
    assert_eq!(m[0]["role"], "user");
    let ctx = text_of(&m[0]["content"]);
    assert!(ctx.contains("SUMMARY-V"), "{ctx}");
    assert!(ctx.contains("<user_input>\nalpha\n</user_input>"), "{ctx}");
    assert_eq!(m.last().unwrap()["role"], "user");
    assert_eq!(text_of(&m.last().unwrap()["content"]), "beta");
    assert!(
        !seen[2].to_string().contains("ok alpha"),
        "alpha's reply is summarized"
    );
}

#[test]
fn reported_usage_compacts_a_responses_session() {
    use crate::common::responses_sse::text_with_usage;
    let llm = FakeLlm::start(vec![
        text_with_usage("ok alpha", 8_500),
        text_with_usage("SUMMARY-V", 3_000),
        text_with_usage("ok beta", 1_000),
    ]);
    let env = Env::new();
    env.write_global_settings(&fake_llm_settings(
        &llm,
        &json!({
            "providers": {"local": {"wire_api": "responses", "max_output_tokens": 1000}},
            "tools": {"read": "allow"},
            "runner": {"context_window": WINDOW},
        }),
    ));
    let seen = compacts_before_the_second_turn(&env, &llm);

    let sum = &seen[1];
    assert!(text_of(&sum["instructions"]).contains("summary"), "{sum:#}");
    let input = sum["input"].as_array().unwrap();
    assert_eq!(input.len(), 1, "{input:#?}");
    assert_eq!(input[0]["role"], "user");
    let t = text_of(&input[0]["content"]);
    assert!(t.contains("Summarize the conversation above"), "{t}");
    assert!(t.contains("[user]\nalpha") && t.contains("ok alpha"), "{t}");

    let input = seen[2]["input"].as_array().unwrap();
    assert_eq!(input[0]["role"], "user");
    let ctx = text_of(&input[0]["content"]);
    assert!(ctx.contains("SUMMARY-V"), "{ctx}");
    assert!(ctx.contains("<user_input>\nalpha\n</user_input>"), "{ctx}");
    assert_eq!(text_of(&input.last().unwrap()["content"]), "beta");
    assert!(
        !seen[2].to_string().contains("ok alpha"),
        "alpha's reply is summarized"
    );
}
