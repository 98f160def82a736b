//! Self-tests of the test harness: the frame checker in `common` must reject what the
//! protocol forbids, so that the real-binary suites cannot pass vacuously. A tiny `sh`
//! script stands in for the server.

use crate::common::Server;
use std::process::Command;

const IID: &str = "0b5f4c1e-1d2a-4c3b-9e8f-7a6b5c4d3e2f";

/// A fake server that prints `output` and then waits for stdin EOF.
fn fake(output: &str) -> Server {
    fake_script(r#"printf '%s' "$1"; cat >/dev/null"#, output)
}

fn fake_script(script: &str, output: &str) -> Server {
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(script).arg("sh").arg(output);
    Server::spawn(cmd, true)
}

fn response(seq: u64, rest: &str) -> String {
    format!(
        r#"{{"protocol":"magi-code.local-agent","version":1,"type":"response","instance_id":"{IID}","seq":{seq},"id":"r",{rest}}}"#
    )
}

#[test]
fn accepts_a_well_formed_response() {
    let mut s = fake(&format!(
        "{}\n",
        response(1, r#""result":{"state":"stopping"}"#)
    ));
    let f = s.next();
    assert_eq!(f["seq"], 1);
}

#[test]
#[should_panic(expected = "seq must start at 1")]
fn rejects_seq_not_starting_at_1() {
    let mut s = fake(&format!(
        "{}\n",
        response(2, r#""result":{"state":"stopping"}"#)
    ));
    s.next();
}

#[test]
#[should_panic(expected = "seq must start at 1")]
fn rejects_a_seq_gap() {
    let mut s = fake(&format!(
        "{}\n{}\n",
        response(1, r#""result":{"state":"stopping"}"#),
        response(3, r#""result":{"state":"stopping"}"#)
    ));
    s.next();
    s.next();
}

#[test]
#[should_panic(expected = "exactly one of result/error")]
fn rejects_result_and_error_together() {
    let mut s = fake(&format!(
        "{}\n",
        response(1, r#""result":{"state":"stopping"},"error":{"code":"x"}"#)
    ));
    s.next();
}

#[test]
#[should_panic(expected = "wrong keys")]
fn rejects_error_objects_with_more_than_code() {
    let mut s = fake(&format!(
        "{}\n",
        response(1, r#""error":{"code":"x","message":"m"}"#)
    ));
    s.next();
}

#[test]
#[should_panic(expected = "wrong keys")]
fn rejects_extra_envelope_fields() {
    let mut s = fake(&format!("{}\n", response(1, r#""result":{},"extra":1"#)));
    s.next();
}

#[test]
#[should_panic(expected = "partial output line")]
fn rejects_a_partial_line() {
    // Printed, then stdout closes: the unterminated bytes arrive at EOF.
    let mut s = fake_script(
        r#"printf '%s' "$1""#,
        &response(1, r#""result":{"state":"stopping"}"#),
    );
    s.next();
}

#[test]
#[should_panic(expected = "not JSON")]
fn rejects_non_protocol_bytes() {
    let mut s = fake("hello\n");
    s.next();
}

#[test]
#[should_panic(expected = "stderr must stay silent")]
fn detects_stderr_output() {
    let mut s = fake_script(r#"printf '%s' "$1" >&2"#, "diagnostic");
    assert_eq!(s.exit_code(), 0);
    s.assert_stderr_empty();
}

#[test]
#[should_panic(expected = "no output frame within")]
fn reads_are_bounded() {
    let mut s = fake("");
    s.next_within(std::time::Duration::from_millis(200));
}

#[test]
#[should_panic(expected = "frame breaks docs/schema/magi-code.local-agent.v1.json")]
fn rejects_a_frame_the_schema_refuses() {
    // A well-formed envelope whose result has a member no method's result has.
    let mut s = fake(&format!(
        "{}\n",
        response(1, r#""result":{"state":"stopping","extra":1}"#)
    ));
    s.next();
}
