//! Small context windows (`decisions.md` 45 and 46) against a fake Chat Completions server:
//! a compaction in a 2,048-token window (the base prompt and tools alone pass half of it)
//! keeps the summary and the input, cut and marked, and sends no empty user message; a window
//! too small for a reply fails with `context_window_too_small`; the summary request cuts one
//! huge reply to its ends instead of leaving every earlier turn out, and bounds its output;
//! `providers.<name>.context_window` sits between the catalog and `runner.context_window`;
//! an empty `200` past half the window compacts and retries once.

use crate::common::fake_llm::{chat_text, chat_with_usage, FakeLlm, Reply};
use crate::common::{
    chat_messages, diagnostic_codes, events, fake_llm_settings, outcome, run_turn, start_session,
    start_turn, until_finished, write_catalog_cache, Env,
};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

fn env_with(llm: &FakeLlm, extra: &Value) -> Env {
    let env = Env::new();
    env.write_global_settings(&fake_llm_settings(llm, extra));
    env
}

/// The compaction activities' states, in order.
fn compactions(frames: &[Value]) -> Vec<String> {
    events(frames, "activity")
        .iter()
        .filter(|f| f["data"]["kind"] == "compaction")
        .map(|f| f["data"]["state"].as_str().unwrap().to_owned())
        .collect()
}

fn content(m: &Value) -> &str {
    m["content"].as_str().unwrap_or("")
}

fn max_tokens(body: &Value) -> u64 {
    body["max_tokens"].as_u64().unwrap()
}

/// The user message of a summary request.
fn summary_text(body: &Value) -> String {
    assert!(body.get("tools").is_none(), "{body:#}");
    let m = chat_messages(body);
    assert_eq!(m.len(), 2, "{m:#?}");
    content(&m[1]).to_owned()
}

#[test]
fn a_compaction_in_a_2048_token_window_keeps_the_summary_and_the_input_cut_and_marked() {
    let input = format!("BEGIN{}END", "m".repeat(3_000));
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["hi"]), 1_000),
        chat_text(&[&format!("SUMSTART{}SUMEND", "s".repeat(3_000))]),
        chat_text(&["done"]),
    ]);
    let env = env_with(
        &llm,
        &json!({"providers": {"local": {"context_window": 2_048}}}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "first")), "completed");
    let frames = run_turn(&mut s, &sid, &input);
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);
    assert!(diagnostic_codes(&frames).is_empty(), "{frames:#?}");

    let seen: Vec<Value> = (0..3).map(|_| llm.next(WAIT).body).collect();
    assert!(llm.drain().is_empty());
    // The first step's bound is the room the window leaves (the base prompt and the tools
    // alone take more than 1,000 tokens), and at least 256.
    assert!(
        (256..1_048).contains(&max_tokens(&seen[0])),
        "{}",
        seen[0]["max_tokens"]
    );
    // The summary request's bound: at most a quarter of the window.
    assert!(max_tokens(&seen[1]) <= 512, "{}", seen[1]["max_tokens"]);
    summary_text(&seen[1]);

    let step = &seen[2];
    let m = chat_messages(step);
    for msg in m.iter().filter(|x| x["role"] == "user") {
        assert!(!content(msg).is_empty(), "an empty user message: {m:#?}");
    }
    let roles: Vec<&str> = m.iter().map(|x| x["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"], "{m:#?}");
    let ctx = content(&m[1]);
    assert!(
        ctx.contains("SUMSTARTsss"),
        "the summary's start is kept: {ctx}"
    );
    assert!(!ctx.contains("SUMEND"), "{ctx}");
    assert!(ctx.trim_end().ends_with(" bytes left out]"), "{ctx}");
    let last = content(&m[3]);
    assert!(
        last.starts_with("BEGINmmm") && last.ends_with("mmmEND"),
        "{last}"
    );
    assert!(last.contains(" bytes left out]\n"), "{last}");
    assert!(last.len() < input.len());
    let bound = max_tokens(step);
    assert!((256..1_048).contains(&bound), "{bound}");
    // The request fits the window with its bound (1 token per 4 bytes).
    assert!(
        step.to_string().len() as u64 / 4 + bound <= 2_048 + 200,
        "{bound}"
    );
}

#[test]
fn a_window_too_small_for_a_reply_fails_the_run_and_names_the_setting() {
    let llm = FakeLlm::start(vec![chat_text(&["never"])]);
    let env = env_with(&llm, &json!({"runner": {"context_window": 1_000}}));
    let (mut s, sid) = start_session(&env, &[]);
    let frames = run_turn(&mut s, &sid, "hello");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed", "{frames:#?}");
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(diagnostic_codes(&frames), ["context_window_too_small"]);
    let d = &events(&frames, "diagnostic")[0]["data"];
    let summary = d["summary"].as_str().unwrap();
    assert!(
        summary.contains("providers.local.context_window"),
        "{summary}"
    );
    assert!(llm.drain().is_empty(), "no request went out");
}

#[test]
fn the_summary_request_cuts_one_huge_reply_and_keeps_the_earlier_turns() {
    let huge = format!("HUGE-START{}HUGE-END", "h".repeat(40_000));
    let llm = FakeLlm::start(vec![
        chat_with_usage(chat_text(&["reply-one"]), 100),
        chat_with_usage(chat_text(&[&huge]), 200),
        chat_text(&["SUMMARY-C"]),
        chat_text(&["ok"]),
    ]);
    let env = env_with(&llm, &json!({"runner": {"context_window": 10_000}}));
    let (mut s, sid) = start_session(&env, &[]);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "first-input")), "completed");
    assert_eq!(
        outcome(&run_turn(&mut s, &sid, "second-input")),
        "completed"
    );
    let frames = run_turn(&mut s, &sid, "third-input");
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(compactions(&frames), ["started", "completed"]);
    let seen: Vec<Value> = (0..4).map(|_| llm.next(WAIT).body).collect();
    let text = summary_text(&seen[2]);
    assert!(
        !text.starts_with("[the oldest part"),
        "nothing left out whole"
    );
    for kept in [
        "[user]\nfirst-input",
        "[assistant]\nreply-one",
        "[user]\nsecond-input",
        "[assistant]\nHUGE-STARThhh",
        "hhhHUGE-END",
        "[user]\nthird-input",
    ] {
        assert!(
            text.contains(kept),
            "{kept} missing from the summary request"
        );
    }
    assert!(text.contains(" bytes left out]"));
    // An eighth of its budget at most: the window less the output bound, 4 bytes a token.
    assert!(text.len() < 30_000, "{}", text.len());
    // A quarter of the 10,000-token window, under the provider's 16,384.
    assert_eq!(max_tokens(&seen[2]), 2_500);
}

/// The first request's output bound in a fresh child with `extra` settings (and a cached
/// catalog entry for `tiny` with `cached` as its window, when given).
fn first_bound(extra: &Value, cached: Option<u64>) -> u64 {
    let llm = FakeLlm::start(vec![chat_text(&["ok"])]);
    let env = env_with(&llm, extra);
    if let Some(w) = cached {
        write_catalog_cache(&env, "local", json!([{"id": "tiny", "context_window": w}]));
    }
    let (mut s, sid) = start_session(&env, &[]);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "hi")), "completed");
    max_tokens(&llm.next(WAIT).body)
}

#[test]
fn a_provider_context_window_wins_over_the_runner_and_loses_to_the_catalog() {
    // Each first request takes 1,000 to 2,000 tokens: its bound is the window less that.
    let runner = json!({"runner": {"context_window": 9_000}});
    let b = first_bound(&runner, None);
    assert!((7_000..8_000).contains(&b), "runner.context_window: {b}");
    let both = json!({"runner": {"context_window": 9_000}, "providers": {"local": {"context_window": 12_000}}});
    let b = first_bound(&both, None);
    assert!(
        (10_000..11_000).contains(&b),
        "providers.local.context_window: {b}"
    );
    let b = first_bound(&both, Some(15_000));
    assert!((13_000..14_000).contains(&b), "the catalog entry: {b}");
}

fn empty() -> Reply {
    Reply::sse(Vec::new())
}

#[test]
fn empty_200s_past_half_the_window_compact_and_retry_once_and_within_it_are_a_broken_stream() {
    // The one stdio test that waits a whole real backoff (0.5 + 1 + 2 + 4 s, ±20%), once for
    // both cases, whose two children wait at the same time: a step ends in an empty reply
    // only when all five attempts were empty `200`s, and a `200` takes no `retry-after`, so
    // nothing shorter reaches it over real pipes. The schedule and the empty-reply rule are
    // `providers::http::tests::the_retry_schedule_on_a_virtual_clock` and
    // `empty_200s_on_every_attempt_are_an_empty_reply_else_a_broken_stream`.
    let mut replies = vec![chat_with_usage(chat_text(&["hi"]), 6_000)];
    replies.extend((0..5).map(|_| empty()));
    replies.push(chat_text(&["SUMMARY-EMPTY"]));
    replies.push(chat_text(&["after"]));
    let past = FakeLlm::start(replies);
    let env = env_with(
        &past,
        &json!({"providers": {"local": {"context_window": 10_000}}}),
    );
    let (mut s, sid) = start_session(&env, &[]);
    assert_eq!(outcome(&run_turn(&mut s, &sid, "one")), "completed");
    start_turn(&mut s, &sid, "two");

    let within = FakeLlm::start((0..5).map(|_| empty()).collect());
    let env2 = env_with(&within, &json!({"runner": {"context_window": 10_000}}));
    let (mut s2, sid2) = start_session(&env2, &[]);
    start_turn(&mut s2, &sid2, "one");

    // Past half the window: a context overflow, compacted and retried once.
    let frames = until_finished(&mut s);
    assert_eq!(outcome(&frames), "completed", "{frames:#?}");
    assert_eq!(diagnostic_codes(&frames), ["provider_retry"; 4]);
    assert_eq!(compactions(&frames), ["started", "completed"]);
    let seen: Vec<Value> = (0..8).map(|_| past.next(WAIT).body).collect();
    assert!(
        past.drain().is_empty(),
        "exactly one retry after the compaction"
    );
    summary_text(&seen[6]);
    let m = chat_messages(&seen[7]);
    assert!(content(&m[1]).contains("SUMMARY-EMPTY"));
    assert_eq!(content(m.last().unwrap()), "two");

    // Within it: a broken stream, whose diagnostic points at the setting a local server's
    // smaller context needs.
    let frames = until_finished(&mut s2);
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed", "{frames:#?}");
    assert_eq!(fin["error_code"], "execution_failed");
    let mut want = vec!["provider_retry"; 4];
    want.push("provider_stream_invalid");
    assert_eq!(diagnostic_codes(&frames), want);
    assert!(compactions(&frames).is_empty());
    let last = events(&frames, "diagnostic").last().unwrap()["data"]["summary"].clone();
    assert!(
        last.as_str()
            .unwrap()
            .contains("providers.local.context_window"),
        "{last}"
    );
}
