//! `model.catalog` and `model.catalog.status` over real pipes, on cache files the test writes.

use crate::common::{result, start, write_catalog_cache, Env, Server};
use serde_json::{json, Value};

fn catalog(s: &mut Server, id: &str, params: Value) -> Value {
    s.call(id, "model.catalog", &params)
}

#[test]
fn choices_come_only_from_enabled_cached_models() {
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {"catalog": {"enabled": [
        "scripted/echo", "anthropic/claude-sonnet-4-5", "anthropic/old-model", "openai/gpt-x",
    ]}}}));
    write_catalog_cache(
        &env,
        "anthropic",
        json!([
            {"id": "claude-sonnet-4-5", "name": "Claude Sonnet 4.5", "efforts": ["low", "medium", "high"]},
            {"id": "old-model", "retired": true},
            {"id": "not-enabled"},
        ]),
    );
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c1", json!({}));
    let r = result(&r);
    assert_eq!(r["source"], "cache_only");
    assert_eq!(r["complete"], true);
    assert_eq!(
        r["notices"],
        json!(["provider_catalog_unavailable"]),
        "openai is enabled but has no cache"
    );
    let choices = r["choices"].as_array().unwrap();
    let ids: Vec<(&str, &str)> = choices
        .iter()
        .map(|c| {
            (
                c["provider"].as_str().unwrap(),
                c["model"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ids,
        [("anthropic", "claude-sonnet-4-5"), ("scripted", "echo")]
    );
    let a = &choices[0];
    assert_eq!(a["availability"], "authentication_unavailable");
    assert_eq!(a["effort_support"], "supported");
    assert_eq!(
        a["permitted_efforts"],
        json!(["default", "low", "medium", "high"])
    );
    assert_eq!(a["model_name"], "Claude Sonnet 4.5");
    assert_eq!(a["selection_id"].as_str().unwrap().len(), 64);
    let e = &choices[1];
    assert_eq!(
        (e["availability"].as_str(), e["effort_support"].as_str()),
        (Some("available"), Some("unsupported"))
    );
    let mut keys: Vec<&str> = a.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "availability",
            "effort_support",
            "model",
            "model_name",
            "permitted_efforts",
            "provider",
            "provider_name",
            "selection_id"
        ]
    );
}

#[test]
fn default_settings_admit_no_choices() {
    let env = Env::new();
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c1", json!({"limit": 100}));
    assert_eq!(result(&r)["choices"], json!([]));
    assert_eq!(result(&r)["notices"], json!([]));
}

#[test]
fn continuations_go_stale_stickily_on_mutation() {
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {"catalog": {"enabled": ["anthropic/a", "anthropic/b", "anthropic/c"]}}}));
    write_catalog_cache(
        &env,
        "anthropic",
        json!([{"id": "a"}, {"id": "b"}, {"id": "c"}]),
    );
    let mut s = start(&env, &[]);
    let first = catalog(&mut s, "c1", json!({"limit": 1}));
    let rev = result(&first)["revision"].as_str().unwrap().to_owned();
    let cur = result(&first)["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(result(&first)["complete"], false);
    let second = catalog(
        &mut s,
        "c2",
        json!({"revision": rev, "cursor": cur, "limit": 1}),
    );
    assert_eq!(result(&second)["choices"][0]["model"], "b");
    let cur2 = result(&second)["next_cursor"].as_str().unwrap().to_owned();
    let original = std::fs::read(env.home().join("cache/models/anthropic.json")).unwrap();
    write_catalog_cache(
        &env,
        "anthropic",
        json!([{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d"}]),
    );
    let stale = catalog(
        &mut s,
        "c3",
        json!({"revision": rev, "cursor": cur2, "limit": 1}),
    );
    assert_eq!(stale["error"]["code"], "stale_catalog");
    std::fs::write(env.home().join("cache/models/anthropic.json"), original).unwrap();
    let still = catalog(
        &mut s,
        "c4",
        json!({"revision": rev, "cursor": cur2, "limit": 1}),
    );
    assert_eq!(
        still["error"]["code"], "stale_catalog",
        "restoring files cannot revive it"
    );
    let fresh = catalog(&mut s, "c5", json!({}));
    assert_eq!(result(&fresh)["choices"].as_array().unwrap().len(), 3);
    let unmatched = catalog(&mut s, "c6", json!({"revision": "x"}));
    assert_eq!(unmatched["error"]["code"], "invalid_params");
}

#[test]
fn bad_caches_and_bounds() {
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {"catalog": {"enabled": ["anthropic/a", "scripted/echo", "openai/sk-ant-api03-secret"]}}}));
    // Invalid JSON: a notice, other choices stay.
    let dir = env.home().join("cache").join("models");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("anthropic.json"), b"{not json").unwrap();
    write_catalog_cache(&env, "openai", json!([{"id": "sk-ant-api03-secret"}]));
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c1", json!({}));
    assert_eq!(
        result(&r)["notices"],
        json!([
            "catalog_entries_omitted_unsafe",
            "provider_catalog_unavailable"
        ])
    );
    assert_eq!(result(&r)["choices"].as_array().unwrap().len(), 1);
    // A symlinked cache is unsafe.
    std::fs::remove_file(dir.join("anthropic.json")).unwrap();
    std::os::unix::fs::symlink(dir.join("openai.json"), dir.join("anthropic.json")).unwrap();
    let r = catalog(&mut s, "c2", json!({}));
    assert_eq!(r["error"]["code"], "catalog_unavailable");
    std::fs::remove_file(dir.join("anthropic.json")).unwrap();
    // Duplicate choices.
    write_catalog_cache(&env, "anthropic", json!([{"id": "a"}, {"id": "a"}]));
    let r = catalog(&mut s, "c3", json!({}));
    assert_eq!(r["error"]["code"], "catalog_unavailable");
    // The longest identifier (256 bytes) is a choice; one byte more fails the operation.
    let longest = "m".repeat(256);
    write_catalog_cache(&env, "anthropic", json!([{"id": longest}]));
    drop(s);
    env.write_global_settings(
        &json!({"providers": {"catalog": {"enabled": [format!("anthropic/{longest}")]}}}),
    );
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c3b", json!({}));
    assert_eq!(result(&r)["choices"][0]["model"], longest.as_str());
    let long = "m".repeat(257);
    write_catalog_cache(&env, "anthropic", json!([{"id": long}]));
    drop(s);
    env.write_global_settings(
        &json!({"providers": {"catalog": {"enabled": [format!("anthropic/{long}")]}}}),
    );
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c4", json!({}));
    assert_eq!(r["error"]["code"], "catalog_limit");
}

#[test]
fn model_count_bound() {
    let env = Env::new();
    let models: Vec<Value> = (0..2_048).map(|i| json!({"id": format!("m{i}")})).collect();
    write_catalog_cache(&env, "anthropic", json!(models));
    let mut s = start(&env, &[]);
    let r = catalog(&mut s, "c1", json!({}));
    assert!(r.get("result").is_some(), "2,048 cached models are scanned");
    let models: Vec<Value> = (0..2_049).map(|i| json!({"id": format!("m{i}")})).collect();
    write_catalog_cache(&env, "anthropic", json!(models));
    let r = catalog(&mut s, "c2", json!({}));
    assert_eq!(r["error"]["code"], "catalog_limit");
}

#[test]
fn catalog_status_reports_provider_reasons() {
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {
        "catalog": {"enabled": ["anthropic/a", "openai/o", "scripted/echo"]},
        "local": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1"},
    }}));
    write_catalog_cache(&env, "anthropic", json!([{"id": "a"}]));
    let mut s = start(&env, &[]);
    let r = s.call("x", "model.catalog.status", &json!({}));
    assert_eq!(r["error"]["code"], "unsupported_capability");
    let mut s = start(&env, &["model.catalog.status"]);
    let r = s.call("x", "model.catalog.status", &json!({}));
    let states: Vec<(&str, &str)> = result(&r)["providers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["provider"].as_str().unwrap(),
                p["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("anthropic", "authentication_unavailable"),
            ("claude-subscription", "not_enabled"),
            ("codex", "not_enabled"),
            ("local", "not_enabled"),
            ("openai", "cache_missing"),
            ("scripted", "ready")
        ]
    );
    let a = &result(&r)["providers"][0];
    assert_eq!(
        (a["cached_models"].as_u64(), a["fetched_at"].as_str()),
        (Some(1), Some("2026-11-30T12:00:00Z"))
    );
}
