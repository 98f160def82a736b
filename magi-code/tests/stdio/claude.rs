//! `claude-subscription` readiness through the real binary and the real Claude Code CLI
//! (`backend.md` "Claude through the native CLI"), pinned in the npm fixtures: each case has
//! its own `HOME` with a crafted `~/.claude` and no API key. Ready exactly when the CLI's own
//! `auth status --json` says a Claude plan is signed in; a missing login, an API-key login, a
//! missing executable and a hanging check are `provider_unavailable`, and `doctor` says which.

use crate::common::npm::ensure_npm;
use crate::common::{assert_error, init_params, Env};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The real CLI, installed from the pinned lockfile first if missing.
pub(crate) fn claude() -> PathBuf {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp");
    ensure_npm(&fixtures, "node_modules/.bin/claude")
}

/// An env selecting `claude-subscription/sonnet` run by `command`.
pub(crate) fn env_with(command: &Path) -> Env {
    let env = Env::new();
    env.write_global_settings(&json!({
        "provider": "claude-subscription", "model": "sonnet",
        "providers": {"claude-subscription": {"command": command}},
    }));
    env
}

/// A Claude plan's saved sign-in in `env`'s `HOME`.
pub(crate) fn signed_in(env: &Env) {
    let dir = env.root.join(".claude");
    std::fs::create_dir_all(&dir).unwrap();
    let creds = json!({"claudeAiOauth": {"accessToken": "sk-ant-oat01-magi-test",
        "refreshToken": "sk-ant-ort01-magi-test", "expiresAt": 4_102_444_800_000_u64,
        "scopes": ["user:inference", "user:profile"], "subscriptionType": "max"}});
    std::fs::write(dir.join(".credentials.json"), creds.to_string()).unwrap();
}

/// `initialize` in `env`: its answer and how long it took.
fn initialize(env: &Env) -> (Value, Duration) {
    let mut s = env.spawn();
    let t0 = Instant::now();
    let f = s.call("init", "initialize", &init_params(&["status"]));
    let took = t0.elapsed();
    s.shutdown_ok("bye");
    (f, took)
}

/// `magi-code doctor`'s output in `env`.
fn doctor(env: &Env) -> String {
    let out = env.command(&["doctor"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_claude_plan_signed_in_is_ready_and_nothing_else_is() {
    let cli = claude();
    let env = env_with(&cli);
    signed_in(&env);
    let (f, _) = initialize(&env);
    let status = &f["result"]["status"];
    assert_eq!(status["provider"], "claude-subscription", "{f}");
    assert_eq!(
        (&status["model"], &status["readiness"]),
        (&json!("sonnet"), &json!("ready"))
    );
    assert_eq!(
        status["selection"]["permitted_efforts"],
        json!(["default", "low", "medium", "high", "xhigh", "max"])
    );
    assert!(doctor(&env).contains("no problem found"));

    // No login at all.
    let env = env_with(&cli);
    let (f, _) = initialize(&env);
    assert_error(&f, Some("init"), "provider_unavailable");
    let said = doctor(&env);
    assert!(
        said.contains("is not signed in (run claude auth login)"),
        "{said}"
    );

    // An API key the CLI would bill: the `anthropic` provider serves keys, not this one.
    let env = env_with(&cli);
    std::fs::write(
        env.root.join(".claude.json"),
        r#"{"primaryApiKey":"sk-ant-api03-magi"}"#,
    )
    .unwrap();
    let (f, _) = initialize(&env);
    assert_error(&f, Some("init"), "provider_unavailable");
    let said = doctor(&env);
    assert!(
        said.contains("signed in with api_key (an API key)"),
        "{said}"
    );
    assert!(!said.contains("sk-ant"), "no secret printed: {said}");
}

#[test]
fn a_missing_executable_is_unavailable_and_doctor_names_it() {
    let env = env_with(Path::new("/nonexistent/magi/claude"));
    signed_in(&env);
    let (f, _) = initialize(&env);
    assert_error(&f, Some("init"), "provider_unavailable");
    let said = doctor(&env);
    assert!(
        said.contains("command \"/nonexistent/magi/claude\" not found"),
        "{said}"
    );
}

/// An executable script `body` in `env`'s root.
fn script(env: &Env, name: &str, body: &str) -> PathBuf {
    let path = env.root.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn a_hanging_auth_status_is_cut_at_10_s() {
    let probe = Env::new();
    let hang = script(&probe, "claude-hangs", "sleep 60");
    let env = env_with(&hang);
    let (f, took) = initialize(&env);
    assert_error(&f, Some("init"), "provider_unavailable");
    // The bound is 10 s; a check that waited for the CLI would take 60.
    assert!(took < Duration::from_secs(30), "{took:?}");
}

#[test]
fn the_cli_gets_no_provider_key_and_the_quiet_flag() {
    let probe = Env::new();
    let dump = probe.root.join("env.txt");
    let cli = script(
        &probe,
        "claude-env",
        &format!(
            "env > {}\necho '{{\"loggedIn\": true, \"authMethod\": \"claude.ai\"}}'\nsleep 30",
            dump.display()
        ),
    );
    let mut env = env_with(&cli);
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-api03-never-passed");
    env.set_var("OPENAI_API_KEY", "sk-openai-never-passed");
    env.set_var("ANTHROPIC_BASE_URL", "http://127.0.0.1:9");
    let (f, took) = initialize(&env);
    assert!(f.get("result").is_some(), "{f}");
    assert!(
        took < Duration::from_secs(10),
        "read up to the first object: {took:?}"
    );
    let seen = std::fs::read_to_string(&dump).unwrap();
    assert!(!seen.contains("never-passed"), "{seen}");
    assert!(
        seen.contains("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"),
        "{seen}"
    );
    assert!(
        seen.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:9"),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("HOME={}", env.root.display())),
        "{seen}"
    );
}

/// `model.catalog` and `model.catalog.status` in `env` (with the status capability), and a
/// `model.refresh` of the provider.
fn catalog(env: &Env) -> (Value, Value, Value) {
    let mut s = env.spawn();
    let _ = s.call(
        "init",
        "initialize",
        &init_params(&["model.catalog.status", "model.refresh"]),
    );
    let cat = s.call("c", "model.catalog", &json!({}));
    let status = s.call("s", "model.catalog.status", &json!({}));
    let refresh = s.call(
        "r",
        "model.refresh",
        &json!({"provider": "claude-subscription"}),
    );
    s.shutdown_ok("bye");
    (cat, status, refresh)
}

#[test]
fn the_catalog_is_built_in_plus_the_cache_and_refresh_is_unavailable() {
    let cli = claude();
    for signed in [true, false] {
        let env = Env::new();
        env.write_global_settings(&json!({
            "providers": {"claude-subscription": {"command": cli},
                "catalog": {"enabled": ["claude-subscription/sonnet",
                    "claude-subscription/haiku", "claude-subscription/claude-sonnet-4-6"]}},
        }));
        crate::common::write_catalog_cache(
            &env,
            "claude-subscription",
            json!([{"id": "claude-sonnet-4-6", "efforts": ["low", "high"]}]),
        );
        if signed {
            signed_in(&env);
        }
        let (cat, status, refresh) = catalog(&env);
        let choices: Vec<(String, String, Value)> = cat["result"]["choices"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["provider"] == "claude-subscription")
            .map(|c| {
                (
                    c["model"].as_str().unwrap().to_owned(),
                    c["availability"].as_str().unwrap().to_owned(),
                    c["permitted_efforts"].clone(),
                )
            })
            .collect();
        let availability = if signed {
            "available"
        } else {
            "authentication_unavailable"
        };
        let models: Vec<&str> = choices.iter().map(|c| c.0.as_str()).collect();
        assert_eq!(models, ["claude-sonnet-4-6", "haiku", "sonnet"], "{cat}");
        assert!(choices.iter().all(|c| c.1 == availability), "{choices:?}");
        assert_eq!(choices[1].2, json!(["default"]));
        assert_eq!(
            choices[2].2,
            json!(["default", "low", "medium", "high", "xhigh", "max"])
        );
        let row = status["result"]["providers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["provider"] == "claude-subscription")
            .unwrap()
            .clone();
        let state = if signed {
            "ready"
        } else {
            "authentication_unavailable"
        };
        assert_eq!(row["state"], state, "{status}");
        assert_eq!(row["cached_models"], 1, "{row}");
        assert_error(&refresh, Some("r"), "provider_unavailable");
    }
}
