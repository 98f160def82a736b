//! Assertions on response frames, result shapes and files.

use super::frames::error_code;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Asserts a response frame is an error with `code` for `id` (`None` = `id: null`).
#[track_caller]
pub fn assert_error(frame: &Value, id: Option<&str>, code: &str) {
    assert_eq!(frame["type"], "response", "not a response: {frame}");
    assert_eq!(error_code(frame), code, "wrong error in {frame}");
    match id {
        Some(id) => assert_eq!(frame["id"], id, "wrong id in {frame}"),
        None => assert!(frame["id"].is_null(), "expected id null in {frame}"),
    }
}

/// Whether `s` is 64 lowercase hex characters.
#[must_use]
pub fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn keys(v: &Value) -> BTreeSet<&str> {
    v.as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// Asserts `v` is an object with exactly the keys `expected`.
#[track_caller]
pub fn assert_keys(v: &Value, expected: &[&str]) {
    assert!(v.is_object(), "not an object: {v}");
    let want: BTreeSet<&str> = expected.iter().copied().collect();
    assert_eq!(keys(v), want, "wrong keys in {v}");
}

const STATUS_KEYS: [&str; 8] = [
    "state",
    "readiness",
    "provider",
    "model",
    "context_id",
    "session_id",
    "run_id",
    "selection",
];

/// Asserts a ready, idle, unattached `status` object for `provider`/`model`; returns its
/// `context_id`.
#[track_caller]
pub fn assert_ready_status(status: &Value, provider: &str, model: &str) -> String {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "idle", "{status}");
    assert_eq!(status["readiness"], "ready", "{status}");
    assert_eq!(status["provider"], provider, "{status}");
    assert_eq!(status["model"], model, "{status}");
    assert!(status["session_id"].is_null(), "{status}");
    assert!(status["run_id"].is_null(), "{status}");
    let ctx = status["context_id"].as_str().expect("context_id string");
    assert!(is_digest(ctx), "context_id is not 64 lowercase hex: {ctx}");
    assert_selection(&status["selection"], provider, model);
    ctx.to_owned()
}

const EFFORTS: [&str; 6] = ["default", "low", "medium", "high", "xhigh", "max"];

/// Asserts a `status.selection` object for `provider`/`model`.
#[track_caller]
pub fn assert_selection(sel: &Value, provider: &str, model: &str) {
    assert_keys(
        sel,
        &[
            "revision",
            "provider",
            "model",
            "requested_effort",
            "effective_effort",
            "effort_support",
            "permitted_efforts",
        ],
    );
    let rev = sel["revision"].as_str().expect("selection revision string");
    assert!(!rev.is_empty() && rev.len() <= 64, "{sel}");
    assert_eq!(sel["provider"], provider, "{sel}");
    assert_eq!(sel["model"], model, "{sel}");
    let req = sel["requested_effort"].as_str().expect("requested_effort");
    assert!(EFFORTS.contains(&req), "{sel}");
    assert!(
        sel["effective_effort"].is_null()
            || sel["effective_effort"]
                .as_str()
                .is_some_and(|e| EFFORTS.contains(&e)),
        "{sel}"
    );
    assert!(
        matches!(
            sel["effort_support"].as_str(),
            Some("supported" | "unsupported" | "unknown")
        ),
        "{sel}"
    );
    let permitted = sel["permitted_efforts"]
        .as_array()
        .expect("permitted_efforts");
    assert!(
        permitted
            .iter()
            .all(|e| e.as_str().is_some_and(|e| EFFORTS.contains(&e))),
        "{sel}"
    );
}

/// Asserts a `status` object of a pending startup.
#[track_caller]
pub fn assert_starting_status(status: &Value) {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "starting", "{status}");
    assert_eq!(status["readiness"], "initializing", "{status}");
    for k in [
        "provider",
        "model",
        "context_id",
        "session_id",
        "run_id",
        "selection",
    ] {
        assert!(
            status[k].is_null(),
            "{k} should be null while starting: {status}"
        );
    }
}

/// Asserts a `status` object of a failed startup with readiness `code`.
#[track_caller]
pub fn assert_failed_status(status: &Value, code: &str) {
    assert_keys(status, &STATUS_KEYS);
    assert_eq!(status["state"], "failed", "{status}");
    assert_eq!(status["readiness"], code, "{status}");
    assert!(status["session_id"].is_null(), "{status}");
    assert!(status["run_id"].is_null(), "{status}");
    assert!(
        status["selection"].is_null(),
        "selection is null after failed startup: {status}"
    );
    assert!(
        status["context_id"].is_null() || status["context_id"].as_str().is_some_and(is_digest),
        "{status}"
    );
}

/// Asserts `path` is a directory with mode 0700.
#[track_caller]
pub fn assert_dir_0700(path: &Path) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(meta.is_dir(), "{} is not a directory", path.display());
    assert_eq!(
        meta.permissions().mode() & 0o7777,
        0o700,
        "{} mode",
        path.display()
    );
}
