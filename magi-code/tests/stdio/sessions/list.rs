//! `session.list`: order, pages and entry descriptions, revisions replaced and invalidated
//! stickily, `discovery_limit` and `discovery_unavailable`.

use super::*;
use std::os::unix::fs::DirBuilderExt;

#[test]
fn list_orders_pages_and_describes_sessions() {
    let env = Env::new();
    let long_title = "Überlange Überschrift über sehr viele Dinge, die immer weiter geht und geht";
    assert!(long_title.chars().count() > 50);
    // Created in descending order: the listing must not follow creation or mtime.
    let ids = [
        "zeta", "b", "a", "_under", "Z9", "A", "-dash", "9lives", "a-b_c",
    ];
    for (i, id) in (0u64..).zip(ids) {
        let mut r = vec![meta(&env, id)];
        match id {
            "zeta" => r.push(rec("title", id, &json!({ "title": long_title }))),
            "b" => {
                r.push(rec("title", id, &json!({ "title": "first" })));
                r.push(rec("title", id, &json!({ "title": "second" })));
            }
            "a" => {
                let mut t = rec("title", id, &json!({ "title": "times" }));
                t["ts"] = json!("2026-11-30T12:00:00Z");
                r.push(t);
                for ts in [
                    "2026-12-01T08:00:00+02:00",
                    "2026-12-01T05:59:59.999Z",
                    "2026-11-30T21:30:00-08:00",
                ] {
                    let mut u = rec("title", id, &json!({ "title": "times" }));
                    u["ts"] = json!(ts);
                    r.push(u);
                }
            }
            "A" => r.extend(run(id, "r1", "a prompt is never a title", Some("reply"))),
            _ => {}
        }
        write_history(&env, id, &r);
        // Each later one a second newer, set rather than waited for.
        fs::File::options()
            .write(true)
            .open(sessions_dir(&env).join(format!("{id}.jsonl")))
            .unwrap()
            .set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + i))
            .unwrap();
    }
    // Not listed: other workspace, malformed, subagent/archive histories, non-session names.
    write_history(
        &env,
        "elsewhere",
        &[rec("session_meta", "elsewhere", &json!({ "cwd": "/" }))],
    );
    write_raw(&env, "malformed.jsonl", b"[1,2,3]\n");
    write_raw(&env, "readme.txt", b"not a session");
    write_raw(&env, "zeta.writer.lock.old", b"");
    for sub in ["subagents", "archive"] {
        let d = sessions_dir(&env).join(sub);
        fs::create_dir(&d).unwrap();
        fs::write(
            d.join("hidden.jsonl"),
            jsonl(&[rec("session_meta", "hidden", &json!({}))]),
        )
        .unwrap();
    }

    let mut c = Client::start(&env, &BASE);
    let full = c.ok("session.list", &json!({}));
    check_list(&full);
    assert_eq!(full["complete"], true);
    assert!(full["next_cursor"].is_null());
    assert_eq!(
        full["notices"],
        json!(["sessions_omitted_invalid"]),
        "one bounded notice for the malformed history: {full}"
    );
    let mut sorted: Vec<&str> = ids.to_vec();
    sorted.sort_unstable();
    assert_eq!(ids_of(full["sessions"].as_array().unwrap()), sorted);
    assert_eq!(
        sorted,
        ["-dash", "9lives", "A", "Z9", "_under", "a", "a-b_c", "b", "zeta"]
    );
    let e = by_id(full["sessions"].as_array().unwrap());
    let cut: String = long_title.chars().take(50).collect();
    assert_eq!(e["zeta"]["title"], cut.as_str(), "cut to 50 characters");
    assert_eq!(e["b"]["title"], "second", "the latest title record");
    assert!(e["A"]["title"].is_null(), "never derived from a prompt");
    assert!(e["9lives"]["title"].is_null());
    assert_instant(&e["a"]["updated_at"], "2026-12-01T06:00:00");
    assert_instant(&e["9lives"]["updated_at"], "2026-11-30T12:00:00");
    for v in e.values() {
        assert_eq!(v["eligibility"], "available", "{v}");
        assert_eq!(v["notices"], json!([]), "{v}");
    }

    // Paging with limit 2: same order, same entries, one revision.
    let first = c.list(2);
    let rev = first["revision"].as_str().unwrap().to_owned();
    assert_ne!(rev, full["revision"].as_str().unwrap(), "decisions.md 12");
    let mut paged: Vec<Value> = first["sessions"].as_array().unwrap().clone();
    assert_eq!(paged.len(), 2);
    let mut r = first;
    let mut pages = 1;
    while let Some(cur) = r["next_cursor"].as_str().map(str::to_owned) {
        r = c.list_more(&rev, &cur, 2);
        assert!(r["sessions"].as_array().unwrap().len() <= 2);
        assert_eq!(r["notices"], json!(["sessions_omitted_invalid"]));
        paged.extend(r["sessions"].as_array().unwrap().iter().cloned());
        pages += 1;
    }
    assert_eq!(pages, 5);
    assert_eq!(r["complete"], true);
    assert_eq!(&paged, full["sessions"].as_array().unwrap());

    // Limit 1 and 100 are accepted.
    let one = c.list(1);
    assert_eq!(one["sessions"].as_array().unwrap().len(), 1);
    assert_eq!(one["complete"], false);
    let hundred = c.list(100);
    assert_eq!(hundred["sessions"].as_array().unwrap().len(), ids.len());
    c.ok("session.list", &json!({ "revision": null, "cursor": null }));
    c.ok("session.list", &json!({ "limit": 7 }));
    // Invalid params.
    let one_rev = one["revision"].as_str().unwrap();
    let one_cur = one["next_cursor"].as_str().unwrap();
    for bad in [
        json!({ "limit": 0 }),
        json!({ "limit": 101 }),
        json!({ "limit": -1 }),
        json!({ "limit": 1.5 }),
        json!({ "limit": "5" }),
        json!({ "revision": one_rev }),
        json!({ "revision": one_rev, "cursor": null }),
        json!({ "cursor": one_cur }),
        json!({ "revision": null, "cursor": one_cur }),
        json!({ "revision": "bad revision", "cursor": one_cur }),
        json!({ "revision": one_rev, "cursor": "x".repeat(65) }),
        json!({ "unknown": 1 }),
        json!([]),
    ] {
        c.fails("session.list", &bad, "invalid_params");
    }
    c.s.shutdown_ok("bye");
}

#[test]
fn list_revisions_are_replaced_and_invalidated_stickily() {
    let env = Env::new();
    let mut paths = HashMap::new();
    for id in ["s1", "s2", "s3", "s4"] {
        paths.insert(id, tiny(&env, id));
    }
    let mut c = Client::start(&env, &BASE);
    let p = |rev: &str, cur: &str| json!({ "revision": rev, "cursor": cur, "limit": 1 });

    let a = c.list(1);
    let (rev_a, cur_a) = (
        a["revision"].as_str().unwrap().to_owned(),
        a["next_cursor"].as_str().unwrap().to_owned(),
    );
    // decisions.md 12: a fresh listing makes the previous revision stale.
    let b = c.list(1);
    let (rev_b, cur_b) = (
        b["revision"].as_str().unwrap().to_owned(),
        b["next_cursor"].as_str().unwrap().to_owned(),
    );
    assert_ne!(rev_a, rev_b);
    c.fails("session.list", &p(&rev_a, &cur_a), "stale_revision");
    c.fails("session.list", &p(&rev_b, &cur_a), "stale_revision");
    c.fails("session.list", &p(&rev_a, &cur_b), "stale_revision");
    c.fails("session.list", &p(&rev_b, "never-issued"), "stale_revision");
    // Those failures do not touch the current snapshot.
    let b2 = c.list_more(&rev_b, &cur_b, 1);
    assert_eq!(ids_of(b2["sessions"].as_array().unwrap()), ["s2"]);
    let cur_b2 = b2["next_cursor"].as_str().unwrap().to_owned();

    // A history changes: the continuation is stale, and stays stale after restoring it.
    let saved = save(&paths["s3"]);
    append_line(
        &paths["s3"],
        &rec("title", "s3", &json!({ "title": "new" })),
    );
    c.fails("session.list", &p(&rev_b, &cur_b2), "stale_revision");
    restore(&saved);
    c.fails("session.list", &p(&rev_b, &cur_b2), "stale_revision");
    c.fails("session.list", &p(&rev_b, &cur_b), "stale_revision");

    // A fresh listing works again; an added lease file is a mutation too.
    let d = c.list(2);
    let (rev_d, cur_d) = (
        d["revision"].as_str().unwrap().to_owned(),
        d["next_cursor"].as_str().unwrap().to_owned(),
    );
    let d2 = c.list_more(&rev_d, &cur_d, 1);
    let cur_d2 = d2["next_cursor"].as_str().unwrap().to_owned();
    let lock = write_raw(&env, "s4.writer.lock", b"");
    c.fails("session.list", &p(&rev_d, &cur_d2), "stale_revision");
    fs::remove_file(&lock).unwrap();
    c.fails("session.list", &p(&rev_d, &cur_d2), "stale_revision");

    // A new history is a mutation too.
    let e = c.list(1);
    let (rev_e, cur_e) = (
        e["revision"].as_str().unwrap().to_owned(),
        e["next_cursor"].as_str().unwrap().to_owned(),
    );
    tiny(&env, "s5");
    c.fails("session.list", &p(&rev_e, &cur_e), "stale_revision");
    // A vanished history as well.
    let f = c.list(1);
    let (rev_f, cur_f) = (
        f["revision"].as_str().unwrap().to_owned(),
        f["next_cursor"].as_str().unwrap().to_owned(),
    );
    fs::remove_file(&paths["s1"]).unwrap();
    c.fails("session.list", &p(&rev_f, &cur_f), "stale_revision");
    // Attaching a session changes the snapshot's attachment component.
    let g = c.list(1);
    let (rev_g, cur_g) = (
        g["revision"].as_str().unwrap().to_owned(),
        g["next_cursor"].as_str().unwrap().to_owned(),
    );
    c.open("s2");
    c.fails("session.list", &p(&rev_g, &cur_g), "stale_revision");
    let (all, _) = c.list_all(1);
    assert_eq!(ids_of(&all), ["s2", "s3", "s4", "s5"]);
    c.s.shutdown_ok("bye");
}

#[test]
fn directory_and_session_bounds_are_discovery_limit() {
    let env = Env::new();
    tiny(&env, "only");
    let dir = sessions_dir(&env);
    for i in 0..4_095 {
        fs::write(dir.join(format!("n{i}.txt")), b"").unwrap();
    }
    let mut c = Client::start(&env, &BASE);
    // 4,096 names: fine.
    let r = c.list(100);
    assert_eq!(ids_of(r["sessions"].as_array().unwrap()), ["only"]);
    // 4,097 names: discovery_limit; a status right behind it is still answered.
    fs::write(dir.join("n4095.txt"), b"").unwrap();
    let list_id = c.send("session.list", &json!({}));
    let status_id = c.send("status", &json!({}));
    let got = c.s.responses(&[&list_id, &status_id]);
    assert_error(&got[&list_id], Some(&list_id), "discovery_limit");
    assert_eq!(result(&got[&status_id])["readiness"], "ready");
    // No partial page; the connection stays usable.
    for i in 0..4_096 {
        fs::remove_file(dir.join(format!("n{i}.txt"))).unwrap();
    }
    // 256 histories: fine.
    for i in 1..256 {
        fs::write(
            dir.join(format!("h{i:03}.jsonl")),
            jsonl(&[rec("session_meta", &format!("h{i:03}"), &json!({}))]),
        )
        .unwrap();
    }
    let (all, _) = c.list_all(100);
    assert_eq!(all.len(), 256);
    // 257 histories: discovery_limit.
    let extra = tiny(&env, "one-more");
    c.fails("session.list", &json!({}), "discovery_limit");
    c.status();
    fs::remove_file(extra).unwrap();
    c.list(100);
    // One history over the per-file line bound (10,000 lines) is listed all the same.
    let mut long = vec![rec("session_meta", "h001", &json!({}))];
    long.extend((0..10_000).map(|_| rec("title", "h001", &json!({ "title": "t" }))));
    write_history(&env, "h001", &long);
    let (all, _) = c.list_all(100);
    assert_eq!(all.len(), 256, "a large history never fails the listing");
    c.s.shutdown_ok("bye");
}

/// A history of exactly `bytes` bytes whose early records carry the title `early`, then
/// user inputs of filler, the last with the timestamp `ts`.
fn sized(env: &Env, id: &str, bytes: usize, ts: &str) -> Vec<u8> {
    let mut head = jsonl(&[
        meta(env, id),
        rec("title", id, &json!({ "title": "early" })),
    ]);
    let filler = |n: usize, text_len: usize| {
        let mut r = rec(
            "user_input",
            id,
            &json!({ "run_id": format!("r{n}"), "text": "f".repeat(text_len) }),
        );
        r["ts"] = json!(ts);
        jsonl(&[r])
    };
    let overhead = filler(0, 0).len();
    let mut n = 0;
    while head.len() + 2 * (overhead + 100_000) < bytes {
        head.extend(filler(n, 100_000));
        n += 1;
    }
    let rest = bytes - head.len();
    // Two last lines, so the newest whole record fits well within the newest 1 MiB.
    let a = rest / 2;
    head.extend(filler(n, a - filler(n, 0).len()));
    let b = bytes - head.len();
    head.extend(filler(n + 1, b - filler(n + 1, 0).len()));
    assert_eq!(head.len(), bytes);
    head
}

/// `decisions.md` 49: a history within the per-session bounds is read whole; one byte or one
/// line more, it is listed from its first record and newest records within 1 MiB.
#[test]
fn large_histories_are_listed_from_their_newest_records() {
    let env = Env::new();
    let at = protocol_core::limits::DISCOVERY_SESSION_BYTES as usize;
    write_raw(
        &env,
        "exact.jsonl",
        &sized(&env, "exact", at, "2026-12-01T10:00:00Z"),
    );
    write_raw(
        &env,
        "over.jsonl",
        &sized(&env, "over", at + 1, "2026-12-01T11:00:00Z"),
    );
    // Lines: exactly 10,000 and one more, titles only at the start.
    let lines = |id: &str, n: usize| {
        let mut v = vec![
            meta(&env, id),
            rec("title", id, &json!({ "title": "early" })),
        ];
        v.extend((2..n).map(|i| {
            rec(
                "usage",
                id,
                &json!({ "run_id": format!("r{i}"), "input_tokens": 1, "output_tokens": 1 }),
            )
        }));
        v
    };
    write_history(&env, "lexact", &lines("lexact", 10_000));
    write_history(&env, "lover", &lines("lover", 10_001));
    // A large history whose newest record is over 1 MiB: nothing whole to list it from.
    let mut big = sized(&env, "nowhole", at + 1, "2026-12-01T11:00:00Z");
    big.extend(jsonl(&[rec(
        "title",
        "nowhole",
        &json!({ "title": "x".repeat(1 << 20) }),
    )]));
    write_raw(&env, "nowhole.jsonl", &big);
    // A large history whose newest records name another workspace: excluded.
    let mut other = sized(&env, "other", at + 1, "2026-12-01T11:00:00Z");
    other.extend(jsonl(&[rec(
        "title",
        "other",
        &json!({ "title": "t", "cwd": "/" }),
    )]));
    write_raw(&env, "other.jsonl", &other);
    let mut c = Client::start(&env, &BASE);
    let (all, first) = c.list_all(100);
    let got = by_id(&all);
    assert_eq!(
        ids_of(&all),
        ["exact", "lexact", "lover", "over"],
        "{all:?}"
    );
    assert_eq!(first["notices"], json!(["sessions_omitted_invalid"]));
    assert_eq!(got["exact"]["title"], "early", "read whole");
    assert_eq!(got["exact"]["updated_at"], "2026-12-01T10:00:00Z");
    assert_eq!(got["lexact"]["title"], "early");
    for id in ["over", "lover"] {
        assert!(
            got[id]["title"].is_null(),
            "{id}: the title is older than what is read"
        );
        assert_eq!(got[id]["eligibility"], "available");
    }
    assert_eq!(got["over"]["updated_at"], "2026-12-01T11:00:00Z");
    c.s.shutdown_ok("bye");
}

#[test]
fn unusable_inventory_is_discovery_unavailable() {
    let env = Env::new();
    tiny(&env, "good");
    let mut c = Client::start(&env, &BASE);
    for name in [
        "bad.name.jsonl",
        ".jsonl",
        &format!("{}.jsonl", "x".repeat(65)),
    ] {
        let p = write_raw(&env, name, &jsonl(&[meta(&env, "good")]));
        c.fails("session.list", &json!({}), "discovery_unavailable");
        fs::remove_file(p).unwrap();
        c.list(100);
    }
    c.s.shutdown_ok("bye");

    // The sessions folder replaced by a symlink to another folder.
    let env = Env::new();
    let real = env.home().join("real-sessions");
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&real)
        .unwrap();
    fs::write(real.join("good.jsonl"), jsonl(&[meta(&env, "good")])).unwrap();
    std::os::unix::fs::symlink(&real, env.home().join("sessions")).unwrap();
    let mut c = Client::start(&env, &BASE);
    c.fails("session.list", &json!({}), "discovery_unavailable");
    c.status();
    c.s.shutdown_ok("bye");
}
