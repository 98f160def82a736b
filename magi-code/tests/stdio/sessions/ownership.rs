//! Ownership across children: leases between two children, and a stale lock file.

use super::*;

#[test]
fn ownership_across_two_children() {
    let env = Env::new();
    let mut x = vec![meta(&env, "shared")];
    x.extend(run("shared", "r1", "hi", Some("there")));
    write_history(&env, "shared", &x);
    tiny(&env, "free");

    let mut c1 = Client::start(&env, &BASE);
    let mut c2 = Client::start(&env, &BASE);
    let r = c1.open("shared");
    assert_eq!(r["durable"], true);

    // decisions.md 21: another child's open is session_busy, its list shows busy.
    c2.fails(
        "session.open",
        &json!({ "session_id": "shared" }),
        "session_busy",
    );
    assert!(c2.attached().is_null());
    let (l2, _) = c2.list_all(100);
    let l2 = by_id(&l2);
    assert_eq!(l2["shared"]["eligibility"], "busy", "{}", l2["shared"]);
    assert_eq!(l2["free"]["eligibility"], "available", "{}", l2["free"]);
    // The owner's own listing shows it available.
    let (l1, _) = c1.list_all(100);
    let l1 = by_id(&l1);
    assert_eq!(l1["shared"]["eligibility"], "available", "{}", l1["shared"]);

    // c2 attaches something else; a failed busy open keeps it.
    let rev_free = c2.open_rev("free");
    c2.fails(
        "session.open",
        &json!({ "session_id": "shared" }),
        "session_busy",
    );
    assert_eq!(c2.attached(), "free");
    c2.page("free", &rev_free, None);
    // And now c1 cannot take "free".
    c1.fails(
        "session.open",
        &json!({ "session_id": "free" }),
        "session_busy",
    );
    assert_eq!(c1.attached(), "shared");

    // After c1 exits, c2 can open it.
    c1.s.shutdown_ok("bye");
    drop(c1);
    let r = c2.open("shared");
    assert_eq!(r["durable"], true);
    let (entries, _) = c2.page_all("shared", r["revision"].as_str().unwrap());
    assert_eq!(messages(&entries).len(), 2);
    let (l2, _) = c2.list_all(100);
    let l2 = by_id(&l2);
    assert_eq!(l2["shared"]["eligibility"], "available", "{}", l2["shared"]);
    // c2 switched away from "free": its lease is released.
    assert_eq!(l2["free"]["eligibility"], "available", "{}", l2["free"]);
    let mut c3 = Client::start(&env, &BASE);
    c3.open("free");
    c3.s.shutdown_ok("bye");
    c2.s.shutdown_ok("bye");
}

#[test]
fn a_stale_lock_file_lists_busy_but_opens() {
    let env = Env::new();
    tiny(&env, "crashed");
    tiny(&env, "other");
    write_raw(&env, "crashed.writer.lock", b"999999\n");
    let mut c = Client::start(&env, &BASE);
    let (l, _) = c.list_all(100);
    let l = by_id(&l);
    assert_eq!(
        l["crashed"]["eligibility"], "busy",
        "conservative: {}",
        l["crashed"]
    );
    assert_eq!(l["other"]["eligibility"], "available");
    // Listing never removes a lease file.
    assert!(sessions_dir(&env).join("crashed.writer.lock").exists());
    let r = c.open("crashed");
    assert_eq!(r["durable"], true);
    assert_eq!(c.attached(), "crashed");
    let (l, _) = c.list_all(100);
    assert_eq!(by_id(&l)["crashed"]["eligibility"], "available");
    c.s.shutdown_ok("bye");
}
