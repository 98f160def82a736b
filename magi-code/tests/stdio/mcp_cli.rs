//! `magi-code mcp list | approve | logout` through the binary (`backend.md` "MCP servers over
//! HTTP", `decisions.md` 41): approval only after a yes on a terminal, written to the global
//! settings; never a token on stdout or stderr.

use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

pub fn mcp_cmd(home: &Path, cwd: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_magi-code"));
    c.arg("mcp")
        .args(args)
        .env("MC_HOME", home)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

pub fn run(home: &Path, cwd: &Path, args: &[&str]) -> (i32, String, String) {
    let out: Output = mcp_cmd(home, cwd, args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn sha256(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

const FS: &str = r#"{"args":["-y","server"],"command":"npx","name":"fs"}"#;

/// Global settings with three stdio servers: `fs` approved, `new` not, `off` disabled.
fn setup() -> (tempfile::TempDir, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let settings = serde_json::json!({
        "model": "echo",
        "retention_days": 7,
        "mcp": {
            "servers": {
                "fs": {"command": "npx", "args": ["-y", "server"], "enabled": true},
                "new": {"command": "python3", "enabled": true},
                "off": {"command": "false"},
            },
            "approved": [sha256(FS)],
        }
    });
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    (home, cwd)
}

#[test]
fn list_shows_approval_and_transport_of_every_server() {
    let (home, cwd) = setup();
    let (code, out, err) = run(home.path(), cwd.path(), &["list"]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|x| !x.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        lines,
        [
            vec!["fs", "approved", "stdio", "-"],
            vec!["new", "not approved", "stdio", "-"],
            vec!["off", "disabled", "stdio", "-"],
        ]
    );
    assert!(
        !home.path().join("mcp-tokens.json.lock").exists(),
        "listing creates nothing"
    );
    let empty = tempfile::tempdir().unwrap();
    let (code, out, _) = run(empty.path(), cwd.path(), &["list"]);
    assert_eq!((code, out.trim()), (0, "No MCP servers are configured."));
}

#[test]
fn approve_without_a_terminal_changes_nothing_and_exits_1() {
    let (home, cwd) = setup();
    let before = std::fs::read(home.path().join("settings.json")).unwrap();
    let (code, out, err) = run(home.path(), cwd.path(), &["approve", "new"]);
    assert_eq!(code, 1, "{out}{err}");
    let canonical = r#"{"command":"python3","name":"new"}"#;
    assert!(out.contains(canonical), "{out}");
    assert!(out.contains(&sha256(canonical)), "{out}");
    assert!(
        !out.contains("Approve?"),
        "no question without a terminal: {out}"
    );
    assert_eq!(
        std::fs::read(home.path().join("settings.json")).unwrap(),
        before
    );
    let (code, _, err) = run(home.path(), cwd.path(), &["approve", "nosuch"]);
    assert_eq!(code, 1);
    assert!(err.contains("mcp_server_unknown"), "{err}");
}

/// `approve <name>` with a terminal on stdin that types `typed`.
fn approve_on_a_terminal(home: &Path, cwd: &Path, name: &str, typed: &[u8]) -> (i32, String) {
    let (master, slave) = crate::common::pty::openpty(None);
    let mut child = mcp_cmd(home, cwd, &["approve", name])
        .stdin(Stdio::from(slave))
        .spawn()
        .unwrap();
    let mut out = String::new();
    let mut stdout = child.stdout.take().unwrap();
    // The question comes before the answer is typed.
    let mut buf = [0u8; 4096];
    while !out.contains("Approve? [y/N]") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "no question: {out}");
        out.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let mut tty = std::fs::File::from(master);
    tty.write_all(typed).unwrap();
    stdout.read_to_string(&mut out).unwrap();
    let code = child.wait().unwrap().code().unwrap_or(-1);
    (code, out)
}

#[test]
fn approve_on_a_terminal_writes_the_global_list_only_after_yes() {
    let (home, cwd) = setup();
    let path = home.path().join("settings.json");
    let before = std::fs::read(&path).unwrap();
    for typed in [&b"n\n"[..], b"yess\n", b"\n", b"\x04"] {
        let (code, out) = approve_on_a_terminal(home.path(), cwd.path(), "new", typed);
        assert_eq!(code, 1, "{typed:?}: {out}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{typed:?}");
    }
    let (code, out) = approve_on_a_terminal(home.path(), cwd.path(), "new", b"YES\n");
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let hash = sha256(r#"{"command":"python3","name":"new"}"#);
    assert_eq!(v["mcp"]["approved"], serde_json::json!([sha256(FS), hash]));
    assert_eq!(v["retention_days"], 7, "everything else kept");
    assert_eq!(v["mcp"]["servers"]["off"]["command"], "false");
    let (_, out, _) = run(home.path(), cwd.path(), &["list"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("new") && l.contains(" approved")),
        "{out}"
    );
    // A project's definition is approved in the global file, never the project's.
    let magi = cwd.path().join(".magi");
    std::fs::create_dir(&magi).unwrap();
    let project = r#"{"mcp":{"servers":{"fs":{"command":"deno","enabled":true}}}}"#;
    std::fs::write(magi.join("settings.json"), project).unwrap();
    let (code, out) = approve_on_a_terminal(home.path(), cwd.path(), "fs", b"y\n");
    assert_eq!(code, 0, "{out}");
    assert_eq!(
        std::fs::read_to_string(magi.join("settings.json")).unwrap(),
        project
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let approved = v["mcp"]["approved"].as_array().unwrap();
    assert!(approved.contains(&sha256(r#"{"command":"deno","name":"fs"}"#).into()));
}

#[test]
fn logout_removes_the_saved_token_and_a_corrupt_file_is_a_code() {
    let (home, cwd) = setup();
    let key = sha256("https://mcp.example/mcp");
    let file = serde_json::json!({"version": 1, "servers": {"web": {key: {
        "url": "https://mcp.example/mcp", "access_token": "AT-LOGOUT-SECRET",
        "refresh_token": "RT-LOGOUT-SECRET", "token_endpoint": "https://auth.example/token",
        "client_id": "c", "resource": "https://mcp.example/mcp", "scopes": []}}}});
    let path = home.path().join("mcp-tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    let (code, out, err) = run(home.path(), cwd.path(), &["logout", "web"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("Removed"), "{out}");
    assert!(!format!("{out}{err}").contains("SECRET"));
    let left = std::fs::read_to_string(&path).unwrap();
    assert!(!left.contains("SECRET"), "{left}");
    let (code, out, _) = run(home.path(), cwd.path(), &["logout", "web"]);
    assert_eq!(code, 0);
    assert!(out.contains("No token is saved for web."), "{out}");
    std::fs::write(&path, "{\"AT-CORRUPT-SECRET\"").unwrap();
    for args in [&["list"][..], &["logout", "web"]] {
        let (code, out, err) = run(home.path(), cwd.path(), args);
        assert_eq!(code, 1, "{args:?}");
        assert!(err.contains("token_file_invalid"), "{err}");
        assert!(!format!("{out}{err}").contains("SECRET"), "never echoed");
    }
}

/// `decisions.md` 53: `approve` prints a secret-named `env` or `headers` value (any case of
/// KEY, SECRET, TOKEN, PASSWORD, AUTH) as `[redacted]`; the hash is that of the real bytes.
#[test]
fn approve_never_prints_a_secret_named_value() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let settings = serde_json::json!({
        "mcp": {"servers": {
            "env": {"command": "srv", "enabled": true, "env": {
                "OPENAI_API_KEY": "sk-supersecret-123", "my_token": "t0k3n-value-9",
                "Db_Password": "pw-value-77", "client_secret": "s3cr3t-value",
                "PLAIN": "visible-value"}},
            "web": {"url": "http://127.0.0.1:9/mcp", "enabled": true, "headers": {
                "Authorization": "Bearer abc-def-123", "X-Trace": "trace-visible"}},
        }}
    });
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let real = |name: &str| {
        let mut d = settings["mcp"]["servers"][name].clone();
        d.as_object_mut().unwrap().remove("enabled");
        d["name"] = name.into();
        d.to_string()
    };
    for (name, secrets, visible) in [
        (
            "env",
            &[
                "sk-supersecret-123",
                "t0k3n-value-9",
                "pw-value-77",
                "s3cr3t-value",
            ][..],
            "visible-value",
        ),
        ("web", &["Bearer abc-def-123"][..], "trace-visible"),
    ] {
        let (code, out, err) = run(home.path(), cwd.path(), &["approve", name]);
        assert_eq!(code, 1, "{out}{err}");
        for s in secrets {
            assert!(!out.contains(s) && !err.contains(s), "{name}: {out}{err}");
        }
        assert!(out.contains("[redacted]"), "{out}");
        assert!(out.contains(visible), "{out}");
        // The hash printed is that of the real canonical definition.
        let line = out.lines().find(|l| l.starts_with("sha256 ")).unwrap();
        let hash = line.trim_start_matches("sha256 ").trim();
        assert_eq!(hash, sha256(&real(name)), "the hash of the real definition");
    }
}
