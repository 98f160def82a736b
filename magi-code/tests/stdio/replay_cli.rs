//! `magi-code replay FILE` over the committed corpus.

use std::path::PathBuf;
use std::process::Command;

fn corpus(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../protocol-core/tests/traces")
        .join(name)
}

#[test]
fn replay_of_a_capture_matches() {
    let out = Command::new(env!("CARGO_BIN_EXE_magi-code"))
        .arg("replay")
        .arg(corpus("handshake.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains(", 0 mismatches"));
}

#[test]
fn replay_reports_a_difference() {
    let text = std::fs::read_to_string(corpus("shutdown_during_startup.jsonl")).unwrap();
    let tampered = text.replace("startup_cancelled\\\"}}", "startup_failed\\\"}}");
    assert_ne!(tampered, text);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, tampered).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_magi-code"))
        .arg("replay")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("output differs"));
}

#[test]
fn replay_of_a_missing_file_exits_2() {
    let out = Command::new(env!("CARGO_BIN_EXE_magi-code"))
        .args(["replay", "/nonexistent/trace.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // The user's own argument is said back: which file, and why.
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "magi-code replay: cannot read /nonexistent/trace.jsonl: not found\n"
    );
}
