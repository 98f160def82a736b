//! Launch checks of the real binary: `serve --stdio` serves only on pipes, and any other form
//! exits 2 before runtime side effects (backend.md "Launch", protocol "Invalid launch exits 2
//! before runtime side effects").

use crate::common::{code, drain, frame, init_params, wait_exit, Env, STEP};
use serde_json::json;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

/// An `initialize` + `status` script: a child that wrongly served it would create `MC_HOME`.
fn script() -> String {
    format!(
        "{}\n{}\n",
        frame("r1", "initialize", &init_params(&["status"])),
        frame("r2", "status", &json!({}))
    )
}

/// Runs `cmd` (stdio already set up), returns its exit code and stdout bytes when stdout was
/// piped.
fn run(mut cmd: Command, piped_stdout: bool) -> (i32, Vec<u8>) {
    cmd.stderr(Stdio::piped());
    if piped_stdout {
        cmd.stdout(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn");
    let out = child.stdout.take().map(drain);
    let err = drain(child.stderr.take().expect("stderr"));
    let status = wait_exit(&mut child, STEP);
    let stdout = out
        .map(|rx| rx.recv_timeout(STEP).expect("stdout closed"))
        .unwrap_or_default();
    let _ = err.recv_timeout(STEP);
    (code(status), stdout)
}

#[track_caller]
fn assert_rejected(env: &Env, (status, stdout): (i32, Vec<u8>)) {
    assert_eq!(status, 2, "invalid launch must exit 2");
    assert!(
        stdout.is_empty(),
        "stdout carries protocol bytes only; got {:?}",
        String::from_utf8_lossy(&stdout)
    );
    assert!(
        !env.home().exists(),
        "invalid launch must not create MC_HOME"
    );
}

#[test]
fn regular_file_stdin_exits_2_without_side_effects() {
    let env = Env::new();
    let input = env.root.join("input.jsonl");
    fs::write(&input, script()).unwrap();
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(File::open(&input).unwrap());
    assert_rejected(&env, run(cmd, true));
}

#[test]
fn dev_null_stdin_exits_2_without_side_effects() {
    let env = Env::new();
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(Stdio::null());
    assert_rejected(&env, run(cmd, true));
}

#[test]
fn regular_file_stdout_exits_2_without_side_effects() {
    let env = Env::new();
    let output = env.root.join("output.jsonl");
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(Stdio::piped())
        .stdout(File::create(&output).unwrap())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    // The child may exit before reading; a broken pipe here is fine.
    let _ = stdin.write_all(script().as_bytes());
    let err = drain(child.stderr.take().unwrap());
    let status = code(wait_exit(&mut child, STEP));
    drop(stdin);
    let _ = err.recv_timeout(STEP);
    let written = fs::read(&output).unwrap();
    assert_rejected(&env, (status, written));
}

#[test]
fn socket_stdin_exits_2_without_side_effects() {
    let env = Env::new();
    let (mut ours, theirs) = UnixStream::pair().unwrap();
    ours.write_all(script().as_bytes()).unwrap();
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(Stdio::from(OwnedFd::from(theirs)));
    assert_rejected(&env, run(cmd, true));
    drop(ours);
}

#[test]
fn socket_stdout_exits_2_without_side_effects() {
    let env = Env::new();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let mut cmd = env.command(&["serve", "--stdio"]);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::from(OwnedFd::from(theirs)))
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let _ = stdin.write_all(script().as_bytes());
    let err = drain(child.stderr.take().unwrap());
    let status = code(wait_exit(&mut child, STEP));
    drop(stdin);
    let _ = err.recv_timeout(STEP);
    // Our end of the socket: everything the child wrote (nothing is expected).
    ours.set_nonblocking(true).unwrap();
    let mut written = Vec::new();
    let _ = (&ours).read_to_end(&mut written);
    assert_rejected(&env, (status, written));
}

#[test]
fn extra_launch_arguments_exit_2_without_side_effects() {
    let forms: [&[&str]; 7] = [
        &["serve", "--stdio", "--extra"],
        &["serve"],
        &["serve", "--stdio", "extra"],
        &["serve", "--extra", "--stdio"],
        &["serve", "--stdio", "--stdio"],
        &["serve", "--stdio=true"],
        &["--verbose", "serve", "--stdio"],
    ];
    for args in forms {
        let env = Env::new();
        let mut cmd = env.command(args);
        cmd.stdin(Stdio::piped());
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(script().as_bytes());
        drop(stdin);
        let out = drain(child.stdout.take().unwrap());
        let err = drain(child.stderr.take().unwrap());
        let status = code(wait_exit(&mut child, STEP));
        let stdout = out.recv_timeout(STEP).expect("stdout closed");
        let _ = err.recv_timeout(STEP);
        assert_eq!(status, 2, "`magi-code {}` must exit 2", args.join(" "));
        assert!(
            stdout.is_empty(),
            "`magi-code {}` wrote to stdout: {:?}",
            args.join(" "),
            String::from_utf8_lossy(&stdout)
        );
        assert!(
            !env.home().exists(),
            "`magi-code {}` created MC_HOME",
            args.join(" ")
        );
    }
}

#[test]
fn pipes_on_both_sides_serve() {
    // Control for the rejections above: the same launch over pipes serves and exits 0 on EOF.
    let env = Env::new();
    let mut server = env.spawn();
    let init = server.initialize();
    assert!(init["status"].is_object());
    server.close_stdin();
    server.expect_eof();
    assert_eq!(server.exit_code(), 0);
    server.assert_stderr_empty();
    assert!(env.home().is_dir());
}
