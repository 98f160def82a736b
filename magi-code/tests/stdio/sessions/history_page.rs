//! `session.open` and `history.page`: paging through a long history, revisions that go stale
//! and stay stale, and the attachment check.

use super::*;

#[test]
fn open_pages_through_a_long_history() {
    let env = Env::new();
    let id = "long-history_1";
    let big = long_multibyte_text();
    let mut records = vec![meta(&env, id)];
    let mut expected: Vec<(String, String)> = Vec::new();
    for i in 0..250 {
        let prompt = format!("question {i}: ünïcödé ✓ «{i}»");
        let reply = if i == 125 {
            big.clone()
        } else {
            format!("answer {i} ✓")
        };
        records.extend(run(id, &format!("r{i}"), &prompt, Some(&reply)));
        expected.push(("user".into(), prompt));
        expected.push(("assistant".into(), reply));
    }
    records.push(rec("title", id, &json!({ "title": "A long history" })));
    write_history(&env, id, &records);

    let mut c = Client::start(&env, &BASE);
    let r = c.open(id);
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!([]), "{r}");
    assert_eq!(c.attached(), id);
    let rev = r["revision"].as_str().unwrap().to_owned();

    let (entries, pages, complete) = c.page_all_complete(id, &rev);
    assert!(
        complete,
        "the last page of a complete projection is complete"
    );
    assert!(
        pages >= 6,
        "510+ entries need at least 6 pages, got {pages}"
    );
    let got: Vec<(String, String)> = messages(&entries)
        .into_iter()
        .map(|(k, t, partial)| {
            assert!(!partial, "completed runs are not partial");
            (k, t)
        })
        .collect();
    assert_eq!(got.len(), expected.len(), "one logical message per record");
    for (i, (g, e)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(g.0, e.0, "kind of message {i}");
        assert_eq!(
            g.1, e.1,
            "text of message {i} (parts concatenate to the stored text)"
        );
    }
    // The 100 KB reply needs several parts; each fits the chunk bound.
    let big_parts: Vec<&Value> = entries
        .iter()
        .filter(|e| e["kind"] == "assistant" && e["text"].as_str().unwrap().contains("Köln"))
        .collect();
    assert!(big_parts.len() >= 7, "{} parts", big_parts.len());
    assert_eq!(big_parts[0]["part"], 0);
    assert_eq!(big_parts.last().unwrap()["last_part"], true);
    assert!(big_parts[..big_parts.len() - 1]
        .iter()
        .all(|e| e["last_part"] == false));

    // The same cursor gives the same page again within one revision.
    let first = c.page(id, &rev, None);
    let cur = first["next_cursor"].as_str().unwrap().to_owned();
    let a = c.page(id, &rev, Some(&cur));
    let b = c.page(id, &rev, Some(&cur));
    assert_eq!(a, b, "pages of one revision are immutable");
    c.s.shutdown_ok("bye");
}

#[test]
fn history_revisions_go_stale_and_stay_stale() {
    let env = Env::new();
    let id = "sticky";
    let mut records = vec![meta(&env, id)];
    for i in 0..150 {
        records.extend(run(id, &format!("r{i}"), &format!("prompt {i}"), None));
    }
    let path = write_history(&env, id, &records);
    let mut c = Client::start(&env, &BASE);
    let rev1 = c.open_rev(id);
    let p1 = c.page(id, &rev1, None);
    let cur1 = p1["next_cursor"]
        .as_str()
        .expect("150 entries take two pages")
        .to_owned();
    assert_eq!(p1["complete"], false);

    // A revision that was never issued.
    let params = |rev: &str, cursor: Option<&str>| json!({ "session_id": id, "revision": rev, "cursor": cursor });
    c.fails(
        "history.page",
        &params("not-a-revision", None),
        "stale_revision",
    );
    // A well-formed cursor that was never issued.
    c.fails(
        "history.page",
        &params(&rev1, Some("bogus-cursor")),
        "stale_revision",
    );

    // Reopen: a new revision; the old revision and its cursors are stale.
    let rev2 = c.open_rev(id);
    assert_ne!(rev1, rev2, "reopen gives a new revision");
    c.fails("history.page", &params(&rev1, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur1)),
        "stale_revision",
    );
    c.fails(
        "history.page",
        &params(&rev1, Some(&cur1)),
        "stale_revision",
    );
    let p2 = c.page(id, &rev2, None);
    let cur2 = p2["next_cursor"].as_str().unwrap().to_owned();
    let last = c.page(id, &rev2, Some(&cur2));
    assert_eq!(last["complete"], true);
    assert!(last["next_cursor"].is_null());

    // Grammar faults are invalid_params before any staleness check (decisions.md 26).
    c.fails(
        "history.page",
        &params("bad revision", None),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &params(&rev2, Some("bad/cursor")),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &params(&"r".repeat(65), None),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": "a.b", "revision": rev2, "cursor": null }),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": id, "revision": rev2, "cursor": null, "extra": 1 }),
        "invalid_params",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": id, "cursor": null }),
        "invalid_params",
    );
    // ...and they did not invalidate the snapshot.
    c.page(id, &rev2, Some(&cur2));

    // External modification: another writer appends a line.
    let saved = save(&path);
    append_line(
        &path,
        &rec("title", id, &json!({ "title": "changed behind our back" })),
    );
    c.fails("history.page", &params(&rev2, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur2)),
        "stale_revision",
    );
    // Sticky: restoring the exact bytes and times does not revive the snapshot.
    restore(&saved);
    c.fails("history.page", &params(&rev2, None), "stale_revision");
    c.fails(
        "history.page",
        &params(&rev2, Some(&cur2)),
        "stale_revision",
    );
    assert_eq!(c.attached(), id, "staleness keeps the attachment");

    // A fresh open gives a revision that works.
    let rev3 = c.open_rev(id);
    assert!(rev3 != rev1 && rev3 != rev2);
    let (entries, _) = c.page_all(id, &rev3);
    assert_eq!(entries.len(), 150);

    // A modification between open and the first page is detected too.
    let rev4 = c.open_rev(id);
    append_line(
        &path,
        &rec("title", id, &json!({ "title": "changed again" })),
    );
    c.fails("history.page", &params(&rev4, None), "stale_revision");
    let rev5 = c.open_rev(id);
    c.page_all(id, &rev5);
    c.s.shutdown_ok("bye");
}

#[test]
fn history_page_checks_the_attachment() {
    let env = Env::new();
    tiny(&env, "alpha");
    tiny(&env, "beta");
    let mut c = Client::start(&env, &BASE);
    // No attachment yet.
    c.fails(
        "history.page",
        &json!({ "session_id": "alpha", "revision": "r1", "cursor": null }),
        "session_missing",
    );
    // Exact ID only: no such history.
    c.fails(
        "session.open",
        &json!({ "session_id": "gamma" }),
        "session_missing",
    );
    assert!(c.attached().is_null());
    let rev = c.open_rev("alpha");
    // A different session ID than the attached one (even an existing history).
    c.fails(
        "history.page",
        &json!({ "session_id": "beta", "revision": rev, "cursor": null }),
        "stale_session",
    );
    c.fails(
        "history.page",
        &json!({ "session_id": "nosuch", "revision": rev, "cursor": null }),
        "stale_session",
    );
    let p = c.page("alpha", &rev, None);
    assert_eq!(
        p["entries"],
        json!([]),
        "decisions.md 22: meta only is empty"
    );
    assert_eq!(p["complete"], true);

    // Params of session.open are strict.
    for bad in [
        json!({}),
        json!({ "session_id": "" }),
        json!({ "session_id": "a.b" }),
        json!({ "session_id": "x".repeat(65) }),
        json!({ "session_id": 5 }),
        json!({ "session_id": "alpha", "extra": true }),
        json!({ "session_id": "../alpha" }),
    ] {
        c.fails("session.open", &bad, "invalid_params");
    }
    c.fails("session.create", &json!({ "x": 1 }), "invalid_params");
    assert_eq!(c.attached(), "alpha");
    c.page("alpha", &rev, None);
    c.s.shutdown_ok("bye");
}
