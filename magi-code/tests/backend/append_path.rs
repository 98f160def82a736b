//! The durable append path (used by turns and selection) seen from another child: what one
//! child appends, a new child opens and pages, and leases keep them apart meanwhile.

// Every path into the library, in one place: the `src` restructure moves these modules.
use crate::runtime;
use magi_code::{
    client::pipe::{serve_command, Frames, Server},
    history::{Body, Record, RunOutcome},
    session::{self as sessions, SessionState},
    util::cancel::Cancel,
};
use protocol_core::ErrorCode;
use serde_json::{json, Value};
use std::path::Path;
use std::process::Stdio;

/// One child with a line client.
struct Child {
    server: Server,
    frames: Frames<std::process::ChildStdout>,
    n: usize,
}

impl Child {
    fn start(home: &Path, cwd: &Path) -> Self {
        let mut cmd = serve_command(Path::new(env!("CARGO_BIN_EXE_magi-code")));
        cmd.env("MC_HOME", home)
            .current_dir(cwd)
            .stderr(Stdio::null());
        let mut server = Server::spawn(cmd).unwrap();
        let frames = server.frames().unwrap();
        let mut c = Self {
            server,
            frames,
            n: 0,
        };
        c.call("initialize", json!({"required_capabilities": []}));
        c
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.n += 1;
        let id = format!("r{}", self.n);
        self.server.send(&id, method, &params).unwrap();
        loop {
            let v = self.frames.next_frame().expect("child closed").unwrap();
            if v["id"] == id.as_str() {
                return v;
            }
        }
    }

    fn close(mut self) {
        assert_eq!(self.server.wait(), 0);
    }
}

fn records(id: &str) -> Vec<Record> {
    let r = |body| Record {
        session_id: id.to_owned(),
        ts: "2026-11-30T12:00:00Z".to_owned(),
        cwd: None,
        body,
    };
    vec![
        r(Body::UserInput {
            run_id: "r1".into(),
            message_id: Some("u1".into()),
            text: "hello".into(),
        }),
        r(Body::AssistantMessage {
            run_id: "r1".into(),
            message_id: "a1".into(),
            text: Some("world".into()),
            partial: false,
        }),
        r(Body::RunFinished {
            run_id: "r1".into(),
            outcome: RunOutcome::Completed,
            error_code: None,
        }),
    ]
}

#[test]
fn appended_history_is_reopened_by_a_new_child() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let rt = runtime(home.path(), cwd.path());
    let mut st = SessionState::default();
    sessions::create(&rt, &mut st).unwrap();
    let a = st.attachment.as_mut().unwrap();
    let id = a.id.as_str().to_owned();
    let file = home.path().join("sessions").join(format!("{id}.jsonl"));
    assert!(!file.exists(), "a lazy handle writes nothing");
    sessions::append(&rt, a, &records(&id)).unwrap();
    assert!(a.durable);
    let text = std::fs::read_to_string(&file).unwrap();
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "session_meta");
    assert_eq!(first["cwd"], rt.cwd.to_string_lossy().as_ref());
    assert_eq!(text.lines().count(), 4);

    // While this attachment holds the writer lease, another child cannot open it.
    let mut other = Child::start(home.path(), cwd.path());
    assert_eq!(
        other.call("session.open", json!({"session_id": id}))["error"],
        json!({"code":"session_busy"})
    );
    assert_eq!(
        other.call("session.list", json!({}))["result"]["sessions"][0]["eligibility"],
        "busy"
    );
    other.close();

    // The revision after our own append is refreshed.
    let old = a.snapshot.revision.clone();
    let new = sessions::refresh(&rt, a, &Cancel::default()).unwrap();
    assert_ne!(old, new);

    // Detaching releases the lease; a new child opens and pages the same history.
    drop(st);
    let mut c = Child::start(home.path(), cwd.path());
    let open = c.call("session.open", json!({"session_id": id}));
    assert_eq!(open["result"]["durable"], true);
    assert_eq!(open["result"]["notices"], json!([]));
    let rev = open["result"]["revision"].as_str().unwrap().to_owned();
    assert_eq!(
        c.call("status", json!({}))["result"]["session_id"],
        id.as_str()
    );
    let page = c.call(
        "history.page",
        json!({"session_id": id, "revision": rev, "cursor": null}),
    );
    let entries = page["result"]["entries"].as_array().unwrap();
    let got: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["kind"].as_str().unwrap(), e["text"].as_str().unwrap()))
        .collect();
    assert_eq!(got, [("user", "hello"), ("assistant", "world")]);
    assert_eq!(page["result"]["complete"], true);
    c.close();
}

#[test]
fn a_failed_first_append_claims_nothing_durable() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let rt = runtime(home.path(), cwd.path());
    let mut st = SessionState::default();
    sessions::create(&rt, &mut st).unwrap();
    let a = st.attachment.as_mut().unwrap();
    let id = a.id.as_str().to_owned();
    // The history path is taken by a folder: creation fails even for root.
    std::fs::create_dir(home.path().join("sessions").join(format!("{id}.jsonl"))).unwrap();
    assert_eq!(
        sessions::append(&rt, a, &records(&id)),
        Err(ErrorCode::PersistenceFailed)
    );
    assert!(!a.durable);
    assert!(a.writer.is_none());
    // A symlinked sessions folder is refused for writing.
    let home2 = tempfile::tempdir().unwrap();
    let rt2 = runtime(home2.path(), cwd.path());
    let mut st2 = SessionState::default();
    sessions::create(&rt2, &mut st2).unwrap();
    std::fs::remove_dir(home2.path().join("sessions")).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(elsewhere.path(), home2.path().join("sessions")).unwrap();
    let a2 = st2.attachment.as_mut().unwrap();
    let id2 = a2.id.as_str().to_owned();
    assert_eq!(
        sessions::append(&rt2, a2, &records(&id2)),
        Err(ErrorCode::PersistenceFailed)
    );
    assert!(!a2.durable);
    assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_append_outcome_is_dropped_in_src() {
    // A dropped append outcome lets a run claim `durable` over records it never stored.
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    let mut dropped = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (at, _) in text.match_indices("let _ =") {
            let statement = text[at..].split(';').next().unwrap_or_default();
            if statement.contains("append") {
                dropped.push(format!("{}: {statement}", f.display()));
            }
        }
    }
    assert!(files.len() > 50, "the sources were found");
    assert_eq!(dropped, Vec::<String>::new());
}
