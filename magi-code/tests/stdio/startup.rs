//! Initialization of the real `serve --stdio` child: the startup worker, settings precedence,
//! provider readiness, startup errors, capability preflight and context identity
//! (local-agent-protocol.md "Implemented operations", "Shared startup and effects";
//! backend.md "Storage", "Settings", "Providers"; decisions.md 10, 20, 25).

use crate::common::{
    assert_error, assert_failed_status, assert_keys, assert_ready_status, assert_starting_status,
    init_params, result, Env, Server, BASE_CAPABILITIES,
};
use serde_json::{json, Value};
use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

fn delay(ms: u64) -> Value {
    json!({"providers": {"scripted": {"startup_delay_ms": ms}}})
}

/// `initialize` must fail with `code`; then `status` reports the failure, another
/// `initialize` is `already_initialized` and a session operation answers the same code.
#[track_caller]
fn assert_startup_fails(s: &mut Server, code: &str) {
    let f = s.call("init", "initialize", &init_params(&["status", "shutdown"]));
    assert_error(&f, Some("init"), code);
    let f = s.call("st", "status", &json!({}));
    assert_failed_status(result(&f), code);
    let f = s.call("init2", "initialize", &init_params(&["status"]));
    assert_error(&f, Some("init2"), "already_initialized");
    let f = s.call("sc", "session.create", &json!({}));
    assert_error(&f, Some("sc"), code);
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// The starting state
// ---------------------------------------------------------------------------------------

#[test]
fn status_during_startup_delay_is_answered_first() {
    let env = Env::new();
    env.write_global_settings(&delay(500));
    let mut s = env.spawn();
    let sent = Instant::now();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    s.request("st", "status", &json!({}));
    s.request("sc", "session.create", &json!({}));

    let f = s.next();
    assert_eq!(f["id"], "st", "status must not wait for startup: {f}");
    assert_eq!(f["seq"], 1);
    assert_starting_status(result(&f));

    let f = s.next();
    assert_error(&f, Some("sc"), "not_initialized");

    let f = s.response("init");
    assert_eq!(f["seq"], 3);
    assert!(
        sent.elapsed() >= Duration::from_millis(450),
        "initialize answered before the startup delay: {:?}",
        sent.elapsed()
    );
    let init = result(&f);
    assert_ready_status(&init["status"], "scripted", "echo");

    let f = s.call("st2", "status", &json!({}));
    assert_eq!(result(&f), &init["status"]);
    s.shutdown_ok("bye");
}

#[test]
fn shutdown_during_startup_cancels_initialize() {
    let env = Env::new();
    // Long enough that only cancellation can explain a prompt exit.
    env.write_global_settings(&delay(10_000));
    let mut s = env.spawn();
    let sent = Instant::now();
    s.request("init", "initialize", &init_params(&["status", "shutdown"]));
    let f = s.call("st", "status", &json!({}));
    assert_starting_status(result(&f));
    s.request("bye", "shutdown", &json!({}));
    let got = s.responses(&["init", "bye"]);
    assert_eq!(result(&got["bye"]), &json!({"state": "stopping"}));
    assert_error(&got["init"], Some("init"), "startup_cancelled");
    s.expect_eof();
    assert_eq!(s.exit_code(), 0);
    assert!(
        sent.elapsed() < Duration::from_secs(6),
        "startup was not cancelled: exit after {:?}",
        sent.elapsed()
    );
    s.assert_stderr_empty();
}

#[test]
fn second_initialize_while_starting_is_already_initialized() {
    let env = Env::new();
    env.write_global_settings(&delay(500));
    let mut s = env.spawn();
    s.request("i1", "initialize", &init_params(&["status", "shutdown"]));
    s.request("i2", "initialize", &init_params(&["status"]));
    // Initialization state precedes capability checks.
    s.request("i3", "initialize", &init_params(&["bogus"]));
    let f = s.next();
    assert_error(&f, Some("i2"), "already_initialized");
    let f = s.next();
    assert_error(&f, Some("i3"), "already_initialized");
    let f = s.response("i1");
    assert_ready_status(&result(&f)["status"], "scripted", "echo");
    let f = s.call("i4", "initialize", &init_params(&["status"]));
    assert_error(&f, Some("i4"), "already_initialized");
    s.shutdown_ok("bye");
}

#[test]
fn eof_during_startup_cancels_and_exits_0() {
    let env = Env::new();
    env.write_global_settings(&delay(10_000));
    let mut s = env.spawn();
    let sent = Instant::now();
    s.request("init", "initialize", &init_params(&["status"]));
    let f = s.call("st", "status", &json!({}));
    assert_starting_status(result(&f));
    s.close_stdin();
    // EOF does not guarantee the pending response; if one comes it is startup_cancelled.
    let code = s.exit_code();
    assert_eq!(code, 0);
    assert!(
        sent.elapsed() < Duration::from_secs(6),
        "startup was not cancelled on EOF: exit after {:?}",
        sent.elapsed()
    );
    s.assert_stderr_empty();
    // Whatever followed on stdout is at most the cancelled initialize.
    let rest = s.frames_until_eof();
    assert!(rest.len() <= 1, "unexpected frames after EOF: {rest:?}");
    for f in &rest {
        assert_error(f, Some("init"), "startup_cancelled");
    }
}

// ---------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_global_settings_key_is_configuration_invalid() {
    let env = Env::new();
    env.write_global_settings(&json!({"modle": "echo"}));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "configuration_invalid");
}

#[test]
fn unknown_project_settings_key_is_configuration_invalid() {
    let env = Env::new();
    env.write_project_settings(&json!({"tools": {"shel": "ask"}}));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "configuration_invalid");
}

#[test]
fn malformed_settings_are_configuration_invalid() {
    let bad: [&[u8]; 6] = [
        b"{not json",
        b"[]",
        br#"{"provider": 5}"#,
        br#"{"providers": {"scripted": {"startup_delay_ms": 10001}}}"#,
        br#"{"providers": {"scripted": {"startup_delay_ms": "500"}}}"#,
        br#"{"provider": "scripted", "provider": "scripted"}"#,
    ];
    for settings in bad {
        let env = Env::new();
        env.write_global_settings_raw(settings);
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(&["status"]));
        assert_eq!(
            f["error"],
            json!({"code": "configuration_invalid"}),
            "settings {:?} answered {f}",
            String::from_utf8_lossy(settings)
        );
        s.shutdown_ok("bye");
    }
}

#[test]
fn project_settings_override_global_to_ready() {
    let env = Env::new();
    env.write_global_settings(&json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}));
    env.write_project_settings(&json!({"provider": "scripted", "model": "echo"}));
    let mut s = env.spawn();
    let init = s.initialize();
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn project_settings_override_global_to_unavailable() {
    let env = Env::new();
    env.write_global_settings(&json!({"provider": "scripted", "model": "echo"}));
    env.write_project_settings(&json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "provider_unavailable");
}

#[test]
fn project_startup_delay_overrides_global() {
    let env = Env::new();
    env.write_global_settings(&delay(0));
    env.write_project_settings(&delay(500));
    let mut s = env.spawn();
    s.request("init", "initialize", &init_params(&["status"]));
    let f = s.call("st", "status", &json!({}));
    assert_starting_status(result(&f));
    let f = s.response("init");
    result(&f);
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// Runner settings and instructions (runner.md §2, §3, §5)
// ---------------------------------------------------------------------------------------

#[test]
fn runner_and_provider_keys_at_their_edges_are_ready() {
    let env = Env::new();
    env.write_global_settings(&json!({
        "runner": {"max_steps": 1000, "context_window": 1_000},
        "providers": {
            "anthropic": {"max_output_tokens": 1},
            "openai": {"max_output_tokens": 1_000_000},
            "local": {"kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
                      "wire_api": "responses", "max_output_tokens": 16_384}
        }
    }));
    env.write_project_settings(&json!({"runner": {"max_steps": 1}}));
    let mut s = env.spawn();
    let init = s.initialize();
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn runner_and_provider_keys_out_of_range_are_configuration_invalid() {
    let bad = [
        json!({"runner": {"max_steps": 0}}),
        json!({"runner": {"max_steps": 1001}}),
        json!({"runner": {"context_window": 999}}),
        json!({"runner": {"context_window": 10_000_001}}),
        json!({"runner": {"steps": 5}}),
        json!({"providers": {"anthropic": {"max_output_tokens": 0}}}),
        json!({"providers": {"openai": {"max_output_tokens": 1_000_001}}}),
        json!({"providers": {"openai": {"wire_api": "chat"}}}),
        json!({"providers": {"local": {"kind": "openai-compatible",
               "base_url": "http://127.0.0.1:9/v1", "wire_api": "completions"}}}),
    ];
    for settings in &bad {
        let env = Env::new();
        env.write_project_settings(settings);
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(&["status"]));
        assert_eq!(
            f["error"],
            json!({"code": "configuration_invalid"}),
            "settings {settings} answered {f}"
        );
        s.shutdown_ok("bye");
    }
}

#[test]
fn code_mode_keys_at_their_edges_are_ready() {
    let env = Env::new();
    env.write_global_settings(&json!({
        "code_mode": {"enabled": true, "timeout_ms": 1_000, "cpu_ms": 600_000,
                      "memory_mib": 16, "max_calls": 1_000, "tools": {"task": "allow"}},
        "tools": {"code": "ask"}
    }));
    env.write_project_settings(&json!({"code_mode": {"only": true, "max_calls": 1}}));
    let mut s = env.spawn();
    let init = s.initialize();
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn code_mode_keys_out_of_range_are_configuration_invalid() {
    let bad = [
        json!({"code_mode": {"timeout_ms": 999}}),
        json!({"code_mode": {"timeout_ms": 3_600_001}}),
        json!({"code_mode": {"cpu_ms": 99}}),
        json!({"code_mode": {"cpu_ms": 600_001}}),
        json!({"code_mode": {"memory_mib": 15}}),
        json!({"code_mode": {"memory_mib": 1_025}}),
        json!({"code_mode": {"max_calls": 0}}),
        json!({"code_mode": {"max_calls": 1_001}}),
        json!({"code_mode": {"only": true}}),
        json!({"code_mode": {"tools": {"code": "allow"}}}),
        json!({"code_mode": {"enable": true}}),
        json!({"tools": {"code": "never"}}),
    ];
    for settings in &bad {
        let env = Env::new();
        env.write_project_settings(settings);
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(&["status"]));
        assert_eq!(
            f["error"],
            json!({"code": "configuration_invalid"}),
            "settings {settings} answered {f}"
        );
        s.shutdown_ok("bye");
    }
}

#[test]
fn missing_instructions_path_is_configuration_invalid() {
    let env = Env::new();
    env.write_global_settings(&json!({"instructions": ["docs/missing.md"]}));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "configuration_invalid");
}

#[test]
fn folder_or_fifo_instructions_path_is_configuration_invalid_promptly() {
    for (name, make) in [("dir", "folder"), ("pipe", "fifo")] {
        let env = Env::new();
        let p = env.cwd.join(name);
        if make == "folder" {
            fs::create_dir(&p).unwrap();
        } else {
            let ok = std::process::Command::new("mkfifo").arg(&p).status();
            assert!(ok.unwrap().success(), "mkfifo failed");
        }
        env.write_project_settings(&json!({"instructions": [name]}));
        let mut s = env.spawn();
        let sent = Instant::now();
        assert_startup_fails(&mut s, "configuration_invalid");
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "a {make} blocked startup for {:?}",
            sent.elapsed()
        );
    }
}

#[test]
fn valid_instructions_are_ready_and_never_sent_to_the_client() {
    let env = Env::new();
    let marker = "instructions-marker-7f3a";
    fs::create_dir(env.cwd.join(".git")).unwrap();
    fs::write(env.cwd.join("AGENTS.md"), format!("project {marker}")).unwrap();
    fs::create_dir(env.cwd.join("docs")).unwrap();
    fs::write(
        env.cwd.join("docs").join("notes.md"),
        format!("notes {marker}"),
    )
    .unwrap();
    env.write_global_settings(&json!({"instructions": ["docs/notes.md"]}));
    fs::write(env.home().join("AGENTS.md"), format!("home {marker}")).unwrap();
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status", "shutdown"]));
    assert!(
        !f.to_string().contains(marker),
        "instructions reached the client: {f}"
    );
    assert_ready_status(&result(&f)["status"], "scripted", "echo");
    let f = s.call("st", "status", &json!({}));
    assert!(
        !f.to_string().contains(marker),
        "instructions reached the client: {f}"
    );
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// Provider readiness
// ---------------------------------------------------------------------------------------

#[test]
fn anthropic_without_key_is_provider_unavailable() {
    let env = Env::new();
    env.write_global_settings(&json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "provider_unavailable");
}

/// `status` after a failed `initialize`.
fn failed_status(env: &Env) -> Value {
    let mut s = env.spawn();
    s.call("init", "initialize", &init_params(&["status", "shutdown"]));
    let st = result(&s.call("st", "status", &json!({}))).clone();
    s.shutdown_ok("bye");
    st
}

#[test]
fn a_failed_startup_reports_the_selection_it_had_once_settings_were_admitted() {
    // Failing after the settings were admitted: the selection they made is shown.
    let env = Env::new();
    env.write_global_settings(&json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}));
    let st = failed_status(&env);
    assert_failed_status(&st, "provider_unavailable");
    assert_eq!(
        (&st["provider"], &st["model"]),
        (&json!("anthropic"), &json!("claude-sonnet-4-5")),
        "{st}"
    );
    let env = Env::new();
    env.write_global_settings(&json!({
        "mcp": {"servers": {"fs": {"command": "/nonexistent/magi-test-mcp", "enabled": true}}}
    }));
    let st = failed_status(&env);
    assert_failed_status(&st, "mcp_unavailable");
    assert_eq!(
        (&st["provider"], &st["model"]),
        (&json!("scripted"), &json!("echo"))
    );
    // Settings that were not admitted made no selection: nothing to show.
    let env = Env::new();
    env.write_global_settings(&json!({"no_such_key": 1}));
    let st = failed_status(&env);
    assert_failed_status(&st, "configuration_invalid");
    assert!(st["provider"].is_null() && st["model"].is_null(), "{st}");
}

#[test]
fn anthropic_with_key_is_ready() {
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "dummy-key-value-0123456789");
    env.write_global_settings(&json!({"provider": "anthropic", "model": "claude-sonnet-4-5"}));
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status", "shutdown"]));
    assert!(
        !f.to_string().contains("dummy-key-value"),
        "credentials must never be returned"
    );
    let init = result(&f);
    assert_ready_status(&init["status"], "anthropic", "claude-sonnet-4-5");
    let f = s.call("st", "status", &json!({}));
    assert_eq!(result(&f)["provider"], "anthropic");
    assert_eq!(result(&f)["readiness"], "ready");
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// MCP and storage failures
// ---------------------------------------------------------------------------------------

#[test]
fn enabled_mcp_server_is_mcp_unavailable() {
    let env = Env::new();
    env.write_global_settings(&json!({
        "mcp": {"servers": {"fs": {"command": "/nonexistent/magi-test-mcp", "args": [], "enabled": true}}}
    }));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "mcp_unavailable");
}

#[test]
fn project_enabled_mcp_server_cannot_approve_itself() {
    let env = Env::new();
    env.write_project_settings(&json!({
        "mcp": {"servers": {"fs": {"command": "/nonexistent/magi-test-mcp", "enabled": true}}}
    }));
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "mcp_unavailable");
}

#[test]
fn disabled_mcp_server_does_not_block_readiness() {
    let env = Env::new();
    env.write_global_settings(&json!({
        "mcp": {"servers": {"fs": {"command": "/nonexistent/magi-test-mcp", "enabled": false}}}
    }));
    let mut s = env.spawn();
    let init = s.initialize();
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn mc_home_regular_file_is_startup_failed() {
    let env = Env::new();
    fs::write(env.home(), b"not a directory").unwrap();
    let mut s = env.spawn();
    assert_startup_fails(&mut s, "startup_failed");
    assert_eq!(fs::read(env.home()).unwrap(), b"not a directory");
}

// ---------------------------------------------------------------------------------------
// Capability preflight
// ---------------------------------------------------------------------------------------

#[test]
fn unsupported_capability_has_no_effects_and_allows_a_corrected_initialize() {
    let env = Env::new();
    let mut s = env.spawn();
    let f = s.call("i1", "initialize", &init_params(&["status", "bogus"]));
    assert_error(&f, Some("i1"), "unsupported_capability");
    let f = s.call("i2", "initialize", &init_params(&["not.a.capability"]));
    assert_error(&f, Some("i2"), "unsupported_capability");
    assert!(
        !env.home().exists(),
        "capability preflight must not touch the filesystem"
    );
    // Not admitted: status still needs initialization.
    let f = s.call("st", "status", &json!({}));
    assert_error(&f, Some("st"), "not_initialized");
    let f = s.call("i3", "initialize", &init_params(&["status", "shutdown"]));
    assert_ready_status(&result(&f)["status"], "scripted", "echo");
    assert!(env.home().is_dir());
    s.shutdown_ok("bye");
}

#[test]
fn capability_count_and_params_preflight_is_invalid_params() {
    let env = Env::new();
    let mut s = env.spawn();
    let mut seventeen: Vec<&str> = BASE_CAPABILITIES.to_vec();
    seventeen.push("bogus");
    let f = s.call("i1", "initialize", &init_params(&seventeen));
    assert_error(&f, Some("i1"), "invalid_params");
    // The count bound is checked before support: 17 valid-looking names are still too many.
    let mut seventeen_known: Vec<&str> = BASE_CAPABILITIES.to_vec();
    seventeen_known.push("status");
    let f = s.call("i2", "initialize", &init_params(&seventeen_known));
    assert_error(&f, Some("i2"), "invalid_params");
    let bad_params = [
        ("i3", json!({"required_capabilities": ["bad name"]})),
        ("i4", json!({})),
        (
            "i5",
            json!({"required_capabilities": ["status"], "extra": true}),
        ),
        ("i6", json!({"required_capabilities": "status"})),
        ("i7", json!([])),
        ("i8", json!({"required_capabilities": [5]})),
    ];
    for (id, params) in &bad_params {
        let f = s.call(id, "initialize", params);
        assert_error(&f, Some(id), "invalid_params");
    }
    assert!(
        !env.home().exists(),
        "parameter preflight must not touch the filesystem"
    );
    let f = s.call("ok", "initialize", &init_params(&BASE_CAPABILITIES));
    let init = result(&f);
    assert_keys(init, &["capabilities", "limits", "status"]);
    assert_eq!(init["capabilities"], json!(BASE_CAPABILITIES));
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn negotiated_extension_is_not_unsupported_capability() {
    let env = Env::new();
    let mut s = env.spawn();
    let f = s.call(
        "init",
        "initialize",
        &init_params(&["status", "session.discover", "shutdown"]),
    );
    result(&f);
    let f = s.call("d1", "session.discover", &json!({}));
    assert_ne!(
        f["error"],
        json!({"code": "unsupported_capability"}),
        "negotiated session.discover must be enabled: {f}"
    );
    // Whatever the answer, the connection remains usable.
    let f = s.call("st", "status", &json!({}));
    result(&f);
    s.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// Context identity
// ---------------------------------------------------------------------------------------

fn context_of(env: &Env) -> String {
    let mut s = env.spawn();
    let init = s.initialize();
    let ctx = assert_ready_status(&init["status"], "scripted", "echo");
    let f = s.call("st", "status", &json!({}));
    assert_eq!(result(&f)["context_id"], ctx.as_str());
    s.shutdown_ok("bye");
    ctx
}

#[test]
fn context_id_is_stable_across_storage_root_aliases() {
    let env = Env::new();
    let real = context_of(&env);

    // MC_HOME through a symlink to the same directory.
    let link = env.root.join("home-link");
    symlink(env.home(), &link).unwrap();
    let mut alias = Env::new();
    alias.cwd = env.cwd.clone();
    alias.set_mc_home(&link);
    assert_eq!(context_of(&alias), real, "symlinked MC_HOME");

    // MC_HOME as a non-canonical path (relative to the cwd, through `..`).
    alias.set_mc_home("../home");
    assert_eq!(context_of(&alias), real, "relative MC_HOME");

    // Same paths, new child: same identity.
    assert_eq!(context_of(&env), real);
}

#[test]
fn context_id_differs_for_distinct_roots_and_cwds() {
    let env = Env::new();
    let base = context_of(&env);

    let mut other_root = Env::new();
    other_root.cwd = env.cwd.clone();
    assert_ne!(context_of(&other_root), base, "distinct storage root");

    let mut other_cwd = Env::new();
    other_cwd.set_mc_home(env.home());
    assert_ne!(context_of(&other_cwd), base, "distinct cwd");
}

#[test]
fn shell_env_keep_takes_64_names_and_the_65th_is_configuration_invalid() {
    let names = |n: usize| (0..n).map(|i| format!("KEEP_{i}")).collect::<Vec<_>>();
    let env = Env::new();
    env.write_global_settings(&json!({"shell_env": {"keep": names(64)}}));
    let mut s = env.spawn();
    let init = s.call("init", "initialize", &init_params(&["status"]));
    assert!(init.get("result").is_some(), "{init}");
    s.shutdown_ok("bye");
    for settings in [
        json!({"shell_env": {"keep": names(65)}}),
        json!({"shell_env": {"keep": ["A=B"]}}),
        json!({"shell_env": {"kept": []}}),
    ] {
        let env = Env::new();
        env.write_project_settings(&settings);
        let mut s = env.spawn();
        let f = s.call("init", "initialize", &init_params(&["status"]));
        assert_eq!(
            f["error"],
            json!({"code": "configuration_invalid"}),
            "{settings}"
        );
        s.shutdown_ok("bye");
    }
}
