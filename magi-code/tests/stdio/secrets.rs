//! Secrets kept out of tools (`backend.md` "Tools and approvals"): `shell`, hooks, MCP servers
//! and the Code Mode helper get the backend's environment less every provider key variable
//! and secret-looking name (but `shell_env.keep`), and a key the backend loaded is
//! `[redacted]` in any tool output before it is stored or sent to the model. Each test greps
//! for the values.

use crate::code_mode::{exec, the_helper};
use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm, Seen};
use crate::common::{fake_llm_env, start_session, start_turn, until_finished, Env};
use crate::mcp::{mcp_settings, real};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;
/// The configured provider's key (`api_key_env` `LOCAL_KEY`): loaded, sent as the bearer.
const KEY: &str = "Lk9f3Qw7Zr2Tn8vX";
/// A secret-looking name's value, never loaded: withheld from children only.
const GH: &str = "Gh7Tq2Lw9Xc4Vb8N";
/// Listed in `shell_env.keep`: children get it.
const KEPT: &str = "Kp3Rt8Ys1Uv6Wx0Z";

/// A fake-model env with the three variables, `PLAIN_VAR`, `shell_env.keep` and `extra`.
fn secret_env(llm: &FakeLlm, extra: &Value) -> Env {
    let mut settings = json!({
        "providers": {"local": {"api_key_env": "LOCAL_KEY"}},
        "shell_env": {"keep": ["KEPT_TOKEN"]},
        "tools": {"shell": "allow", "read": "allow", "mcp": "allow"},
    });
    crate::code_mode::merge(&mut settings, extra);
    let mut env = fake_llm_env(llm, &settings);
    env.set_var("LOCAL_KEY", KEY);
    env.set_var("GITHUB_TOKEN", GH);
    env.set_var("KEPT_TOKEN", KEPT);
    env.set_var("PLAIN_VAR", "plain-value");
    env
}

/// The tool message the model got for `call_id`.
fn result_for(seen: &Seen, call_id: &str) -> String {
    crate::code_mode::tool_result(seen, call_id)
}

/// An environment dump `text` has the plain and kept variables and no withheld one (the kept
/// one's value, secret-named, is a loaded value, `decisions.md` 54: a dump through a tool's
/// output shows it `[redacted]`).
fn filtered(text: &str) {
    assert!(text.contains("PLAIN_VAR"), "{text}");
    assert!(
        text.contains("KEPT_TOKEN"),
        "shell_env.keep passes KEPT_TOKEN: {text}"
    );
    for gone in ["LOCAL_KEY", "GITHUB_TOKEN", KEY, GH] {
        assert!(!text.contains(gone), "{gone} reached a child: {text}");
    }
}

/// No frame and no file under `root` (but `except`) holds `value`.
fn nowhere(frames: &[Value], root: &Path, value: &str, except: &[&Path]) {
    for f in frames {
        assert!(!f.to_string().contains(value), "a frame holds it: {f}");
    }
    for entry in walk(root) {
        if except.contains(&entry.as_path()) {
            continue;
        }
        let bytes = std::fs::read(&entry).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(value), "{} holds it", entry.display());
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Runs one turn whose model calls `name` with `input` as `t1`: the frames and what the
/// model got back.
fn one_call(env: &Env, llm: &FakeLlm, caps: &[&str]) -> (Vec<Value>, String) {
    let (mut s, sid) = start_session(env, caps);
    start_turn(&mut s, &sid, "go");
    let frames = until_finished(&mut s);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    drop(llm.next(WAIT));
    let text = result_for(&llm.next(WAIT), "t1");
    s.shutdown_ok("bye");
    (frames, text)
}

#[test]
fn env_through_shell_has_no_key_and_no_secret_name_but_keep() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("t1", "shell", &json!({"command": "env"}).to_string()),
        chat_text(&["ok"]),
    ]);
    let env = secret_env(&llm, &json!({}));
    let (frames, text) = one_call(&env, &llm, &[]);
    filtered(&text);
    assert!(text.contains("KEPT_TOKEN=[redacted]"), "{text}");
    nowhere(&frames, &env.root, KEY, &[]);
    nowhere(&frames, &env.root, GH, &[]);
}

#[test]
fn a_loaded_key_read_from_a_file_is_redacted_in_the_output_the_model_and_history_get() {
    let credentials = "Qz8Lm3Vt9Xw2Kp7R";
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "t1",
            "shell",
            &json!({"command": "cat \"$MC_HOME/credentials.json\"; echo; cat leak.txt"})
                .to_string(),
        ),
        chat_text(&["ok"]),
    ]);
    let env = secret_env(&llm, &json!({}));
    let creds = env.home().join("credentials.json");
    std::fs::write(
        &creds,
        json!({"anthropic": {"api_key": credentials}}).to_string(),
    )
    .unwrap();
    let leak = env.cwd.join("leak.txt");
    std::fs::write(&leak, format!("the key is {KEY}\n")).unwrap();
    let (frames, text) = one_call(&env, &llm, &[]);
    assert!(text.contains("\"api_key\":\"[redacted]\""), "{text}");
    assert!(text.contains("the key is [redacted]"), "{text}");
    assert!(!text.contains(credentials) && !text.contains(KEY), "{text}");
    nowhere(&frames, &env.root, credentials, &[&creds]);
    nowhere(&frames, &env.root, KEY, &[&leak]);
}

#[test]
fn a_hook_gets_the_same_environment() {
    let llm = FakeLlm::start(vec![
        chat_tool_call("t1", "read_file", &json!({"path": "a.txt"}).to_string()),
        chat_text(&["ok"]),
    ]);
    let hooks =
        json!({"hooks": {"pre_tool": [{"command": "env > hook_env.txt", "tools": ["read_file"]}]}});
    let env = secret_env(&llm, &hooks);
    std::fs::write(env.cwd.join("a.txt"), "a\n").unwrap();
    let (frames, _) = one_call(&env, &llm, &[]);
    let dump = std::fs::read_to_string(env.cwd.join("hook_env.txt")).expect("the hook ran");
    filtered(&dump);
    nowhere(&frames, &env.root, KEY, &[]);
}

#[test]
fn an_mcp_server_that_echoes_its_environment_has_no_secret_but_keep() {
    let every = real("server-everything", &["stdio"]);
    let llm = FakeLlm::start(vec![
        chat_tool_call("t1", "mcp__every__get-env", "{}"),
        chat_text(&["ok"]),
    ]);
    let env = secret_env(
        &llm,
        &json!({"mcp": mcp_settings(&[("every", &every)], true)}),
    );
    let (frames, text) = one_call(&env, &llm, &[]);
    filtered(&text);
    nowhere(&frames, &env.root, KEY, &[]);
    nowhere(&frames, &env.root, GH, &[]);
}

#[test]
fn the_code_mode_helper_gets_the_same_environment() {
    let llm = FakeLlm::start(vec![exec("c1", "while (true) {}")]);
    let env = secret_env(&llm, &json!({"code_mode": {"enabled": true}}));
    let (mut s, sid) = start_session(&env, &[]);
    let run_id = start_turn(&mut s, &sid, "spin");
    crate::common::until_match(&mut s, crate::common::is_event("activity"));
    let helper = the_helper(&s);
    let environ = std::fs::read(format!("/proc/{helper}/environ")).unwrap();
    let text = String::from_utf8_lossy(&environ).replace('\0', "\n");
    filtered(&text);
    drop(crate::common::cancel_turn(&mut s, &sid, &run_id));
    s.shutdown_ok("bye");
}

/// `decisions.md` 54: a secret-named variable the backend never loads is a loaded value all
/// the same, so a tool that reads the backend's own environment (`/proc/$PPID/environ`) gets
/// it back `[redacted]`, in what the model gets and in every stored file and frame.
#[test]
fn a_secret_named_value_read_from_the_backends_environment_is_redacted() {
    const SERVICE: &str = "Ms9Vq2Hn7Lp4Tz1C";
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "t1",
            "shell",
            &json!({"command": "tr '\\0' '\\n' < /proc/$PPID/environ | grep MY_SERVICE_TOKEN"})
                .to_string(),
        ),
        chat_text(&["ok"]),
    ]);
    let mut env = secret_env(&llm, &json!({}));
    env.set_var("MY_SERVICE_TOKEN", SERVICE);
    let (frames, text) = one_call(&env, &llm, &[]);
    assert!(text.contains("MY_SERVICE_TOKEN=[redacted]"), "{text}");
    nowhere(&frames, &env.root, SERVICE, &[]);
}

/// `decisions.md` 54: the variables an MCP server's `bearer_token_env` and `env_headers` name
/// are token variables: withheld from `shell` (as from hooks, servers and the helper, which
/// share the rule) even when their names look harmless, and their values are loaded values.
#[test]
fn variables_an_mcp_server_reads_tokens_from_never_reach_a_tool() {
    const BEARER: &str = "Br4Wq8Zx1Nc6Mv3K";
    const HEADER: &str = "Hd5Ty0Ui7Op2As9D";
    let llm = FakeLlm::start(vec![
        chat_tool_call(
            "t1",
            "shell",
            &json!({"command": "env; echo; echo seen: $(cat bearer.txt)"}).to_string(),
        ),
        chat_text(&["ok"]),
    ]);
    let mcp = json!({"mcp": {"servers": {"web": {
        "url": "http://127.0.0.1:9/mcp",
        "bearer_token_env": "WEB_BEARER",
        "env_headers": {"X-Org": "WEB_ORG_HEADER"},
    }}}});
    let mut env = secret_env(&llm, &mcp);
    env.set_var("WEB_BEARER", BEARER);
    env.set_var("WEB_ORG_HEADER", HEADER);
    let file = env.cwd.join("bearer.txt");
    std::fs::write(&file, BEARER).unwrap();
    let (frames, text) = one_call(&env, &llm, &[]);
    filtered(&text);
    for gone in ["WEB_BEARER", "WEB_ORG_HEADER", HEADER] {
        assert!(!text.contains(gone), "{gone} reached the shell: {text}");
    }
    assert!(text.contains("seen: [redacted]"), "a loaded value: {text}");
    nowhere(&frames, &env.root, BEARER, &[&file]);
}
