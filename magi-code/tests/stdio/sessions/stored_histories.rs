//! Stored histories `session.open` refuses or reads as partial: failed opens keep the
//! attachment; unsafe or malformed files, interrupted turns, the recorded cwd and oversized
//! histories.

use super::*;

#[test]
fn failed_opens_leave_the_attachment_intact() {
    let env = Env::new();
    let mut a = vec![meta(&env, "keep")];
    a.extend(run("keep", "r1", "hello", Some("world")));
    write_history(&env, "keep", &a);
    write_raw(&env, "broken.jsonl", b"{not json\n");
    write_history(
        &env,
        "elsewhere",
        &[rec("session_meta", "elsewhere", &json!({ "cwd": "/" }))],
    );
    let mut c = Client::start(&env, &BASE);
    let rev = c.open_rev("keep");
    for (target, code) in [
        ("missing", "session_missing"),
        ("broken", "session_invalid"),
        ("elsewhere", "cwd_mismatch"),
    ] {
        c.fails("session.open", &json!({ "session_id": target }), code);
        assert_eq!(c.attached(), "keep", "after {code}");
        let (entries, _) = c.page_all("keep", &rev);
        let m = messages(&entries);
        assert_eq!(
            m,
            vec![
                ("user".into(), "hello".into(), false),
                ("assistant".into(), "world".into(), false)
            ],
            "after {code}"
        );
    }
    // A lazy attachment survives a failed open as well.
    let lazy = c.ok("session.create", &json!({}));
    let lazy_id = lazy["session_id"].as_str().unwrap().to_owned();
    c.fails(
        "session.open",
        &json!({ "session_id": "missing" }),
        "session_missing",
    );
    assert_eq!(c.attached(), lazy_id.as_str());
    c.page(&lazy_id, lazy["revision"].as_str().unwrap(), None);
    c.s.shutdown_ok("bye");
}

#[test]
fn unsafe_or_malformed_histories_are_session_invalid() {
    let env = Env::new();
    let dir = sessions_dir(&env);
    // Malformed JSON on a complete line.
    let mut b = jsonl(&[meta(&env, "badjson")]);
    b.extend_from_slice(b"{\"type\":\"title\",\"session_id\":\"badjson\",\n");
    write_raw(&env, "badjson.jsonl", &b);
    // A record of another session.
    write_history(
        &env,
        "otherid",
        &[
            meta(&env, "otherid"),
            rec("title", "someone-else", &json!({ "title": "t" })),
        ],
    );
    // A stored diagnostic record.
    write_history(
        &env,
        "diag",
        &[
            meta(&env, "diag"),
            rec(
                "diagnostic",
                "diag",
                &json!({ "code": "x", "summary": "y" }),
            ),
        ],
    );
    // A symlink named like a history, pointing at a valid history of the same ID.
    let target = env.root.join("outside.jsonl");
    fs::write(&target, jsonl(&[meta(&env, "link")])).unwrap();
    std::os::unix::fs::symlink(&target, dir.join("link.jsonl")).unwrap();
    // A FIFO (nobody writes to it: a blocking open would hang).
    mkfifo(&dir.join("x.jsonl"));
    // A directory.
    fs::create_dir(dir.join("dir.jsonl")).unwrap();
    // A record without a valid timestamp.
    write_history(
        &env,
        "badts",
        &[rec("session_meta", "badts", &json!({ "ts": "yesterday" }))],
    );

    let mut c = Client::start(&env, &BASE);
    let home = env.home().to_string_lossy().into_owned();
    for id in ["badjson", "otherid", "diag", "link", "x", "dir", "badts"] {
        let rid = c.next_id();
        c.s.request(&rid, "session.open", &json!({ "session_id": id }));
        let f = c.s.next_within(Duration::from_secs(5));
        assert_error(&f, Some(&rid), "session_invalid");
        // {"code"} only (checked by the harness), and no path or content anywhere.
        let raw = f.to_string();
        assert!(!raw.contains(&home) && !raw.contains(".jsonl"), "{raw}");
        assert!(!raw.contains("someone-else"), "{raw}");
        assert!(
            c.attached().is_null(),
            "failed open attaches nothing ({id})"
        );
    }
    // Nothing was touched.
    assert!(fs::symlink_metadata(dir.join("link.jsonl"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::metadata(dir.join("dir.jsonl")).unwrap().is_dir());
    assert_eq!(fs::read(&target).unwrap(), jsonl(&[meta(&env, "link")]));
    // Listing omits them all with one bounded notice (and does not hang on the FIFO).
    tiny(&env, "fine");
    let rid = c.next_id();
    c.s.request(&rid, "session.list", &json!({}));
    let f = c.s.next_within(Duration::from_secs(5));
    assert_eq!(f["id"], rid.as_str());
    let r = result(&f);
    check_list(r);
    assert_eq!(ids_of(r["sessions"].as_array().unwrap()), ["fine"], "{r}");
    assert_eq!(r["notices"], json!(["sessions_omitted_invalid"]), "{r}");
    let raw = f.to_string();
    assert!(!raw.contains(&home) && !raw.contains("badjson"), "{raw}");
    // The connection stays usable.
    c.status();
    c.s.shutdown_ok("bye");
}

#[test]
fn interrupted_turns_are_partial_not_invalid() {
    let env = Env::new();
    // decisions.md 23: a torn last line (no LF).
    let mut torn = jsonl(&[meta(&env, "torn")]);
    for r in run("torn", "r1", "first", Some("reply one")) {
        torn.extend(jsonl(&[r]));
    }
    torn.extend(jsonl(&[rec(
        "user_input",
        "torn",
        &json!({ "run_id": "r2", "text": "second" }),
    )]));
    torn.extend_from_slice(
        br#"{"type":"assistant_message","session_id":"torn","ts":"2026-11-30T1"#,
    );
    let torn_path = write_raw(&env, "torn.jsonl", &torn);
    // A torn fragment that is the whole file.
    write_raw(&env, "onlytorn.jsonl", br#"{"type":"session_meta","#);
    // A turn without durable completion (complete lines only).
    let mut open_run = vec![meta(&env, "openrun")];
    open_run.extend(run("openrun", "r1", "done", Some("ok")));
    open_run.push(rec(
        "user_input",
        "openrun",
        &json!({ "run_id": "r2", "text": "never finished" }),
    ));
    open_run.push(rec(
        "assistant_chunk",
        "openrun",
        &json!({ "run_id": "r2", "message_id": "a2", "text": "half a rep" }),
    ));
    write_history(&env, "openrun", &open_run);
    // A recorded failed turn: partial reply kept, projection complete.
    let failed = vec![
        meta(&env, "failed"),
        rec(
            "user_input",
            "failed",
            &json!({ "run_id": "r1", "text": "try" }),
        ),
        rec(
            "assistant_chunk",
            "failed",
            &json!({ "run_id": "r1", "message_id": "a1", "text": "par" }),
        ),
        rec(
            "run_finished",
            "failed",
            &json!({ "run_id": "r1", "outcome": "failed" }),
        ),
    ];
    write_history(&env, "failed", &failed);

    let mut c = Client::start(&env, &BASE);
    let r = c.open("torn");
    assert_eq!(r["durable"], true);
    assert_eq!(r["notices"], json!([]));
    let rev = r["revision"].as_str().unwrap().to_owned();
    let p = c.page("torn", &rev, None);
    assert_eq!(
        p["complete"], false,
        "an interrupted turn is incomplete: {p}"
    );
    assert!(p["next_cursor"].is_null());
    let entries = p["entries"].as_array().unwrap();
    let last = entries.last().unwrap();
    assert_eq!(last["kind"], "diagnostic", "{p}");
    assert_eq!(last["partial"], true, "{p}");
    let m = messages(entries);
    assert_eq!(
        m[..3],
        [
            ("user".to_owned(), "first".to_owned(), false),
            ("assistant".to_owned(), "reply one".to_owned(), false),
            ("user".to_owned(), "second".to_owned(), false),
        ]
    );
    assert_eq!(m.len(), 4, "{m:?}");
    // Readers ignore the fragment; only an owner's append cuts it.
    assert_eq!(fs::read(&torn_path).unwrap(), torn);

    let r = c.open("onlytorn");
    assert_eq!(r["durable"], true);
    let p = c.page("onlytorn", r["revision"].as_str().unwrap(), None);
    assert_eq!(p["complete"], false, "{p}");
    let e = p["entries"].as_array().unwrap();
    assert_eq!(e.last().unwrap()["kind"], "diagnostic", "{p}");
    assert_eq!(e.last().unwrap()["partial"], true, "{p}");

    let rev = c.open_rev("openrun");
    let p = c.page("openrun", &rev, None);
    assert_eq!(p["complete"], false, "{p}");
    let e = p["entries"].as_array().unwrap();
    assert_eq!(e.last().unwrap()["kind"], "diagnostic", "{p}");
    assert_eq!(e.last().unwrap()["partial"], true, "{p}");
    let m = messages(e);
    assert!(
        m.contains(&("assistant".into(), "half a rep".into(), true)),
        "the unfinished reply is partial: {m:?}"
    );

    let rev = c.open_rev("failed");
    let p = c.page("failed", &rev, None);
    assert_eq!(
        p["complete"], true,
        "a recorded failed turn is complete: {p}"
    );
    let m = messages(p["entries"].as_array().unwrap());
    assert_eq!(m[0], ("user".into(), "try".into(), false));
    assert_eq!(m[1].0, "assistant");
    assert_eq!(m[1].1, "par", "the partial reply is kept");
    // The stored failure says why the reply is short (runner.md 5): a diagnostic entry
    // derived from run_finished, not the partial interruption one.
    assert_eq!(
        m[2..],
        [("diagnostic".into(), "The turn failed.".into(), false)],
        "{m:?}"
    );

    // Listing shows the torn history too (never invalid).
    let (all, first) = c.list_all(100);
    assert_eq!(first["notices"], json!([]), "{first}");
    let ids = ids_of(&all);
    assert_eq!(ids, ["failed", "onlytorn", "openrun", "torn"]);
    c.s.shutdown_ok("bye");
}

#[test]
fn recorded_cwd_must_be_the_childs_canonical_cwd() {
    let env = Env::new();
    let other = env.root.join("other");
    fs::create_dir(&other).unwrap();
    let alias = env.root.join("alias");
    std::os::unix::fs::symlink(&env.cwd, &alias).unwrap();
    let cwd = canonical_cwd(&env);
    let with_cwd = |id: &str, cwd: &str| {
        vec![
            rec("session_meta", id, &json!({ "cwd": cwd })),
            rec("title", id, &json!({ "title": format!("title of {id}") })),
        ]
    };
    write_history(&env, "other", &with_cwd("other", other.to_str().unwrap()));
    write_history(&env, "relative", &with_cwd("relative", "cwd"));
    write_history(&env, "dot", &with_cwd("dot", "."));
    write_history(
        &env,
        "gone",
        &with_cwd("gone", env.root.join("deleted").to_str().unwrap()),
    );
    let mut mixed = with_cwd("mixed", &cwd);
    mixed.push(rec(
        "session_meta",
        "mixed",
        &json!({ "cwd": other.to_str().unwrap() }),
    ));
    write_history(&env, "mixed", &mixed);
    write_history(&env, "alias", &with_cwd("alias", alias.to_str().unwrap()));
    write_history(
        &env,
        "dotted",
        &with_cwd("dotted", &format!("{cwd}/../cwd/.")),
    );
    write_history(&env, "exact", &with_cwd("exact", &cwd));
    write_history(
        &env,
        "nocwd",
        &[
            rec("session_meta", "nocwd", &json!({})),
            rec("title", "nocwd", &json!({ "title": "legacy" })),
        ],
    );
    write_raw(&env, "empty.jsonl", b"");

    let mut c = Client::start(&env, &BASE);
    for id in ["other", "relative", "dot", "gone", "mixed"] {
        c.fails("session.open", &json!({ "session_id": id }), "cwd_mismatch");
        assert!(c.attached().is_null());
    }
    for id in ["alias", "dotted", "exact"] {
        let r = c.open(id);
        assert_eq!(r["durable"], true, "{r}");
        assert_eq!(r["notices"], json!([]), "{r}");
    }
    // No recorded cwd: cwd_unverified, never fabricated verification.
    let r = c.open("nocwd");
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!(["cwd_unverified"]), "{r}");
    // decisions.md 11: an empty file is durable, unverified, and empty.
    let r = c.open("empty");
    assert_eq!(r["durable"], true, "{r}");
    assert_eq!(r["notices"], json!(["cwd_unverified"]), "{r}");
    let p = c.page("empty", r["revision"].as_str().unwrap(), None);
    assert_eq!(p["entries"], json!([]));
    assert_eq!(p["complete"], true);
    assert!(p["next_cursor"].is_null());

    // Listing applies the same rule (from a child attached elsewhere: this child's own
    // attachment is always available to it).
    c.open("exact");
    let (all, first) = c.list_all(100);
    assert_eq!(first["notices"], json!([]), "{first}");
    let got = by_id(&all);
    let ids: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    assert_eq!(
        ids,
        BTreeSet::from(["alias", "dotted", "empty", "exact", "nocwd"]),
        "wrong-workspace, relative and missing cwds are excluded"
    );
    for id in ["nocwd", "empty"] {
        assert_eq!(got[id]["eligibility"], "cwd_unverified", "{}", got[id]);
        assert_eq!(got[id]["notices"], json!(["cwd_unverified"]), "{}", got[id]);
    }
    for id in ["alias", "dotted", "exact"] {
        assert_eq!(got[id]["eligibility"], "available", "{}", got[id]);
        assert_eq!(got[id]["notices"], json!([]), "{}", got[id]);
    }
    assert!(got["empty"]["updated_at"].is_null());
    assert!(got["empty"]["title"].is_null());
    c.s.shutdown_ok("bye");
}

/// Histories past every read and projection bound open as windows (`decisions.md` 47, 48);
/// only a newest record no window can hold is `history_limit`.
#[test]
fn histories_past_the_bounds_open_as_windows() {
    let env = Env::new();
    // Over 64 MiB of valid lines: a window of the newest.
    {
        let path = sessions_dir(&env).join("bytes.jsonl");
        let mut f = std::io::BufWriter::new(fs::File::create(&path).unwrap());
        f.write_all(&jsonl(&[meta(&env, "bytes")])).unwrap();
        let line = jsonl(&[rec(
            "title",
            "bytes",
            &json!({ "title": "t".repeat(1 << 20) }),
        )]);
        let mut written = 0;
        while written <= 64 << 20 {
            f.write_all(&line).unwrap();
            written += line.len();
        }
        f.write_all(&jsonl(&run("bytes", "last", "the newest turn", None)))
            .unwrap();
        f.flush().unwrap();
    }
    // A newest record of more than 64 MiB: no window holds it.
    {
        let path = sessions_dir(&env).join("huge.jsonl");
        let mut f = std::io::BufWriter::new(fs::File::create(&path).unwrap());
        f.write_all(&jsonl(&[meta(&env, "huge")])).unwrap();
        f.write_all(&jsonl(&[rec(
            "title",
            "huge",
            &json!({ "title": "t".repeat((64 << 20) + 1) }),
        )]))
        .unwrap();
        f.flush().unwrap();
    }
    // 100,001 lines: the first record and exactly 100,000 more (the first is read beside the
    // bound); 100,002: the oldest counted line is left out.
    let many_lines = |id: &str, n: usize| {
        let mut v = jsonl(&[meta(&env, id)]);
        v.extend(jsonl(&run(id, "r0", "the oldest turn", None)));
        let short = jsonl(&[rec("title", id, &json!({ "title": "t" }))]);
        for _ in 3..n {
            v.extend_from_slice(&short);
        }
        v
    };
    write_raw(&env, "atlimit.jsonl", &many_lines("atlimit", 100_001));
    write_raw(&env, "lines.jsonl", &many_lines("lines", 100_002));
    // 10,000 projected parts, and one more.
    let parts_of = |id: &str, n: usize| {
        let mut v = vec![meta(&env, id)];
        for i in 0..n {
            v.push(rec(
                "user_input",
                id,
                &json!({ "run_id": format!("r{i}"), "text": format!("p{i}") }),
            ));
            v.push(rec(
                "run_finished",
                id,
                &json!({ "run_id": format!("r{i}"), "outcome": "completed" }),
            ));
        }
        v
    };
    write_history(&env, "parts", &parts_of("parts", 10_000));
    write_history(&env, "partsover", &parts_of("partsover", 10_001));
    // Just over 8 MiB of serialized projection in fewer parts: 530 inputs of about 16 KB.
    // One long word, not many short ones: the redactor every projected text goes through
    // costs per word, and this test is about the bound, not the redactor.
    let mut projected = vec![meta(&env, "projbytes")];
    let text = "x".repeat(16_000);
    for i in 0..530 {
        projected.extend(run("projbytes", &format!("r{i}"), &text, None));
    }
    write_history(&env, "projbytes", &projected);
    tiny(&env, "keep");

    let mut c = Client::start(&env, &BASE);
    let rev = c.open_rev("keep");
    let f = open_large(&mut c, "huge");
    assert_error(&f, f["id"].as_str(), "history_limit");
    assert_eq!(c.attached(), "keep");
    c.page("keep", &rev, None);
    // Every other one opens, durable, and pages to its end.
    let opened = |c: &mut Client, id: &str| -> (Vec<Value>, bool) {
        let r = result(&open_large(c, id)).clone();
        assert_open_result(&r, id);
        assert_eq!(r["durable"], true);
        let rev = r["revision"].as_str().unwrap().to_owned();
        let (entries, _, complete) = c.page_all_complete(id, &rev);
        (entries, complete)
    };
    let earlier = |e: &[Value]| {
        e[0]["kind"] == "diagnostic"
            && e[0]["text"] == "earlier history is not shown"
            && e[0]["partial"] == false
    };
    let (e, complete) = opened(&mut c, "bytes");
    assert!(!complete && earlier(&e), "{:?}", &e[..1]);
    assert_eq!(e.last().unwrap()["text"], "the newest turn");
    let (e, complete) = opened(&mut c, "atlimit");
    assert!(complete, "nothing left out");
    assert_eq!(e[0]["text"], "the oldest turn");
    let (e, complete) = opened(&mut c, "lines");
    assert!(!complete && earlier(&e));
    assert!(e.iter().all(|x| x["text"] != "the oldest turn"));
    let (e, complete) = opened(&mut c, "parts");
    assert!(complete);
    assert_eq!(e.len(), 10_000);
    let (e, complete) = opened(&mut c, "partsover");
    assert!(!complete && earlier(&e));
    assert_eq!(e.len(), 10_000, "the diagnostic and the newest 9,999 turns");
    assert_eq!(e[1]["text"], "p2");
    assert_eq!(e.last().unwrap()["text"], "p10000");
    let (e, complete) = opened(&mut c, "projbytes");
    assert!(!complete && earlier(&e));
    c.s.shutdown_ok("bye");
}

/// The read window at its byte edge (`decisions.md` 47): the first record and exactly 64 MiB
/// of lines after it are read whole; one byte more leaves the oldest counted line out.
#[test]
fn the_read_window_at_exactly_64_mib_and_one_byte_more() {
    let env = Env::new();
    let write = |id: &str, extra: usize| {
        let path = sessions_dir(&env).join(format!("{id}.jsonl"));
        let mut f = std::io::BufWriter::new(fs::File::create(&path).unwrap());
        f.write_all(&jsonl(&[meta(&env, id)])).unwrap();
        let mut counted = 0usize;
        let oldest = jsonl(&run(id, "r0", "the oldest turn", None));
        let newest = jsonl(&run(id, "r1", "the newest turn", None));
        counted += oldest.len() + newest.len();
        f.write_all(&oldest).unwrap();
        // Filler between the turns: results of no call, never projected.
        let filler = |len: usize| {
            let empty = jsonl(&[rec("title", id, &json!({ "title": "" }))]).len();
            jsonl(&[rec(
                "title",
                id,
                &json!({ "title": "t".repeat(len - empty) }),
            )])
        };
        let target = (64 << 20) + extra;
        let big = filler(1 << 20);
        while counted + big.len() + (2 << 20) < target {
            f.write_all(&big).unwrap();
            counted += big.len();
        }
        let rest = target - counted;
        f.write_all(&filler(rest / 2)).unwrap();
        f.write_all(&filler(rest - rest / 2)).unwrap();
        f.write_all(&newest).unwrap();
        f.flush().unwrap();
        let first = jsonl(&[meta(&env, id)]).len();
        assert_eq!(fs::metadata(&path).unwrap().len() as usize, first + target);
    };
    write("exact", 0);
    write("over", 1);
    let mut c = Client::start(&env, &BASE);
    let mut shown = |id: &str| {
        let r = result(&open_large(&mut c, id)).clone();
        let rev = r["revision"].as_str().unwrap().to_owned();
        let (e, _, complete) = c.page_all_complete(id, &rev);
        let texts: Vec<String> = e
            .iter()
            .map(|x| x["text"].as_str().unwrap().to_owned())
            .collect();
        (texts, complete)
    };
    let (t, complete) = shown("exact");
    assert!(complete, "{t:?}");
    assert_eq!(t, ["the oldest turn", "the newest turn"]);
    let (t, complete) = shown("over");
    assert!(!complete);
    assert_eq!(t, ["earlier history is not shown", "the newest turn"]);
    c.s.shutdown_ok("bye");
}

/// How long the open of a history at a bound may take: reading and projecting up to 64 MiB
/// is seconds of CPU in a debug build (this whole test: about 4 s on a quiet machine, 40 s
/// under a load of 12 on 2 cores), so it gets twice a frame's usual [`STEP`].
const LARGE_OPEN: Duration = Duration::from_secs(STEP.as_secs() * 2);

/// `session.open` of `id`, whose history is at or past a bound: its response frame.
#[track_caller]
fn open_large(c: &mut Client, id: &str) -> Value {
    let rid = c.send("session.open", &json!({ "session_id": id }));
    let f = c.s.next_within(LARGE_OPEN);
    assert_eq!(f["id"], rid.as_str(), "{f}");
    f
}
