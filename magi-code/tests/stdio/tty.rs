//! Launch check: a TTY on stdin or stdout exits 2 before any side effect.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::{Command, Stdio};

fn pty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two new descriptors into the provided ints; we take ownership.
    #[allow(unsafe_code)]
    unsafe {
        let rc = libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        );
        assert_eq!(rc, 0, "openpty");
        (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    }
}

fn run(tty_stdin: bool) -> (i32, bool) {
    let home = tempfile::tempdir().unwrap();
    let mc_home = home.path().join("mc");
    let (_master, slave) = pty();
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
