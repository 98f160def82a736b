//! `session.discover` (a negotiated extension), and `operation.cancel`, `busy` and shutdown
//! during a slow listing (the one-operation rule).

use super::*;

#[test]
fn discover_needs_negotiation_and_pages_provisionally() {
    let env = Env::new();
    let dir = sessions_dir(&env);
    let cwd = canonical_cwd(&env);
    let mut want = Vec::new();
    for i in 0..250 {
        let id = format!("d{i:03}");
        fs::write(
            dir.join(format!("{id}.jsonl")),
            jsonl(&[rec("session_meta", &id, &json!({ "cwd": cwd }))]),
        )
        .unwrap();
        want.push(id);
    }

    // Without negotiation: unsupported, and no discover_* limits.
    let (mut base, init) = Client::start_with_result(&env, &BASE);
    let limits = init["limits"].as_object().unwrap();
    assert!(
        !limits.keys().any(|k| k.starts_with("discover_")),
        "discover_* limits only when negotiated: {limits:?}"
    );
    assert_limits(limits, &[]);
    base.fails(
        "session.discover",
        &json!({ "cursor": null, "limit": 10 }),
        "unsupported_capability",
    );
    base.fails(
        "operation.cancel",
        &json!({ "request_id": "q1" }),
        "unsupported_capability",
    );
    base.s.shutdown_ok("bye");

    let (mut c, init) = Client::start_with_result(&env, &["session.discover"]);
    assert_limits(init["limits"].as_object().unwrap(), &DISCOVER_LIMITS);

    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let r = c.ok(
            "session.discover",
            &json!({ "cursor": cursor, "limit": 100 }),
        );
        pages += 1;
        assert_keys(&r, &DISCOVER_KEYS);
        assert_eq!(r["provisional"], true, "{r}");
        assert!(serde_json::to_string(&r).unwrap().len() <= 32_768);
        let s = r["sessions"].as_array().unwrap();
        assert!(s.len() <= 100);
        for e in s {
            check_list_entry(e);
            assert_eq!(e["eligibility"], "available", "{e}");
        }
        got.extend(ids_of(s));
        match r["next_cursor"].as_str() {
            Some(cur) => {
                assert_eq!(r["complete"], false, "{r}");
                assert!(is_opaque_id(cur));
                cursor = Some(cur.to_owned());
            }
            None => {
                assert_eq!(r["complete"], true, "{r}");
                break;
            }
        }
        assert!(pages < 20, "discover cursor chain does not end");
    }
    assert!(pages >= 3, "250 entries at 100 per page: {pages} pages");
    assert_eq!(got, want, "every session once, ascending");
    // Omitted fields default; bad params are invalid_params.
    let r = c.ok("session.discover", &json!({}));
    assert_eq!(r["sessions"].as_array().unwrap().len(), 100);
    for bad in [
        json!({ "limit": 0 }),
        json!({ "limit": 101 }),
        json!({ "cursor": "a b" }),
        json!({ "revision": null }),
    ] {
        c.fails("session.discover", &bad, "invalid_params");
    }
    c.s.shutdown_ok("bye");
}

/// The bounds `session.discover` adds to `limits` when negotiated
/// (`docs/extensions/session-discover.md`).
const DISCOVER_LIMITS: [(&str, u64); 9] = [
    ("discover_page_bytes", 32_768),
    ("discover_page_entries", 100),
    ("discover_candidates", 256),
    ("discover_session_bytes", 8_388_608),
    ("discover_session_lines", 10_000),
    ("discover_scan_bytes", 67_108_864),
    ("discover_scan_lines", 100_000),
    ("discover_scan_ms", 2_000),
    ("discover_title_bytes", 256),
];

/// `limits` is exactly the base bounds plus `extra` (`decisions.md` 9).
#[track_caller]
fn assert_limits(limits: &serde_json::Map<String, Value>, extra: &[(&str, u64)]) {
    let want: HashMap<&str, u64> = BASE_LIMITS.iter().chain(extra).copied().collect();
    let got: HashMap<&str, u64> = limits
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_u64().expect("integer limit")))
        .collect();
    assert_eq!(got, want, "initialize limits");
}

// ---------------------------------------------------------------------------------------------
// Cancellation and the one-operation rule

/// 256 histories of ~200 KB each: a listing that takes a while.
fn slow_folder(env: &Env) {
    let dir = sessions_dir(env);
    let cwd = canonical_cwd(env);
    let filler = "lorem ipsum dolor sit amet ".repeat(740);
    for i in 0..256 {
        let id = format!("big{i:03}");
        let mut recs = vec![rec("session_meta", &id, &json!({ "cwd": cwd }))];
        for r in 0..10 {
            recs.extend(run(&id, &format!("r{r}"), &filler, None));
        }
        fs::write(dir.join(format!("{id}.jsonl")), jsonl(&recs)).unwrap();
    }
}

/// Asserts the list/cancel pair is consistent: either the cancel was accepted and the list
/// answered `operation_cancelled`, or the list had finished and the cancel is stale.
#[track_caller]
fn assert_cancel_pair(list: &Value, cancel: &Value) -> bool {
    if cancel.get("result").is_some() {
        assert_eq!(
            result(cancel),
            &json!({ "cancellation_requested": true }),
            "{cancel}"
        );
        assert_eq!(error_code(list), "operation_cancelled", "{list}");
        true
    } else {
        assert_eq!(error_code(cancel), "stale_operation", "{cancel}");
        assert!(
            list.get("result").is_some() || error_code(list) == "discovery_limit",
            "a finished list answers normally: {list}"
        );
        false
    }
}

#[test]
fn slow_listing_cancel_busy_and_shutdown() {
    let env = Env::new();
    slow_folder(&env);
    let mut c = Client::start(&env, &["status", "shutdown", "operation.cancel"]);

    // Unknown and finished request IDs are stale.
    c.fails(
        "operation.cancel",
        &json!({ "request_id": "never-sent" }),
        "stale_operation",
    );
    let done = c.send("session.create", &json!({}));
    let created_result = result(&c.s.response(&done)).clone();
    let created = created_result["session_id"].as_str().unwrap().to_owned();
    let created_rev = created_result["revision"].as_str().unwrap().to_owned();
    c.fails(
        "operation.cancel",
        &json!({ "request_id": done }),
        "stale_operation",
    );
    c.fails(
        "operation.cancel",
        &json!({ "request_id": "bad id" }),
        "invalid_params",
    );

    // A listing followed immediately by its cancellation.
    let list_id = c.send("session.list", &json!({}));
    let cancel_id = c.send("operation.cancel", &json!({ "request_id": list_id }));
    let got = c.s.responses(&[&list_id, &cancel_id]);
    assert_cancel_pair(&got[&list_id], &got[&cancel_id]);
    // The worker slot stays busy until a cancelled worker actually stops.
    let free = json!({ "session_id": created, "revision": created_rev, "cursor": null });
    result(&c.call_when_free("history.page", &free));
    // Both in one write: the list is certainly still running when the cancel arrives.
    let list_id = c.next_id();
    let cancel_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame(
            &cancel_id,
            "operation.cancel",
            &json!({ "request_id": list_id })
        )
    ));
    let got = c.s.responses(&[&list_id, &cancel_id]);
    assert!(
        assert_cancel_pair(&got[&list_id], &got[&cancel_id]),
        "a cancel admitted with the list finds it in flight: {:?}",
        got
    );
    // A second cancel of the same request is stale (it was already answered).
    c.fails(
        "operation.cancel",
        &json!({ "request_id": list_id }),
        "stale_operation",
    );

    // One operation at a time: overlap is busy, without cancelling the first. Sent in one
    // write, the open and create are admitted while the list certainly runs.
    result(&c.call_when_free("history.page", &free));
    let list_id = c.next_id();
    let open_id = c.next_id();
    let create_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame(&open_id, "session.open", &json!({ "session_id": "big000" })),
        frame(&create_id, "session.create", &json!({})),
    ));
    let got = c.s.responses(&[&list_id, &open_id, &create_id]);
    assert_error(&got[&open_id], Some(&open_id), "busy");
    assert_error(&got[&create_id], Some(&create_id), "busy");
    let list = &got[&list_id];
    assert!(
        list.get("result").is_some() || error_code(list) == "discovery_limit",
        "busy never cancels the running list: {list}"
    );
    // Sent separately: whichever answer comes second may be anything, but an open answered
    // before the list it followed overlapped it and is busy. A status in between is answered.
    let list_id = c.send("session.list", &json!({}));
    let open_id = c.send("session.open", &json!({ "session_id": "no-such-session" }));
    let status_id = c.send("status", &json!({}));
    let mut order = Vec::new();
    let mut got = HashMap::new();
    while got.len() < 3 {
        let f = c.s.next();
        let id = f["id"].as_str().expect("response id").to_owned();
        assert!(
            [&list_id, &open_id, &status_id].contains(&&id),
            "unexpected {f}"
        );
        order.push(id.clone());
        got.insert(id, f);
    }
    let pos = |id: &str| order.iter().position(|x| x == id).unwrap();
    let open_code = error_code(&got[&open_id]);
    if pos(&open_id) < pos(&list_id) {
        assert_eq!(open_code, "busy", "{:?}", got[&open_id]);
    } else {
        assert!(
            matches!(open_code, "busy" | "session_missing"),
            "{:?}",
            got[&open_id]
        );
    }
    assert_eq!(result(&got[&status_id])["readiness"], "ready");
    let list = &got[&list_id];
    assert!(
        list.get("result").is_some() || error_code(list) == "discovery_limit",
        "{list}"
    );
    // Busy requests changed nothing: the lazy session created above is still attached.
    assert_eq!(c.attached(), created.as_str());
    c.s.shutdown_ok("bye");

    // shutdown during a listing: the listing is cancelled, the child exits 0.
    let mut c = Client::start(&env, &BASE);
    let list_id = c.next_id();
    c.s.send_raw(format!(
        "{}\n{}\n",
        frame(&list_id, "session.list", &json!({})),
        frame("stop", "shutdown", &json!({}))
    ));
    let got = c.s.responses(&[&list_id, "stop"]);
    assert_eq!(result(&got["stop"]), &json!({ "state": "stopping" }));
    assert_error(&got[&list_id], Some(&list_id), "operation_cancelled");
    c.s.expect_eof();
    assert_eq!(c.s.exit_code(), 0);
    c.s.assert_stderr_empty();
}
