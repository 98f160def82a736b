//! Effort resolution over real pipes (`decisions.md` 36): the startup selection from settings
//! and a session restored by `session.open` (in a new child and in the same child) resolve
//! their effort controls from the cached catalog, `status` shows them and every wire API sends
//! the effort; a cache change between selection and turn fails the turn `stale_selection`
//! before `input.persisted`.

use crate::common::fake_llm::{chat_text, FakeLlm, Reply};
use crate::common::{
    anthropic_sse, events, init_params, responses_sse, result, run_turn, start_session,
    write_catalog_cache, Env, Server,
};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

/// One wire API: the provider and model it is reached by, and how a reply and the effort look.
#[derive(Clone, Copy)]
enum Wire {
    Anthropic,
    Responses,
    Chat,
}

const WIRES: [Wire; 3] = [Wire::Anthropic, Wire::Responses, Wire::Chat];

impl Wire {
    fn pair(self) -> (&'static str, &'static str) {
        match self {
            Self::Anthropic => ("anthropic", "claude-x"),
            Self::Responses => ("openai", "gpt-x"),
            Self::Chat => ("local", "tiny"),
        }
    }

    fn reply(self) -> Reply {
        match self {
            Self::Anthropic => anthropic_sse::reply(vec![
                anthropic_sse::text(0, "ok"),
                anthropic_sse::stop("end_turn"),
            ]),
            Self::Responses => responses_sse::text("ok"),
            Self::Chat => chat_text(&["ok"]),
        }
    }

    /// An env whose settings select this wire at `llm` with `effort`, the pair enabled in the
    /// catalog, and its cache listing `efforts` for the model.
    fn env(self, llm: &FakeLlm, effort: &str, efforts: &Value) -> Env {
        let (provider, model) = self.pair();
        let mut env = Env::new();
        env.set_var("ANTHROPIC_API_KEY", "dummy-a");
        env.set_var("OPENAI_API_KEY", "dummy-o");
        let base = match self {
            Self::Anthropic => llm.base.clone(),
            Self::Responses | Self::Chat => format!("{}/v1", llm.base),
        };
        let mut providers = json!({"catalog": {"enabled": [format!("{provider}/{model}")]}});
        providers[provider] = match self {
            Self::Chat => json!({"kind": "openai-compatible", "base_url": base}),
            _ => json!({"base_url": base}),
        };
        env.write_global_settings(&json!({
            "provider": provider, "model": model, "effort": effort, "providers": providers,
        }));
        write_catalog_cache(&env, provider, json!([{"id": model, "efforts": efforts}]));
        env
    }

    /// The effort the request `body` carries, in this wire's field.
    fn sent_effort(self, body: &Value) -> Value {
        match self {
            Self::Anthropic => {
                if body.get("thinking").is_some() {
                    assert_eq!(
                        body["thinking"],
                        json!({"type": "adaptive", "display": "summarized"})
                    );
                }
                body.get("output_config")
                    .map_or(Value::Null, |c| c["effort"].clone())
            }
            Self::Responses => body
                .get("reasoning")
                .map_or(Value::Null, |r| r["effort"].clone()),
            Self::Chat => body.get("reasoning_effort").cloned().unwrap_or(Value::Null),
        }
    }
}

fn selection(s: &mut Server, id: &str) -> Value {
    result(&s.call(id, "status", &json!({})))["selection"].clone()
}

/// Sets the session's effort to `high` with `selection.set`, durably.
fn set_high(s: &mut Server, sid: &str, provider: &str, model: &str) {
    let rev = selection(s, "st")["revision"].clone();
    let cat = result(&s.call("cat", "model.catalog", &json!({})))["revision"].clone();
    let set = s.call(
        "set",
        "selection.set",
        &json!({"session_id": sid, "selection_revision": rev, "catalog_revision": cat, "provider": provider, "model": model, "effort": {"mode": "set", "value": "high"}}),
    );
    assert_eq!(result(&set)["durable"], true, "{set}");
}

#[track_caller]
fn assert_resolved_high(sel: &Value) {
    assert_eq!(sel["requested_effort"], "high", "{sel}");
    assert_eq!(sel["effort_support"], "supported", "{sel}");
    assert_eq!(sel["permitted_efforts"], json!(["default", "low", "high"]));
    assert_eq!(sel["effective_effort"], "high", "{sel}");
}

/// Runs one turn on `sid`; asserts it completed and the request carried effort `high`.
#[track_caller]
fn assert_turn_sends_high(wire: Wire, s: &mut Server, llm: &FakeLlm, sid: &str) {
    let frames = run_turn(s, sid, "think");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let req = llm.next(WAIT);
    assert_eq!(wire.sent_effort(&req.body), "high", "{}", req.body);
}

#[test]
fn an_effort_in_settings_reaches_status_and_every_wire() {
    for wire in WIRES {
        let llm = FakeLlm::start(vec![wire.reply()]);
        let env = wire.env(&llm, "high", &json!(["low", "high"]));
        let (mut s, sid) = start_session(&env, &[]);
        assert_resolved_high(&selection(&mut s, "st"));
        assert_turn_sends_high(wire, &mut s, &llm, &sid);
        s.shutdown_ok("bye");
    }
}

#[test]
fn a_reopened_session_sends_its_saved_effort_in_the_same_and_a_new_child() {
    for wire in WIRES {
        let llm = FakeLlm::start(vec![wire.reply(), wire.reply()]);
        // The settings ask for no effort: only the session's preferences say `high`.
        let env = wire.env(&llm, "default", &json!(["low", "high"]));
        let (provider, model) = wire.pair();
        let (mut s, sid) = start_session(&env, &[]);
        set_high(&mut s, &sid, provider, model);
        // Same child: another session resets the selection, reopening restores `high`.
        s.call("c2", "session.create", &json!({}));
        assert_eq!(selection(&mut s, "st2")["effective_effort"], "default");
        let open = s.call("o", "session.open", &json!({"session_id": sid}));
        assert_eq!(result(&open)["notices"], json!([]), "{open}");
        assert_resolved_high(&selection(&mut s, "st3"));
        assert_turn_sends_high(wire, &mut s, &llm, &sid);
        s.shutdown_ok("bye");
        // New child.
        let mut s = env.spawn();
        result(&s.call("init", "initialize", &init_params(&[])));
        assert_eq!(selection(&mut s, "st")["effective_effort"], "default");
        let open = s.call("o", "session.open", &json!({"session_id": sid}));
        assert_eq!(result(&open)["notices"], json!([]), "{open}");
        assert_resolved_high(&selection(&mut s, "st2"));
        assert_turn_sends_high(wire, &mut s, &llm, &sid);
        s.shutdown_ok("bye");
    }
}

#[test]
fn a_cache_change_between_selection_and_turn_fails_it_stale_selection() {
    let wire = Wire::Chat;
    let llm = FakeLlm::start(vec![wire.reply()]);
    let env = wire.env(&llm, "high", &json!(["low", "high"]));
    let (mut s, sid) = start_session(&env, &[]);
    let before = selection(&mut s, "st");
    assert_resolved_high(&before);
    // The cache is rewritten: the model lost its `low` level, and so its effort support.
    let (provider, model) = wire.pair();
    write_catalog_cache(&env, provider, json!([{"id": model, "efforts": ["high"]}]));
    let frames = run_turn(&mut s, &sid, "think");
    let fin = &frames.last().unwrap()["data"];
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "stale_selection");
    assert_eq!(fin["persistence"], "not_started");
    assert!(
        events(&frames, "input.persisted").is_empty(),
        "no input acknowledgement: {frames:#?}"
    );
    assert!(llm.drain().is_empty(), "no provider request");
    // Status shows the new resolution under a fresh revision.
    let after = selection(&mut s, "st2");
    assert_ne!(after["revision"], before["revision"]);
    assert_eq!(after["permitted_efforts"], json!(["default", "high"]));
    assert_eq!(after["effective_effort"], "high");
    // Nothing was written for the failed turn.
    assert!(!env
        .home()
        .join("sessions")
        .join(format!("{sid}.jsonl"))
        .exists());
    // A deliberate new turn runs on the refreshed selection.
    assert_turn_sends_high(wire, &mut s, &llm, &sid);
    // A cache that no longer knows the model's controls is a change too.
    write_catalog_cache(&env, provider, json!([{"id": model}]));
    let frames = run_turn(&mut s, &sid, "again");
    assert_eq!(
        frames.last().unwrap()["data"]["error_code"],
        "stale_selection"
    );
    let sel = selection(&mut s, "st3");
    assert_eq!(sel["effort_support"], "unknown");
    assert_eq!(sel["effective_effort"], Value::Null);
    s.shutdown_ok("bye");
}

#[test]
fn a_catalog_observation_reconciles_the_selection_and_rotates_only_on_change() {
    let wire = Wire::Chat;
    let llm = FakeLlm::start(vec![wire.reply()]);
    let env = wire.env(&llm, "high", &json!(["low", "high"]));
    let (mut s, sid) = start_session(&env, &[]);
    let before = selection(&mut s, "st");
    // An unchanged cache: the same selection, the same revision.
    result(&s.call("cat", "model.catalog", &json!({})));
    assert_eq!(selection(&mut s, "st2"), before);
    // A changed one: the catalog observation takes the new controls under a fresh revision.
    let (provider, model) = wire.pair();
    write_catalog_cache(&env, provider, json!([{"id": model, "efforts": ["high"]}]));
    result(&s.call("cat2", "model.catalog", &json!({})));
    let after = selection(&mut s, "st3");
    assert_ne!(after["revision"], before["revision"]);
    assert_eq!(after["permitted_efforts"], json!(["default", "high"]));
    assert_eq!(after["effective_effort"], "high");
    // The turn then runs: the selection already agrees with the cache.
    assert_turn_sends_high(wire, &mut s, &llm, &sid);
    s.shutdown_ok("bye");
}

#[test]
fn a_restored_effort_the_cached_controls_no_longer_permit_is_kept_with_a_notice() {
    let wire = Wire::Chat;
    let llm = FakeLlm::start(vec![wire.reply()]);
    let env = wire.env(&llm, "default", &json!(["low", "high"]));
    let (provider, model) = wire.pair();
    let (mut s, sid) = start_session(&env, &[]);
    set_high(&mut s, &sid, provider, model);
    s.shutdown_ok("bye");
    // The model lost its effort control in the cache since.
    write_catalog_cache(&env, provider, json!([{"id": model, "efforts": []}]));
    let mut s = env.spawn();
    result(&s.call("init", "initialize", &init_params(&[])));
    let open = s.call("o", "session.open", &json!({"session_id": sid}));
    assert_eq!(result(&open)["notices"], json!(["saved_selection_notice"]));
    let sel = selection(&mut s, "st");
    assert_eq!(sel["requested_effort"], "high", "the saved request is kept");
    assert_eq!(sel["effort_support"], "unsupported");
    assert_eq!(sel["effective_effort"], Value::Null);
    let frames = run_turn(&mut s, &sid, "think");
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    assert_eq!(wire.sent_effort(&llm.next(WAIT).body), Value::Null);
    s.shutdown_ok("bye");
}
