//! Rewritten files over real pipes: `write_file` killed mid-write leaves the old content or
//! the new, and a later write sweeps the stale temp files a killed replacement left (only
//! ours, only stale: beside the edited file in a project folder, all of them in the cache).

use crate::common::{
    is_event, result, start, start_session, start_turn, until_match, write_script, Env,
};
use serde_json::json;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// Names in `dir` that look like our temp files.
fn temps(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .filter(|n| n.contains(".magi-") && n.ends_with(".tmp"))
        .collect();
    v.sort();
    v
}

/// Backdates `path` by a minute: the leftover of a write killed long ago (the sweep leaves
/// younger temp files alone, as a live writer may be about to lock one).
fn backdate(path: &Path) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(60))
        .unwrap();
}

#[test]
fn write_file_killed_at_any_point_leaves_the_old_or_the_new_content() {
    let env = Env::new();
    // Large enough that the write and its fsync take a while; within the script bound.
    let old = "o".repeat(700_000);
    let new = "n".repeat(900_000);
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "write_file", "input": {"path": "big.txt", "content": new}}}, {"text": "done"}]}]),
        Some(json!({"write": "allow"})),
    );
    let file = env.cwd.join("big.txt");
    let (mut olds, mut news) = (0, 0);
    for i in 0..60u64 {
        fs::write(&file, &old).unwrap();
        let (mut s, sid) = start_session(&env, &[]);
        start_turn(&mut s, &sid, "write it");
        if i % 4 != 0 {
            // Mostly while the tool runs: after its `activity` started, spread by a varied
            // number of yields (no clock): old-or-new must hold at any point of the write.
            let (started, _) = until_match(&mut s, is_event("activity"));
            assert_eq!(started["data"]["state"], "started");
            for _ in 0..(i * 211) % 4_000 {
                std::thread::yield_now();
            }
        }
        s.crash();
        let got = fs::read(&file).unwrap();
        if got == old.as_bytes() {
            olds += 1;
        } else if got == new.as_bytes() {
            news += 1;
        } else {
            panic!("iteration {i}: {} bytes, neither old nor new", got.len());
        }
    }
    eprintln!("write_file kills: {olds} old, {news} new");
    assert_eq!(olds + news, 60);
    // Whatever the kills left, a later write sweeps once stale, and leaves no temp of its own.
    eprintln!("leftovers {}", temps(&env.cwd).len());
    for t in temps(&env.cwd) {
        backdate(&env.cwd.join(t));
    }
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "write it");
    let (fin, _) = until_match(&mut s, is_event("run.finished"));
    assert_eq!(fin["data"]["outcome"], "completed");
    assert_eq!(fs::read(&file).unwrap(), new.as_bytes());
    assert_eq!(temps(&env.cwd), Vec::<String>::new());
}

#[test]
fn edit_file_sweeps_only_its_own_stale_temp_files() {
    let env = Env::new();
    write_script(
        &env,
        json!([{"steps": [{"tool": {"name": "edit_file", "input": {"path": "foo.rs", "old": "a", "new": "b"}}}, {"text": "done"}]}]),
        Some(json!({"write": "allow"})),
    );
    fs::write(env.cwd.join("foo.rs"), "a").unwrap();
    let hex = |c: &str| c.repeat(32);
    let stale_mine = format!(".foo.rs.magi-{}.tmp", hex("1"));
    let fresh_mine = format!(".foo.rs.magi-{}.tmp", hex("2"));
    let stale_other = format!(".bar.rs.magi-{}.tmp", hex("3"));
    let users = ".foo.rs.magi-notes.tmp".to_owned();
    for n in [&stale_mine, &fresh_mine, &stale_other, &users] {
        fs::write(env.cwd.join(n), "partial").unwrap();
    }
    for n in [&stale_mine, &stale_other, &users] {
        backdate(&env.cwd.join(n));
    }
    let (mut s, sid) = start_session(&env, &[]);
    start_turn(&mut s, &sid, "edit it");
    let (fin, _) = until_match(&mut s, is_event("run.finished"));
    assert_eq!(fin["data"]["outcome"], "completed");
    assert_eq!(fs::read_to_string(env.cwd.join("foo.rs")).unwrap(), "b");
    // Gone: the stale temp of foo.rs. Kept: one young enough to be a live writer's, another
    // file's, and a name that is not one of ours.
    let mut kept = vec![stale_other, fresh_mine, users];
    kept.sort();
    assert_eq!(temps(&env.cwd), kept);
}

#[test]
fn model_refresh_sweeps_stale_temp_files_from_the_cache() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut r = BufReader::new(stream.try_clone().unwrap());
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap() == 0 || h.trim().is_empty() {
                break;
            }
        }
        let body = json!({"object": "list", "data": [{"id": "m1"}]}).to_string();
        let mut w = stream;
        write!(w, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
        w.flush().unwrap();
    });
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {
        "catalog": {"enabled": ["local/m1"]},
        "local": {"kind": "openai-compatible", "base_url": format!("http://{addr}/v1")},
    }}));
    let cache = env.home().join("cache").join("models");
    fs::create_dir_all(&cache).unwrap();
    // Leftovers of killed refreshes, in the older unnamed form and the named one.
    let old_form = format!(".magi-{}.tmp", "a".repeat(32));
    let named = format!(".other.json.magi-{}.tmp", "b".repeat(32));
    let fresh = format!(".local.json.magi-{}.tmp", "c".repeat(32));
    for n in [&old_form, &named, &fresh] {
        fs::write(cache.join(n), "{").unwrap();
    }
    backdate(&cache.join(&old_form));
    backdate(&cache.join(&named));
    let mut s = start(&env, &["model.refresh"]);
    let r = s.call("r", "model.refresh", &json!({"provider": "local"}));
    assert_eq!(result(&r)["models"], 1);
    assert!(cache.join("local.json").is_file());
    assert_eq!(temps(&cache), [fresh]);
}
