//! Transport behaviour of the real `serve --stdio` child over real pipes: envelope, framing,
//! bounds, identity, flow control and exit codes (local-agent-protocol.md "Frames,
//! correlation and compatibility", "Bounds and failure policy"; decisions.md 1–9, 27).

mod malformed;

use crate::common::{
    assert_dir_0700, assert_error, assert_keys, assert_ready_status, frame, init_params,
    padded_status, result, Env, BASE_CAPABILITIES, BASE_LIMITS, INPUT_FRAME_BYTES, PROTOCOL,
};
use serde_json::json;
use std::time::{Duration, Instant};

fn status(id: &str) -> String {
    frame(id, "status", &json!({}))
}

// ---------------------------------------------------------------------------------------
// A full exchange
// ---------------------------------------------------------------------------------------

#[test]
fn initialize_status_shutdown_exchange() {
    let env = Env::new();
    assert!(!env.home().exists());
    let mut s = env.spawn();

    let f = s.call("r1", "initialize", &init_params(&["status", "shutdown"]));
    assert_eq!(f["seq"], 1, "seq starts at 1");
    let init = result(&f);
    assert_keys(init, &["capabilities", "limits", "status"]);

    let caps: Vec<&str> = init["capabilities"]
        .as_array()
        .expect("capabilities array")
        .iter()
        .map(|c| c.as_str().expect("capability name"))
        .collect();
    assert_eq!(caps, BASE_CAPABILITIES, "the sixteen base names, in order");

    let limits = &init["limits"];
    let names: Vec<&str> = BASE_LIMITS.iter().map(|(k, _)| *k).collect();
    assert_keys(limits, &names);
    for (k, want) in BASE_LIMITS {
        assert!(
            limits[k].is_u64(),
            "limit {k} must be an integer: {}",
            limits[k]
        );
        assert_eq!(limits[k].as_u64(), Some(want), "limit {k}");
    }

    let ctx = assert_ready_status(&init["status"], "scripted", "echo");

    let f = s.call("r2", "status", &json!({}));
    assert_eq!(f["seq"], 2);
    let st = result(&f);
    assert_eq!(assert_ready_status(st, "scripted", "echo"), ctx);
    assert_eq!(
        st, &init["status"],
        "nothing changed between initialize and status"
    );

    let home = env.home();
    assert_dir_0700(&home);
    assert_dir_0700(&home.join("sessions"));
    assert_dir_0700(&home.join("cache"));
    assert_dir_0700(&home.join("cache").join("models"));

    s.shutdown_ok("r3");
    assert_eq!(s.seq, 3);
}

#[test]
fn status_before_initialize_is_not_initialized() {
    let env = Env::new();
    let mut s = env.spawn();
    let f = s.call("s1", "status", &json!({}));
    assert_error(&f, Some("s1"), "not_initialized");
    // Nonfatal: the connection stays usable.
    let init = s.initialize();
    assert_ready_status(&init["status"], "scripted", "echo");
    s.shutdown_ok("bye");
}

#[test]
fn shutdown_before_initialize_exits_0() {
    let env = Env::new();
    let mut s = env.spawn();
    s.shutdown_ok("bye");
}

#[test]
fn no_input_is_admitted_after_shutdown() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    // Same write: the status behind the shutdown must not be answered.
    s.send_raw(format!(
        "{}\n{}\n",
        frame("bye", "shutdown", &json!({})),
        status("late")
    ));
    let f = s.response("bye");
    assert_eq!(result(&f), &json!({"state": "stopping"}));
    s.expect_eof();
    assert_eq!(s.exit_code(), 0);
    s.assert_stderr_empty();
}

#[test]
fn eof_after_ready_exits_0_silently() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    s.close_stdin();
    s.expect_eof();
    assert_eq!(s.exit_code(), 0);
    s.assert_stderr_empty();
}

#[test]
fn every_child_has_a_fresh_instance_and_sequence() {
    let env = Env::new();
    let mut a = env.spawn();
    let mut b = env.spawn();
    let fa = a.call("r1", "initialize", &init_params(&["status"]));
    let fb = b.call("r1", "initialize", &init_params(&["status"]));
    assert_eq!(fa["seq"], 1);
    assert_eq!(fb["seq"], 1);
    assert_ne!(fa["instance_id"], fb["instance_id"]);
    a.shutdown_ok("bye");
    b.shutdown_ok("bye");
}

// ---------------------------------------------------------------------------------------
// EOF and incomplete frames
// ---------------------------------------------------------------------------------------

#[test]
fn eof_mid_frame_is_incomplete_frame_then_exit_0() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send_raw(&b"{\"protocol\""[..]);
    s.close_stdin();
    let f = s.next();
    assert_error(&f, None, "incomplete_frame");
    s.expect_eof();
    assert_eq!(s.exit_code(), 0);
    s.assert_stderr_empty();
}

#[test]
fn eof_mid_frame_never_executes_the_partial_request() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    // A complete request body, but no LF: it must not run.
    s.send_raw(status("partial"));
    s.close_stdin();
    let f = s.next();
    assert_error(&f, None, "incomplete_frame");
    s.expect_eof();
    assert_eq!(s.exit_code(), 0);
    s.assert_stderr_empty();
}

// ---------------------------------------------------------------------------------------
// Size bounds
// ---------------------------------------------------------------------------------------

#[test]
fn oversize_line_is_frame_too_large_and_exit_1_with_stdin_open() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send_line(&padded_status("big", 70_000));
    // stdin stays open: the child must close on its own.
    let f = s.next();
    assert_error(&f, None, "frame_too_large");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn oversize_is_detected_at_byte_65537_without_waiting_for_lf() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    // Exactly one byte over, no LF, stdin left open.
    s.send_raw(vec![b' '; INPUT_FRAME_BYTES + 1]);
    let f = s.next();
    assert_error(&f, None, "frame_too_large");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn line_of_exactly_the_input_limit_is_answered() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    s.send_line(&padded_status("exact", INPUT_FRAME_BYTES));
    let f = s.response("exact");
    assert_ready_status(result(&f), "scripted", "echo");
    // Still usable afterwards.
    let f = s.call("after", "status", &json!({}));
    result(&f);
    // One byte more is too large.
    s.send_line(&padded_status("over", INPUT_FRAME_BYTES + 1));
    let f = s.next();
    assert_error(&f, None, "frame_too_large");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn cr_before_lf_counts_toward_the_input_limit() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    // 65,535 bytes + CR = 65,536 excluding LF: accepted, CR is JSON whitespace.
    s.send_raw(format!(
        "{}\r\n",
        padded_status("cr-ok", INPUT_FRAME_BYTES - 1)
    ));
    let f = s.response("cr-ok");
    result(&f);
    // 65,536 bytes + CR = 65,537: too large.
    s.send_raw(format!(
        "{}\r\n",
        padded_status("cr-over", INPUT_FRAME_BYTES)
    ));
    let f = s.next();
    assert_error(&f, None, "frame_too_large");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

// ---------------------------------------------------------------------------------------
// Protocol mismatch, duplicate IDs, request limit
// ---------------------------------------------------------------------------------------

#[test]
fn version_mismatch_echoes_id_then_exit_1() {
    let env = Env::new();
    let mut s = env.spawn();
    s.send_line(&format!(
        r#"{{"protocol":"{PROTOCOL}","version":2,"id":"v2","method":"status","params":{{}}}}"#
    ));
    let f = s.next();
    assert_error(&f, Some("v2"), "protocol_mismatch");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn protocol_name_mismatch_echoes_id_then_exit_1() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    s.send_line(
        r#"{"protocol":"magi-code.remote-agent","version":1,"id":"p2","method":"status","params":{}}"#,
    );
    let f = s.next();
    assert_error(&f, Some("p2"), "protocol_mismatch");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn duplicate_id_is_rejected_and_connection_stays_usable() {
    let env = Env::new();
    let mut s = env.spawn();
    let f = s.call("a", "initialize", &init_params(&["status", "shutdown"]));
    result(&f);
    let f = s.call("b", "status", &json!({}));
    result(&f);
    let f = s.call("b", "status", &json!({}));
    assert_error(&f, Some("b"), "duplicate_id");
    // Duplicate ID wins over initialization state: initialize is not re-executed.
    let f = s.call("a", "initialize", &init_params(&["status"]));
    assert_error(&f, Some("a"), "duplicate_id");
    // A rejected well-formed request retains its ID too.
    let f = s.call("c", "status", &json!({"x": 1}));
    assert_error(&f, Some("c"), "invalid_params");
    let f = s.call("c", "status", &json!({}));
    assert_error(&f, Some("c"), "duplicate_id");
    let f = s.call("d", "status", &json!({}));
    assert_ready_status(result(&f), "scripted", "echo");
    s.shutdown_ok("e");
}

#[test]
fn request_limit_after_4096_ids_then_exit_1() {
    let env = Env::new();
    let mut s = env.spawn();
    let mut batch = String::new();
    for i in 1..=4097 {
        batch.push_str(&status(&format!("s{i}")));
        batch.push('\n');
    }
    // Never answered: the child closes after the 4,097th ID.
    batch.push_str(&status("late"));
    batch.push('\n');
    s.send_raw(batch);
    for i in 1..=4096 {
        let f = s.next();
        assert_error(&f, Some(&format!("s{i}")), "not_initialized");
    }
    let f = s.next();
    assert_error(&f, Some("s4097"), "request_limit");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

#[test]
fn request_limit_counts_every_admitted_id() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize(); // ID 1
    let mut batch = String::new();
    for i in 2..=4096 {
        batch.push_str(&status(&format!("s{i}")));
        batch.push('\n');
    }
    batch.push_str(&status("over"));
    batch.push('\n');
    s.send_raw(batch);
    for i in 2..=4096 {
        let f = s.next();
        assert_eq!(f["id"], format!("s{i}"));
        result(&f);
    }
    let f = s.next();
    assert_error(&f, Some("over"), "request_limit");
    s.expect_eof();
    assert_eq!(s.exit_code(), 1);
    s.assert_stderr_empty();
}

// ---------------------------------------------------------------------------------------
// Flow control
// ---------------------------------------------------------------------------------------

#[test]
fn reader_that_stops_reading_is_closed_by_the_output_deadline() {
    let env = Env::new();
    let mut s = env.spawn_unread();
    let start = Instant::now();
    let mut batch = format!(
        "{}\n",
        frame("init", "initialize", &init_params(&["status"]))
    );
    for i in 0..3000 {
        batch.push_str(&status(&format!("s{i}")));
        batch.push('\n');
    }
    s.send_raw(batch);
    // The output pipe fills within milliseconds; the 2,000 ms output deadline then expires.
    let code = s.exit_code_within(Duration::from_secs(20));
    let elapsed = start.elapsed();
    assert_eq!(code, 1, "output deadline expiry exits 1");
    assert!(
        elapsed >= Duration::from_millis(1500) && elapsed <= Duration::from_secs(10),
        "expected exit about 2 s after the output stalled, got {elapsed:?}"
    );
    s.assert_stderr_empty();
}

#[test]
fn deep_pipelining_while_reading_is_answered_in_order() {
    let env = Env::new();
    let mut s = env.spawn();
    s.initialize();
    let mut batch = String::new();
    for i in 0..4000 {
        batch.push_str(&status(&format!("p{i}")));
        batch.push('\n');
    }
    s.send_raw(batch);
    for i in 0..4000 {
        let f = s.next();
        assert_eq!(f["id"], format!("p{i}"), "responses in request order");
        assert_eq!(result(&f)["state"], "idle");
    }
    s.shutdown_ok("bye");
}
