//! `selection.set` over real pipes: validation order, durable preferences, status agreement
//! and restoration in a new child.

use crate::common::{init_params, result, start_session, write_catalog_cache, Env, Server};
use serde_json::{json, Value};

fn setup() -> Env {
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "dummy-key");
    env.write_global_settings(
        &json!({"providers": {"catalog": {"enabled": ["scripted/echo", "anthropic/claude-x"]}}}),
    );
    write_catalog_cache(
        &env,
        "anthropic",
        json!([{"id": "claude-x", "efforts": ["low", "high"]}]),
    );
    env
}

struct Ctx {
    s: Server,
    sid: String,
    sel: String,
    cat: String,
}

fn start(env: &Env) -> Ctx {
    let (mut s, sid) = start_session(env, &[]);
    let sel = result(&s.call("st", "status", &json!({})))["selection"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let cat = result(&s.call("cat", "model.catalog", &json!({})))["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    Ctx { s, sid, sel, cat }
}

fn set(c: &mut Ctx, id: &str, provider: &str, model: &str, effort: Value) -> Value {
    let mut p = json!({"session_id": c.sid, "selection_revision": c.sel, "catalog_revision": c.cat, "provider": provider, "model": model});
    if !effort.is_null() {
        p["effort"] = effort;
    }
    c.s.call(id, "selection.set", &p)
}

#[test]
fn a_deliberate_selection_is_durable_and_agrees_with_status() {
    let env = setup();
    let mut c = start(&env);
    let r = set(
        &mut c,
        "s1",
        "anthropic",
        "claude-x",
        json!({"mode": "set", "value": "high"}),
    );
    let res = result(&r).clone();
    assert_eq!(res["durable"], true);
    assert_eq!(res["scope"], "session");
    assert_eq!(res["catalog_revision"], c.cat.as_str());
    assert!(res["history_revision"].is_string());
    assert_eq!(res["notices"], json!([]));
    let sel = &res["selection"];
    assert_eq!(
        (sel["provider"].as_str(), sel["model"].as_str()),
        (Some("anthropic"), Some("claude-x"))
    );
    assert_eq!(
        (
            sel["requested_effort"].as_str(),
            sel["effective_effort"].as_str()
        ),
        (Some("high"), Some("high"))
    );
    assert_eq!(sel["permitted_efforts"], json!(["default", "low", "high"]));
    assert_ne!(
        sel["revision"],
        c.sel.as_str(),
        "a fresh selection revision"
    );
    let st = c.s.call("st2", "status", &json!({}));
    assert_eq!(result(&st)["selection"], *sel);
    assert_eq!(result(&st)["provider"], "anthropic");
    // The lazy session became durable with the preferences record, no prompt.
    let file = env.home().join("sessions").join(format!("{}.jsonl", c.sid));
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains("\"type\":\"session_preferences\"") && !text.contains("user_input"));
    // The old selection revision is stale now.
    let again = set(&mut c, "s2", "anthropic", "claude-x", Value::Null);
    assert_eq!(again["error"]["code"], "stale_selection");
    c.s.call("bye", "shutdown", &json!({}));
    // Exact reopen in a new child restores the saved selection.
    let mut s = env.spawn();
    s.call("init", "initialize", &init_params(&[]));
    let open = s.call("o", "session.open", &json!({"session_id": c.sid}));
    assert!(open.get("result").is_some(), "{open}");
    let st = s.call("st", "status", &json!({}));
    let sel = &result(&st)["selection"];
    assert_eq!(
        (
            sel["provider"].as_str(),
            sel["model"].as_str(),
            sel["requested_effort"].as_str()
        ),
        (Some("anthropic"), Some("claude-x"), Some("high"))
    );
}

#[test]
fn invalid_requests_change_nothing() {
    let env = setup();
    let mut c = start(&env);
    let wrong_session = c.s.call(
        "w",
        "selection.set",
        &json!({"session_id": "other", "selection_revision": c.sel, "catalog_revision": c.cat, "provider": "scripted", "model": "echo"}),
    );
    assert_eq!(wrong_session["error"]["code"], "stale_session");
    assert_eq!(
        set(&mut c, "a", "anthropic", "nope", Value::Null)["error"]["code"],
        "selection_invalid"
    );
    assert_eq!(
        set(
            &mut c,
            "b",
            "anthropic",
            "claude-x",
            json!({"mode": "set", "value": "max"})
        )["error"]["code"],
        "effort_unsupported"
    );
    assert_eq!(
        set(
            &mut c,
            "d",
            "scripted",
            "echo",
            json!({"mode": "set", "value": "low"})
        )["error"]["code"],
        "effort_unsupported"
    );
    assert_eq!(
        set(
            &mut c,
            "e",
            "anthropic",
            "claude-x",
            json!({"mode": "set", "value": "default"})
        )["error"]["code"],
        "invalid_params"
    );
    let saved = c.cat.clone();
    c.cat = "not-the-catalog".into();
    assert_eq!(
        set(&mut c, "f", "scripted", "echo", Value::Null)["error"]["code"],
        "stale_catalog"
    );
    c.cat = saved;
    assert!(
        !env.home()
            .join("sessions")
            .join(format!("{}.jsonl", c.sid))
            .exists(),
        "nothing written"
    );
    let st = c.s.call("st-after", "status", &json!({}));
    assert_eq!(
        result(&st)["selection"]["revision"],
        c.sel.as_str(),
        "selection unchanged"
    );
    // Keep carries the requested effort: explicit high, then echo with keep is unsupported.
    let ok = set(
        &mut c,
        "g",
        "anthropic",
        "claude-x",
        json!({"mode": "set", "value": "low"}),
    );
    c.sel = result(&ok)["selection"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        set(&mut c, "h", "scripted", "echo", json!({"mode": "keep"}))["error"]["code"],
        "effort_unsupported"
    );
    let reset = set(&mut c, "i", "scripted", "echo", json!({"mode": "default"}));
    assert_eq!(result(&reset)["selection"]["effort_support"], "unsupported");
    assert_eq!(result(&reset)["selection"]["effective_effort"], Value::Null);
}

/// `decisions.md` 50: a derived-metadata write that fails never fails the append; the result
/// says `metadata_update_failed`, and the selection is durable all the same.
#[test]
fn a_failed_metadata_write_is_a_notice_not_a_failure() {
    let env = setup();
    let mut c = start(&env);
    // The first append creates the history; a folder where the metadata goes makes every
    // later metadata write fail.
    let r = set(&mut c, "s0", "scripted", "echo", Value::Null);
    assert_eq!(result(&r)["notices"], json!([]));
    let meta = env
        .home()
        .join("sessions")
        .join(format!("{}.meta.json", c.sid));
    assert!(meta.is_file(), "the owner keeps metadata after its appends");
    std::fs::remove_file(&meta).unwrap();
    std::fs::create_dir(&meta).unwrap();
    std::fs::write(meta.join("x"), "keep the folder non-empty").unwrap();
    c.sel = result(&r)["selection"]["revision"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = set(
        &mut c,
        "s1",
        "anthropic",
        "claude-x",
        json!({"mode": "set", "value": "high"}),
    );
    let res = result(&r);
    assert_eq!(res["durable"], true);
    assert_eq!(res["notices"], json!(["metadata_update_failed"]));
    c.s.shutdown_ok("bye");
    // The preferences are durable: a new child restores them.
    let mut s = crate::common::start(&env, &[]);
    result(&s.call("o", "session.open", &json!({"session_id": c.sid})));
    let st = result(&s.call("st", "status", &json!({}))).clone();
    assert_eq!(st["selection"]["model"], "claude-x");
    s.shutdown_ok("bye");
}
