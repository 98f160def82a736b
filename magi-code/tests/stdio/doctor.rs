//! `magi-code doctor` (issue 19): each problem `initialize` would meet, with its file, key and
//! fix; exit 0 exactly when `initialize` answers ready (each case also asks a real child), and
//! never a secret. `chat` prints the same findings after a failed startup.

use crate::common::{init_params, Env};
use serde_json::{json, Value};
use std::process::Stdio;

/// Runs `doctor` in `env`: its exit code and stdout.
fn doctor(env: &Env) -> (i32, String) {
    let out = env
        .command(&["doctor"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (out.status.code().unwrap_or(-1), text)
}

/// Whether a real child's `initialize` answers a result (ready) in `env`.
fn ready(env: &Env) -> bool {
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status"]));
    s.shutdown_ok("bye");
    f.get("result").is_some()
}

/// Runs `doctor --json` in `env`: its exit code and the array it printed (one line).
fn doctor_json(env: &Env) -> (i32, Vec<Value>) {
    let out = env
        .command(&["doctor", "--json"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text.lines().count(), 1, "{text}");
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    for f in &all {
        let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["file", "fix", "key", "message", "severity"], "{f}");
    }
    (out.status.code().unwrap_or(-1), all)
}

/// The `(severity, file, key)` of each finding `doctor --json` prints in `env`.
fn placed(env: &Env) -> Vec<(String, Option<String>, Option<String>)> {
    let s = |v: &Value| v.as_str().map(str::to_owned);
    doctor_json(env)
        .1
        .iter()
        .map(|f| (s(&f["severity"]).unwrap(), s(&f["file"]), s(&f["key"])))
        .collect()
}

/// An error finding's place as `placed` gives it.
fn error(
    file: Option<&std::path::Path>,
    key: Option<&str>,
) -> (String, Option<String>, Option<String>) {
    (
        "error".to_owned(),
        file.map(|f| f.display().to_string()),
        key.map(str::to_owned),
    )
}

/// Doctor finds exactly `want` (one line each, in order), exits 1, and initialize fails;
/// `doctor --json` gives the same findings, each line's message and fix its entry's.
fn finds(env: &Env, want: &[String]) {
    let (code, out) = doctor(env);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines, want, "{out}");
    assert_eq!(code, 1);
    let (code, all) = doctor_json(env);
    assert_eq!(code, 1);
    let errors: Vec<&Value> = all.iter().filter(|f| f["severity"] == "error").collect();
    assert_eq!(errors.len(), want.len(), "{all:?}");
    for (line, f) in want.iter().zip(errors) {
        let message = f["message"].as_str().unwrap();
        let told = match f["fix"].as_str() {
            Some(fix) => format!(": {message} ({fix})"),
            None => format!(": {message}"),
        };
        assert!(line.ends_with(&told), "{line} vs {f}");
    }
    assert!(
        !ready(env),
        "initialize would be ready, doctor said otherwise"
    );
}

#[test]
fn a_clean_setup_is_ready_and_says_so() {
    let env = Env::new();
    assert_eq!(doctor_json(&env), (0, Vec::new()));
    let (code, out) = doctor(&env);
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        out,
        "magi-code doctor: no problem found; initialize would be ready\n"
    );
    assert!(ready(&env));
}

#[test]
fn a_typo_key_is_named_with_the_nearest_key() {
    let env = Env::new();
    env.write_global_settings(&json!({"tols": {"shell": "ask"}}));
    let file = env.home().join("settings.json");
    finds(
        &env,
        &[format!(
            "{}: unknown key \"tols\" (did you mean \"tools\"?)",
            file.display()
        )],
    );
    assert_eq!(placed(&env), [error(Some(&file), Some("tols"))]);
}

#[test]
fn a_bad_project_value_names_the_project_file_and_the_key() {
    let env = Env::new();
    env.write_project_settings(&json!({"code_mode": {"cpu_ms": 5}}));
    let file = env.cwd.join(".magi").join("settings.json");
    finds(&env, &[bad_key(&file, "code_mode", "code_mode.cpu_ms")]);
    assert_eq!(placed(&env), [error(Some(&file), Some("code_mode"))]);
}

/// The finding of a key invalid on its own.
fn bad_key(file: &std::path::Path, key: &str, why: &str) -> String {
    format!(
        "{}: key \"{key}\": {why} (fix or remove \"{key}\" (docs/runner.md lists the keys))",
        file.display()
    )
}

#[test]
fn every_problem_is_told_not_just_the_first() {
    let env = Env::new();
    env.write_global_settings(&json!({
        "tols": {}, "effort": "extreme", "runner": {"max_steps": 0},
        "provider": "anthropic", "model": "claude-x",
    }));
    env.write_project_settings(&json!({"code_mode": {"cpu_ms": 5}}));
    let (global, project) = (
        env.home().join("settings.json"),
        env.cwd.join(".magi").join("settings.json"),
    );
    finds(
        &env,
        &[
            format!(
                "{}: unknown key \"tols\" (did you mean \"tools\"?)",
                global.display()
            ),
            bad_key(&global, "effort", "bad effort"),
            bad_key(&global, "runner", "max_steps"),
            bad_key(&project, "code_mode", "code_mode.cpu_ms"),
            "provider anthropic: ANTHROPIC_API_KEY is not set and credentials.json has no key \
             (export ANTHROPIC_API_KEY=… or add {\"anthropic\": {\"api_key\": …}} to credentials.json)"
                .to_owned(),
        ],
    );
}

#[test]
fn an_approved_server_that_cannot_start_is_named_with_its_cause() {
    let env = Env::new();
    let missing = json!({"command": "magi-no-such-mcp-server"});
    let exits = json!({"command": "sh", "args": ["-c", "exit 3"]});
    env.write_global_settings(&json!({
        "mcp": crate::mcp::mcp_settings(&[("a", &missing), ("b", &exits)], true),
    }));
    finds(
        &env,
        &[
            "mcp server \"a\": command \"magi-no-such-mcp-server\" not found \
             (install it, or fix mcp.servers.a.command)"
                .to_owned(),
            "mcp server \"b\": exited before it answered initialize \
             (run its command yourself to see what it says)"
                .to_owned(),
        ],
    );
    assert_eq!(
        placed(&env),
        [
            error(None, Some("mcp.servers.a")),
            error(None, Some("mcp.servers.b"))
        ]
    );
}

#[test]
fn an_approved_http_server_refusing_its_token_is_a_401() {
    use crate::common::fake_mcp::{FakeMcp, Faults};
    let fake = FakeMcp::start(Faults {
        always_401: true,
        ..Faults::default()
    });
    let mut env = Env::new();
    let def = json!({"url": fake.url, "bearer_token_env": "MCP_DOCTOR_BEARER"});
    env.write_global_settings(&json!({"mcp": crate::mcp::mcp_settings(&[("web", &def)], true)}));
    finds(
        &env,
        &[
            "mcp server \"web\": MCP_DOCTOR_BEARER is not set (export MCP_DOCTOR_BEARER=…)"
                .to_owned(),
        ],
    );
    env.set_var("MCP_DOCTOR_BEARER", "tok-doctor-secret-401");
    let (code, out) = doctor(&env);
    assert_eq!(
        out,
        "mcp server \"web\": refused the authorization (401) (check the token in MCP_DOCTOR_BEARER)\n"
    );
    assert_eq!(code, 1);
    assert!(!out.contains("tok-doctor-secret"));
    assert!(!ready(&env));
}

#[test]
fn an_approved_server_that_starts_is_ready() {
    let env = Env::new();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/fake_server.py");
    let ok = json!({"command": "python3", "args": [script, "ok"]});
    env.write_global_settings(&json!({"mcp": crate::mcp::mcp_settings(&[("fs", &ok)], true)}));
    let (code, out) = doctor(&env);
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "magi-code doctor: no problem found; initialize would be ready\n"
        )
    );
    assert!(ready(&env));
}

#[test]
fn a_missing_key_an_unknown_provider_and_an_unknown_model_each_say_what_to_fix() {
    let mut env = Env::new();
    env.write_global_settings(&json!({"provider": "anthropic", "model": "claude-x"}));
    // A key of another provider is never printed.
    env.set_var("OPENAI_API_KEY", "sk-doctor-secret-value-123456");
    let (code, out) = doctor(&env);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "provider anthropic: ANTHROPIC_API_KEY is not set and credentials.json has no key \
         (export ANTHROPIC_API_KEY=… or add {\"anthropic\": {\"api_key\": …}} to credentials.json)\n"
    );
    assert!(!out.contains("sk-doctor-secret"));
    assert!(!ready(&env));
    assert_eq!(placed(&env), [error(None, Some("ANTHROPIC_API_KEY"))]);
    let (_, all) = doctor_json(&env);
    assert!(!all
        .iter()
        .any(|f| f.to_string().contains("sk-doctor-secret")));

    let env = Env::new();
    env.write_global_settings(&json!({"provider": "nope", "model": "m"}));
    finds(
        &env,
        &[
            "provider nope: is neither built in (anthropic, claude-subscription, codex, openai, scripted) nor configured \
           under providers (add providers.nope or pick a built-in provider)"
                .to_owned(),
        ],
    );
    assert_eq!(placed(&env), [error(None, Some("provider"))]);

    let env = Env::new();
    env.write_global_settings(&json!({"model": "eco"}));
    finds(
        &env,
        &["provider scripted: has no model \"eco\" (use model echo or script)".to_owned()],
    );
    assert_eq!(placed(&env), [error(None, Some("model"))]);

    // `codex` reads the Codex CLI's sign-in; an empty CODEX_HOME has none.
    let mut env = Env::new();
    let codex_home = env.root.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    env.set_var("CODEX_HOME", codex_home.to_str().unwrap());
    env.write_global_settings(&json!({"provider": "codex", "model": "gpt-5"}));
    finds(
        &env,
        &[format!(
            "provider codex: {} holds no usable ChatGPT sign-in (run codex login)",
            codex_home.join("auth.json").display()
        )],
    );
    let auth = codex_home.join("auth.json");
    assert_eq!(placed(&env), [error(Some(&auth), Some("provider"))]);

    let env = Env::new();
    let script = env.root.join("missing.json");
    env.write_global_settings(
        &json!({"model": "script", "providers": {"scripted": {"script": script}}}),
    );
    finds(
        &env,
        &[format!(
            "providers.scripted.script: {} is not a file",
            script.display()
        )],
    );
    assert_eq!(
        placed(&env),
        [error(None, Some("providers.scripted.script"))]
    );
}

#[test]
fn an_unapproved_server_names_the_command_that_approves_it() {
    let env = Env::new();
    env.write_global_settings(
        &json!({"mcp": {"servers": {"fs": {"command": "node", "enabled": true}}}}),
    );
    finds(
        &env,
        &["mcp server \"fs\": not approved (magi-code mcp approve fs)".to_owned()],
    );
    assert_eq!(placed(&env), [error(None, Some("mcp.servers.fs"))]);
}

#[test]
fn a_bad_profile_names_its_file() {
    let env = Env::new();
    let dir = env.cwd.join(".magi").join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("x.md"), "no front matter here\n").unwrap();
    let (code, out) = doctor(&env);
    assert_eq!(code, 1);
    let want = format!("profile {}: ", dir.join("x.md").display());
    assert!(out.starts_with(&want) && out.lines().count() == 1, "{out}");
    assert!(!ready(&env));
    assert_eq!(placed(&env), [error(Some(&dir.join("x.md")), None)]);
}

#[test]
fn an_mc_home_that_is_a_file_is_named() {
    let mut env = Env::new();
    let file = env.root.join("plain-file");
    std::fs::write(&file, "x").unwrap();
    env.set_mc_home(&file);
    finds(
        &env,
        &[format!(
            "MC_HOME {}: is not a folder (point MC_HOME at a folder)",
            file.display()
        )],
    );
    assert_eq!(placed(&env), [error(Some(&file), Some("MC_HOME"))]);
}

#[test]
fn chat_prints_the_findings_after_a_failed_startup() {
    let env = Env::new();
    env.write_global_settings(&json!({"tols": {}}));
    let out = env
        .command(&["chat"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("initialization failed: configuration_invalid"),
        "{err}"
    );
    assert!(
        err.contains("unknown key \"tols\" (did you mean \"tools\"?)"),
        "{err}"
    );
}

#[test]
fn a_skill_left_out_is_a_note_that_keeps_exit_0() {
    let env = Env::new();
    let skills = env.cwd.join(".magi").join("skills");
    for (folder, text) in [
        ("good", "---\nname: good\ndescription: Works.\n---\n"),
        ("renamed", "---\nname: other\ndescription: Moved.\n---\n"),
        ("bare", "---\nname: bare\n---\n"),
    ] {
        std::fs::create_dir_all(skills.join(folder)).unwrap();
        std::fs::write(skills.join(folder).join("SKILL.md"), text).unwrap();
    }
    let (code, out) = doctor(&env);
    assert_eq!(code, 0, "{out}");
    let file = |f: &str| {
        std::fs::canonicalize(&env.cwd)
            .unwrap()
            .join(".magi/skills")
            .join(f)
            .join("SKILL.md")
            .display()
            .to_string()
    };
    assert_eq!(
        out,
        format!(
            "note: skill {}: left out: its front matter has no description\n\
             note: skill {}: left out: its name differs from its folder's\n\
             magi-code doctor: no problem found; initialize would be ready\n",
            file("bare"),
            file("renamed")
        )
    );
    assert!(ready(&env));
    // Notes are in the JSON too, and keep the exit code 0.
    let (code, all) = doctor_json(&env);
    assert_eq!(code, 0);
    let notes: Vec<(&str, &str)> = all
        .iter()
        .map(|f| (f["severity"].as_str().unwrap(), f["file"].as_str().unwrap()))
        .collect();
    assert_eq!(
        notes,
        [
            ("note", file("bare").as_str()),
            ("note", file("renamed").as_str())
        ]
    );
}

#[test]
fn a_settings_file_that_is_not_json_is_named_without_a_key() {
    let env = Env::new();
    env.write_global_settings(&json!({}));
    let file = env.home().join("settings.json");
    std::fs::write(&file, "{\"provider\": ").unwrap();
    let (code, out) = doctor(&env);
    assert_eq!(code, 1);
    assert!(out.starts_with(&format!("{}: ", file.display())), "{out}");
    assert!(!ready(&env));
    assert_eq!(placed(&env), [error(Some(&file), None)]);
}

#[test]
fn the_other_finding_kinds_name_their_file_and_key_in_json() {
    // A configured provider whose key variable is unset.
    let env = Env::new();
    env.write_global_settings(&json!({"provider": "local", "model": "m", "providers": {"local": {
        "kind": "openai-compatible", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "LOCAL_DOCTOR_KEY"}}}));
    finds(
        &env,
        &["provider local: LOCAL_DOCTOR_KEY is not set (export LOCAL_DOCTOR_KEY=…)".to_owned()],
    );
    assert_eq!(placed(&env), [error(None, Some("LOCAL_DOCTOR_KEY"))]);

    // Model `script` without a script.
    let env = Env::new();
    env.write_global_settings(&json!({"model": "script"}));
    finds(
        &env,
        &["providers.scripted.script: is not set (model script needs it)".to_owned()],
    );
    assert_eq!(
        placed(&env),
        [error(None, Some("providers.scripted.script"))]
    );

    // An instructions file that is missing.
    let env = Env::new();
    env.write_global_settings(&json!({"instructions": ["no-such-notes.md"]}));
    let (code, out) = doctor(&env);
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("instructions: "), "{out}");
    assert!(!ready(&env));
    assert_eq!(placed(&env), [error(None, Some("instructions"))]);

    // An agent that names no profile.
    let env = Env::new();
    env.write_global_settings(&json!({"agent": "nobody"}));
    finds(
        &env,
        &["profiles: agent \"nobody\" names no profile".to_owned()],
    );
    assert_eq!(placed(&env), [error(None, Some("agent"))]);

    // Each file sound alone, the merge not: `code_mode.only` in the project, `enabled` unset.
    let env = Env::new();
    env.write_global_settings(&json!({}));
    env.write_project_settings(&json!({"code_mode": {"only": true}}));
    let project = env.cwd.join(".magi").join("settings.json");
    let (code, out) = doctor(&env);
    assert_eq!(code, 1, "{out}");
    assert!(!ready(&env));
    assert_eq!(placed(&env), [error(Some(&project), None)]);

    // An MC_HOME under missing folders is made by initialize, so doctor finds nothing; one
    // under a file cannot be.
    let mut env = Env::new();
    env.set_mc_home(env.root.join("no-such-parent").join("home"));
    assert_eq!(doctor_json(&env), (0, Vec::new()));
    assert!(ready(&env));
    let mut env = Env::new();
    std::fs::write(env.root.join("plain-file"), "x").unwrap();
    let home = env.root.join("plain-file").join("home");
    env.set_mc_home(&home);
    finds(
        &env,
        &[format!(
            "MC_HOME {}: cannot be created: a file stands in its path (point MC_HOME at a folder)",
            home.display()
        )],
    );
    assert_eq!(placed(&env), [error(Some(&home), Some("MC_HOME"))]);
}
