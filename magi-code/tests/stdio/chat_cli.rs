//! `magi-code chat`: a person's terminal client over a real `serve --stdio` child.

use std::io::Write;
use std::process::{Command, Stdio};

fn chat(
    home: &std::path::Path,
    cwd: &std::path::Path,
    args: &[&str],
    input: &str,
) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_magi-code"))
        .arg("chat")
        .args(args)
        .env("MC_HOME", home)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = c.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn chat_streams_replies_and_reopens_the_session() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "Hello there\n/quit\n");
    assert_eq!(code, 0);
    assert!(out.contains("magi> Hello there"), "{out}");
    let sid = out.split_whitespace().nth(1).unwrap().to_owned();
    let history =
        std::fs::read_to_string(home.path().join("sessions").join(format!("{sid}.jsonl"))).unwrap();
    assert!(history.contains("\"type\":\"user_input\""));
    let (code, out) = chat(home.path(), cwd.path(), &["--session", &sid], "again\n");
    assert_eq!(code, 0);
    assert!(out.contains("magi> again"), "{out}");
    let (code, _) = chat(home.path(), cwd.path(), &["--session", "missing"], "");
    assert_eq!(code, 1);
}

#[test]
fn chat_asks_before_a_tool_runs() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let script = home.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"steps":[{"tool":{"name":"write_file","input":{"path":"a.txt","content":"x"}}},{"text":"done"}]}]}"#,
    )
    .unwrap();
    let settings =
        serde_json::json!({"model": "script", "providers": {"scripted": {"script": script}}});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let (code, out) = chat(home.path(), cwd.path(), &[], "write it\nn\n");
    assert_eq!(code, 0);
    assert!(out.contains("allow write_file a.txt"), "{out}");
    assert!(out.contains("failed"), "{out}");
    assert!(
        !cwd.path().join("a.txt").exists(),
        "denied by default answer"
    );
    let (_, out) = chat(home.path(), cwd.path(), &[], "write it\ny\n");
    assert!(out.contains("completed"), "{out}");
    assert!(cwd.path().join("a.txt").exists());
}
