//! Replays the captured trace corpus (`tests/traces`, captured from the real binary by
//! `scripts/capture_traces.py`) through the engine with a fake clock.

use protocol_core::trace::{replay, Record, Step};
use protocol_core::ErrorCode;
use std::collections::BTreeSet;
use std::path::PathBuf;

fn corpus() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/traces");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("trace corpus folder")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Error codes in the recorded server output of a trace.
fn recorded_codes(text: &str) -> BTreeSet<String> {
    let mut bytes = Vec::new();
    for line in text.lines().skip(1) {
        if let Ok(Record {
            step: Step::Out { bytes: b },
            ..
        }) = serde_json::from_str::<Record>(line)
        {
            bytes.extend(b.to_vec().unwrap());
        }
    }
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<serde_json::Value>(l).ok())
        .filter_map(|f| f["error"]["code"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn every_captured_trace_replays_without_difference() {
    let traces = corpus();
    assert!(traces.len() >= 10, "corpus present");
    for (name, text) in &traces {
        let r = replay(text);
        assert!(r.records > 3, "{name}: records");
        assert!(
            r.mismatches.is_empty(),
            "{name}: {:?}",
            &r.mismatches[..r.mismatches.len().min(5)]
        );
    }
}

#[test]
fn the_corpus_covers_every_transport_and_startup_error_code() {
    let mut seen = BTreeSet::new();
    for (_, text) in corpus() {
        seen.extend(recorded_codes(&text));
    }
    let required = [
        ErrorCode::InvalidFrame,
        ErrorCode::InvalidRequest,
        ErrorCode::InvalidParams,
        ErrorCode::ProtocolMismatch,
        ErrorCode::UnsupportedMethod,
        ErrorCode::UnsupportedCapability,
        ErrorCode::NotInitialized,
        ErrorCode::AlreadyInitialized,
        ErrorCode::DuplicateId,
        ErrorCode::RequestLimit,
        ErrorCode::FrameTooLarge,
        ErrorCode::IncompleteFrame,
        ErrorCode::ConfigurationInvalid,
        ErrorCode::ProviderUnavailable,
        ErrorCode::StartupCancelled,
    ];
    for code in required {
        assert!(
            seen.contains(code.as_str()),
            "no trace produces {}",
            code.as_str()
        );
    }
}

#[test]
fn a_tampered_trace_is_reported() {
    let (_, text) = corpus()
        .into_iter()
        .find(|(n, _)| n == "handshake.jsonl")
        .unwrap();
    // Changing the recorded status answer must be caught.
    let tampered = text.replacen(
        "\\\"state\\\":\\\"idle\\\"",
        "\\\"state\\\":\\\"idle \\\"",
        1,
    );
    let tampered = if tampered == text {
        text.replacen("\"state\\\":\\\"idle", "\"state\\\":\\\"busy", 1)
    } else {
        tampered
    };
    assert_ne!(tampered, text);
    let r = replay(&tampered);
    assert!(!r.mismatches.is_empty());
    // So must a wrong exit code.
    let wrong_exit = text.replace("\"dir\":\"exit\",\"code\":0", "\"dir\":\"exit\",\"code\":1");
    assert_ne!(wrong_exit, text);
    assert!(!replay(&wrong_exit).mismatches.is_empty());
    // Instance IDs are compared by shape and consistency: one frame with another ID is caught,
    // and so is a start record that is not a UUID.
    let start: Record = text
        .lines()
        .skip(1)
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap();
    let Step::Start { instance_id } = start.step else {
        panic!("first record starts the child")
    };
    let other = "11111111-2222-4333-8444-555555555555";
    let one_frame = text.replacen(
        &format!("\\\"instance_id\\\":\\\"{instance_id}"),
        &format!("\\\"instance_id\\\":\\\"{other}"),
        1,
    );
    assert_ne!(one_frame, text);
    assert!(!replay(&one_frame).mismatches.is_empty());
    let everywhere = text.replace(&instance_id, other);
    assert!(
        replay(&everywhere).mismatches.is_empty(),
        "another valid ID, used consistently, replays"
    );
    let not_uuid = text.replace(&instance_id, "not-a-uuid-but-thirty-six-chars-long");
    assert!(!replay(&not_uuid).mismatches.is_empty());
    // And a missing header.
    let body: String = text.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(!replay(&body).mismatches.is_empty());
}
