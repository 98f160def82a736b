//! Launch check: a TTY on stdin or stdout exits 2 before any side effect.

use std::process::{Command, Stdio};

fn run(tty_stdin: bool) -> (i32, bool) {
    let home = tempfile::tempdir().unwrap();
    let mc_home = home.path().join("mc");
    let (_master, slave) = crate::common::pty::openpty(None);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_magi-code"));
    cmd.args(["serve", "--stdio"])
        .env("MC_HOME", &mc_home)
        .stderr(Stdio::null());
    if tty_stdin {
        cmd.stdin(Stdio::from(slave)).stdout(Stdio::piped());
    } else {
        cmd.stdin(Stdio::piped()).stdout(Stdio::from(slave));
    }
    let out = cmd.output().unwrap();
    (out.status.code().unwrap_or(-1), mc_home.exists())
}

#[test]
fn tty_stdin_is_refused() {
    assert_eq!(run(true), (2, false));
}

#[test]
fn tty_stdout_is_refused() {
    assert_eq!(run(false), (2, false));
}
