//! `session.create`: lazy creation, reopening only in the same child, and session operations
//! before `initialize`.

use super::*;

#[test]
fn create_is_lazy_and_reopens_only_in_the_same_child() {
    let env = Env::new();
    let mut c = Client::start(&env, &BASE);
    let r = c.ok("session.create", &json!({}));
    assert_keys(&r, &OPEN_KEYS);
    let id = r["session_id"].as_str().expect("session_id").to_owned();
    assert!(is_session_id(&id), "session ID grammar: {id}");
    assert_eq!(r["durable"], false, "{r}");
    assert_eq!(r["notices"], json!([]), "{r}");
    let rev = r["revision"].as_str().unwrap().to_owned();
    assert!(is_opaque_id(&rev), "{r}");
    // No placeholder history, no lease: nothing in sessions/ at all.
    let names: Vec<_> = fs::read_dir(env.home().join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(names.is_empty(), "session.create wrote {names:?}");
    assert_eq!(c.attached(), id.as_str());

    // decisions.md 14: the projection of a lazy session is empty and complete.
    let p = c.page(&id, &rev, None);
    assert_eq!(p["entries"], json!([]));
    assert_eq!(p["complete"], true);
    assert!(p["next_cursor"].is_null());
    // The cursor may be omitted.
    let p = c.ok(
        "history.page",
        &json!({ "session_id": id, "revision": rev }),
    );
    check_history_page(&p, &id, &rev);
    assert_eq!(p["entries"], json!([]));

    // Same-child reopen of the lazy handle.
    let r2 = c.ok("session.open", &json!({ "session_id": id }));
    assert_keys(&r2, &OPEN_KEYS);
    assert_eq!(r2["session_id"], id.as_str());
    assert_eq!(r2["durable"], false, "{r2}");
    assert_eq!(r2["notices"], json!([]), "{r2}");
    let rev2 = r2["revision"].as_str().unwrap().to_owned();
    assert!(is_opaque_id(&rev2));
    let p = c.page(&id, &rev2, None);
    assert_eq!(
        (p["entries"].clone(), p["complete"].clone()),
        (json!([]), json!(true))
    );
    assert_eq!(c.attached(), id.as_str());

    // Another create replaces the attachment with a different ID.
    let r3 = c.ok("session.create", &json!({}));
    let id3 = r3["session_id"].as_str().unwrap().to_owned();
    assert_ne!(id3, id, "fresh session IDs");
    assert_eq!(c.attached(), id3.as_str());
    assert!(fs::read_dir(env.home().join("sessions"))
        .unwrap()
        .next()
        .is_none());
    c.s.shutdown_ok("bye");

    // A new child cannot open a lazy ID that never became durable.
    let mut c2 = Client::start(&env, &BASE);
    c2.fails(
        "session.open",
        &json!({ "session_id": id }),
        "session_missing",
    );
    c2.fails(
        "session.open",
        &json!({ "session_id": id3 }),
        "session_missing",
    );
    assert!(c2.attached().is_null());
    c2.s.shutdown_ok("bye");
}

#[test]
fn session_operations_need_initialization() {
    let env = Env::new();
    let mut s = env.spawn();
    for (i, (m, p)) in [
        ("session.create", json!({})),
        ("session.open", json!({ "session_id": "abc" })),
        ("session.list", json!({})),
        (
            "history.page",
            json!({ "session_id": "abc", "revision": "r", "cursor": null }),
        ),
    ]
    .iter()
    .enumerate()
    {
        let id = format!("pre{i}");
        let f = s.call(&id, m, p);
        assert_error(&f, Some(&id), "not_initialized");
    }
    s.shutdown_ok("bye");
}
