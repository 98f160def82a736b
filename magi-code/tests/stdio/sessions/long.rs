//! Sessions of any length over real pipes (`decisions.md` 49–51): a large history is listed
//! through its owner's derived metadata, which is used only while it still describes the file
//! (garbage, torn, stale and foreign metadata is ignored), and kill -9 at any moment leaves
//! every session listable and openable.

use super::*;

/// A history of `id` over the per-session listing bound (8 MiB): its first records carry the
/// title `from the start`, then long filler turns; nothing in its newest 1 MiB names a title.
fn padded(env: &Env, id: &str) -> PathBuf {
    let mut v = vec![
        meta(env, id),
        rec("title", id, &json!({ "title": "from the start" })),
    ];
    // Tool results: stored for replay, never projected, so reading them is cheap.
    let out = "f".repeat(1 << 20);
    for i in 0..9 {
        let r = format!("pad{i}");
        v.push(rec(
            "user_input",
            id,
            &json!({ "run_id": r, "text": "pad" }),
        ));
        v.push(rec(
            "tool_call",
            id,
            &json!({ "run_id": r, "call_id": r, "name": "read_file", "input": {} }),
        ));
        v.push(rec(
            "tool_result",
            id,
            &json!({ "run_id": r, "call_id": r, "output": out, "is_error": false }),
        ));
        v.push(rec(
            "run_finished",
            id,
            &json!({ "run_id": r, "outcome": "completed" }),
        ));
    }
    let p = write_history(env, id, &v);
    assert!(fs::metadata(&p).unwrap().len() > 8 << 20);
    p
}

/// Appends one scripted turn as the session's owner (which writes its metadata), then exits.
fn own_turn(env: &Env, id: &str) {
    let mut s = start(env, &[]);
    result(&s.call("o", "session.open", &json!({ "session_id": id })));
    start_turn(&mut s, id, "one more");
    let (fin, _) = until_match(&mut s, is_event("run.finished"));
    assert_eq!(fin["data"]["outcome"], "completed", "{fin}");
    s.shutdown_ok("bye");
}

/// The title `session.list` shows for `id`.
fn listed_title(env: &Env, id: &str) -> Value {
    let mut s = start(env, &[]);
    let l = result(&s.call("l", "session.list", &json!({}))).clone();
    assert_eq!(l["notices"], json!([]), "{l}");
    let t = by_id(l["sessions"].as_array().unwrap())[id]["title"].clone();
    s.shutdown_ok("bye");
    t
}

#[test]
fn a_large_history_is_listed_through_metadata_that_still_describes_it() {
    let env = Env::new();
    let path = padded(&env, "big");
    tiny(&env, "other");
    assert_eq!(listed_title(&env, "big"), Value::Null, "no metadata yet");
    own_turn(&env, "big");
    own_turn(&env, "other");
    let dir = sessions_dir(&env);
    let meta = dir.join("big.meta.json");
    let good = fs::read(&meta).unwrap();
    assert_eq!(listed_title(&env, "big"), "from the start");
    // Garbage, torn, another session's: ignored.
    for bad in [
        b"not json at all".to_vec(),
        good[..good.len() / 2].to_vec(),
        fs::read(dir.join("other.meta.json")).unwrap(),
    ] {
        fs::write(&meta, &bad).unwrap();
        assert_eq!(listed_title(&env, "big"), Value::Null);
    }
    // A window start edited off a line start is not followed: the open finds the window.
    let mut edited: Value = serde_json::from_slice(&good).unwrap();
    edited["window_start"] = json!(5);
    fs::write(&meta, edited.to_string()).unwrap();
    let mut s = start(&env, &[]);
    let r = result(&s.call("o", "session.open", &json!({ "session_id": "big" }))).clone();
    let rev = r["revision"].as_str().unwrap().to_owned();
    let p = s.call(
        "p",
        "history.page",
        &json!({ "session_id": "big", "revision": rev }),
    );
    assert!(!result(&p)["entries"].as_array().unwrap().is_empty());
    s.shutdown_ok("bye");
    // Stale: a byte it covers changed in place (same file, same length).
    fs::write(&meta, &good).unwrap();
    assert_eq!(listed_title(&env, "big"), "from the start");
    let mut bytes = fs::read(&path).unwrap();
    let covered = serde_json::from_slice::<Value>(&good).unwrap()["covered"]
        .as_u64()
        .unwrap() as usize;
    let at = bytes[..covered]
        .windows(9)
        .rposition(|w| w == b"one more\"")
        .unwrap();
    bytes[at] = b'O';
    let mut f = fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all(&bytes).unwrap();
    drop(f);
    assert_eq!(
        listed_title(&env, "big"),
        Value::Null,
        "the digest no longer matches"
    );
    // Another file under the same name (a copy: another inode): ignored.
    bytes[at] = b'o';
    fs::write(dir.join("copy.tmp"), &bytes).unwrap();
    fs::rename(dir.join("copy.tmp"), &path).unwrap();
    assert_eq!(listed_title(&env, "big"), Value::Null);
    // Records appended after the metadata are read with it: the owner writes anew.
    own_turn(&env, "big");
    let mut s = start(&env, &[]);
    result(&s.call("o", "session.open", &json!({ "session_id": "big" })));
    s.shutdown_ok("bye");
    append_line(
        &path,
        &rec("title", "big", &json!({ "title": "appended later" })),
    );
    assert_eq!(listed_title(&env, "big"), "appended later");
}

/// The temp files of metadata writes in `dir`.
fn meta_temps(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.contains(".meta.json.magi-") && n.ends_with(".tmp"))
        .collect()
}

/// A fresh child lists both sessions (none omitted), opens each and pages it to its end.
fn check_all(env: &Env, i: u64) {
    let mut s = start(env, &[]);
    let l = result(&s.call("l", "session.list", &json!({}))).clone();
    assert_eq!(l["notices"], json!([]), "iteration {i}: {l}");
    assert_eq!(ids_of(l["sessions"].as_array().unwrap()), ["long", "short"]);
    for id in ["long", "short"] {
        let r = result(&s.call(
            &format!("o{id}"),
            "session.open",
            &json!({ "session_id": id }),
        ))
        .clone();
        assert_eq!(r["durable"], true, "iteration {i}: {r}");
        let rev = r["revision"].as_str().unwrap().to_owned();
        let mut cursor = Value::Null;
        for n in 0.. {
            let p = s.call(
                &format!("p{id}{n}"),
                "history.page",
                &json!({ "session_id": id, "revision": rev, "cursor": cursor }),
            );
            cursor = result(&p)["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
    }
    s.shutdown_ok("bye");
}

/// `decisions.md` 51: kill -9 anywhere in appends and metadata writes; after each, a fresh
/// child lists every session (none omitted) and opens it, and a leftover temp file is swept
/// by the owner's next metadata write once older than 10 s.
#[test]
fn kill_9_at_any_moment_leaves_every_session_listable_and_openable() {
    let env = Env::new();
    fs::write(env.cwd.join("a.txt"), "x".repeat(20_000)).unwrap();
    let reads: Vec<Value> = (0..6)
        .map(|_| json!({"tool": {"name": "read_file", "input": {"path": "a.txt"}}}))
        .collect();
    let mut steps = reads.clone();
    steps.push(json!({"text": "done"}));
    write_script(
        &env,
        json!([{ "steps": steps }]),
        Some(json!({"read": "allow"})),
    );
    padded(&env, "long");
    tiny(&env, "short");
    for i in 0..40u64 {
        let id = if i % 2 == 0 { "long" } else { "short" };
        let mut s = start(&env, &[]);
        result(&s.call("o", "session.open", &json!({ "session_id": id })));
        start_turn(&mut s, id, "read it");
        // Spread the kill over the turn by a varied number of its events (its six calls'
        // activities, deltas and appends): no pause, whatever the machine's load.
        for _ in 0..(i % 15) {
            s.next();
        }
        s.crash();
        check_all(&env, i);
    }
    // Leftovers of killed metadata writes are swept by the owner's next write once stale.
    let dir = sessions_dir(&env);
    let planted = dir.join(format!(".long.meta.json.magi-{}.tmp", "7".repeat(32)));
    fs::write(&planted, "partial").unwrap();
    for t in meta_temps(&dir) {
        let f = fs::OpenOptions::new()
            .write(true)
            .open(dir.join(t))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(60))
            .unwrap();
    }
    own_turn(&env, "long");
    assert!(
        meta_temps(&dir).iter().all(|t| !t.starts_with(".long.")),
        "{:?}",
        meta_temps(&dir)
    );
    assert_eq!(listed_title(&env, "long"), "from the start");
}
