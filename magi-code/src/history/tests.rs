//! Reading stored histories: validation, projection rules, extension.

use super::*;
use serde_json::{json, Value};

fn id() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn lines(v: &[Value]) -> Vec<u8> {
    let mut b = Vec::new();
    for r in v {
        b.extend(serde_json::to_vec(r).unwrap());
        b.push(b'\n');
    }
    b
}

const TS: &str = "2026-11-30T12:00:00Z";

#[test]
fn projection_rules() {
    let recs = lines(&[
        json!({"type":"session_meta","session_id":"s1","ts":TS,"cwd":"/w"}),
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","message_id":"u1","text":"hi"}),
        json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"he"}),
        json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","item_id":"i","text":"old","provider_summary":true}),
        json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","text":"hidden"}),
        json!({"type":"activity","session_id":"s1","ts":TS,"run_id":"r1","activity_id":"t1","kind":"tool","state":"started","name":"shell","summary":"ls"}),
        json!({"type":"activity","session_id":"s1","ts":TS,"run_id":"r1","activity_id":"t1","kind":"tool","state":"completed","name":"shell","summary":"ls"}),
        json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":"r1","item_id":"i","text":"new","provider_summary":true}),
        json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"llo"}),
        json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"hello"}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r1","outcome":"completed"}),
    ]);
    let (_, pr) = read_bytes(&recs, &id()).unwrap();
    let e: Vec<Value> = pr
        .entries
        .iter()
        .map(|x| serde_json::from_str(x).unwrap())
        .collect();
    let kinds: Vec<&str> = e.iter().map(|x| x["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        ["user", "assistant", "reasoning_summary", "activity"]
    );
    assert_eq!(e[1]["text"], "hello");
    assert_eq!(e[2]["text"], "new");
    assert_eq!(e[3]["partial"], false);
    assert!(pr.complete);
}

#[test]
fn interrupted_turns_are_partial() {
    let mut recs = lines(&[
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","text":"hi"}),
        json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"he"}),
    ]);
    recs.extend_from_slice(b"{\"type\":\"assistant_ch");
    let (sum, pr) = read_bytes(&recs, &id()).unwrap();
    assert!(sum.torn_tail);
    assert!(!pr.complete);
    let last: Value = serde_json::from_str(pr.entries.last().unwrap()).unwrap();
    assert_eq!(last["kind"], "diagnostic");
    assert_eq!(last["partial"], true);
    let a: Value = serde_json::from_str(&pr.entries[1]).unwrap();
    assert_eq!(
        (a["text"].as_str(), a["partial"].as_bool()),
        (Some("he"), Some(true))
    );
}

#[test]
fn malformed_histories() {
    let ok = json!({"type":"title","session_id":"s1","ts":TS,"title":"t"});
    assert!(read_bytes(&lines(std::slice::from_ref(&ok)), &id()).is_ok());
    for bad in [
        json!({"type":"title","session_id":"other","ts":TS,"title":"t"}),
        json!({"type":"diagnostic","session_id":"s1","ts":TS,"code":"x","summary":"y"}),
        json!({"type":"nope","session_id":"s1","ts":TS}),
        json!({"type":"title","session_id":"s1","ts":"yesterday","title":"t"}),
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r"}),
        json!([1]),
    ] {
        assert!(
            read_bytes(&lines(&[ok.clone(), bad.clone()]), &id()).is_err(),
            "{bad}"
        );
    }
    let mut blank = lines(std::slice::from_ref(&ok));
    blank.extend_from_slice(b"\n");
    blank.extend(lines(std::slice::from_ref(&ok)));
    assert_eq!(
        read_bytes(&blank, &id()).unwrap_err(),
        HistoryError::Invalid
    );
    assert!(read_bytes(b"not json\n", &id()).is_err());
    assert_eq!(read_bytes(b"", &id()).unwrap().0.records, 0);
}

fn entries(p: &Projection) -> Vec<Value> {
    p.entries
        .iter()
        .map(|x| serde_json::from_str(x).unwrap())
        .collect()
}

#[test]
fn failed_and_cancelled_runs_project_a_diagnostic() {
    let recs = lines(&[
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r1","text":"hi"}),
        json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r1","message_id":"a1","text":"par","partial":true}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r1","outcome":"failed","error_code":"execution_failed"}),
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r2","text":"again"}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r2","outcome":"cancelled"}),
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r3","text":"more"}),
        json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":"r3","call_id":"c","name":"n","input":{}}),
        json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":"r3","call_id":"c","output":"secret output","is_error":false}),
        json!({"type":"provider_item","session_id":"s1","ts":TS,"run_id":"r3","provider":"p","item":{"x":1}}),
        json!({"type":"usage","session_id":"s1","ts":TS,"run_id":"r3","input_tokens":5,"output_tokens":6}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r3","outcome":"failed","error_code":"sk-not-a-code"}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r3","outcome":"failed","error_code":"content_limit"}),
        json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":"r4","text":"ok"}),
        json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":"r4","message_id":"a4","text":"fine"}),
        json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":"r4","outcome":"completed"}),
    ]);
    let (_, pr) = read_bytes(&recs, &id()).unwrap();
    let got: Vec<(String, String, bool)> = entries(&pr)
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_owned(),
                e["text"].as_str().unwrap().to_owned(),
                e["partial"].as_bool().unwrap(),
            )
        })
        .collect();
    let want = [
        ("user", "hi", false),
        ("assistant", "par", true),
        ("diagnostic", "The turn failed: execution_failed.", false),
        ("user", "again", false),
        ("diagnostic", "The turn was cancelled.", false),
        ("user", "more", false),
        // Stored text that is not a known code is never echoed; a repeated
        // run_finished adds nothing.
        ("diagnostic", "The turn failed.", false),
        ("user", "ok", false),
        ("assistant", "fine", false),
    ];
    let want: Vec<(String, String, bool)> = want
        .iter()
        .map(|(k, t, p)| ((*k).to_owned(), (*t).to_owned(), *p))
        .collect();
    assert_eq!(got, want);
    assert!(pr.complete, "recorded failed/cancelled turns are complete");
}

/// Records of many kinds, in an order that changes earlier entries.
fn varied() -> Vec<Value> {
    let long = "é\"".repeat(9_000);
    let mut v = vec![json!({"type":"session_meta","session_id":"s1","ts":TS,"cwd":"/w"})];
    for n in 0..3 {
        let r = format!("r{n}");
        let outcome = ["completed", "failed", "cancelled"][n];
        v.extend([
            json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":r,"text":format!("q{n}")}),
            json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":"he"}),
            json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":r,"item_id":"i","text":long,"provider_summary":true}),
            json!({"type":"activity","session_id":"s1","ts":TS,"run_id":r,"activity_id":format!("t{n}"),"kind":"tool","state":"started","name":"shell"}),
            json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":r,"call_id":"c","name":"shell","input":"{raw"}),
            json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":r,"call_id":"c","output":"o","is_error":true}),
            json!({"type":"activity","session_id":"s1","ts":TS,"run_id":r,"activity_id":format!("t{n}"),"kind":"tool","state":"failed","name":"shell","summary":"ls"}),
            json!({"type":"reasoning_summary","session_id":"s1","ts":TS,"run_id":r,"item_id":"i","text":"short","provider_summary":true}),
            json!({"type":"assistant_chunk","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":long}),
            json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":r,"message_id":format!("a{n}"),"text":"hello","partial":n == 1}),
            json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":r,"outcome":outcome,"error_code":"execution_failed"}),
        ]);
    }
    v
}

#[test]
fn extending_equals_reading_afresh() {
    let all = varied();
    let mut h = History::new(&id(), true);
    let mut multi = false;
    for (n, v) in all.iter().enumerate() {
        let line = serde_json::to_vec(v).unwrap();
        let r = Record::parse(&line).unwrap();
        h.push(&r, line.len() + 1).unwrap();
        let p = h.project().unwrap();
        let (fresh, fp) = read_state(&lines(&all[..=n]), &id()).unwrap();
        assert_eq!(p, fp, "after record {n}");
        assert_eq!(h.summary().turns, fresh.summary().turns);
        multi |= entries(&p).iter().any(|e| e["part"] == 1);
    }
    let p = h.project().unwrap();
    assert!(p.complete);
    assert_eq!(h.summary().turns, 3);
    assert!(multi, "entries whose part count changed on the way");
    // A fresh read closes an open turn; the live state leaves it open, and both replay the
    // same closed turns.
    let (fresh, _) = read_state(&lines(&all), &id()).unwrap();
    assert_eq!(h.snapshot().unwrap().after, fresh.snapshot().unwrap().after);
}

#[test]
fn a_record_larger_than_the_window_is_refused_and_sticks() {
    let mut h = History::new(&id(), true);
    h.set_bounds(Bounds {
        bytes: 100,
        lines: 10,
    });
    let line =
        serde_json::to_vec(&json!({"type":"title","session_id":"s1","ts":TS,"title":"t"})).unwrap();
    let r = Record::parse(&line).unwrap();
    // The first record is not counted: any length goes.
    h.push(&r, 1_000).unwrap();
    h.push(&r, 100).unwrap();
    assert_eq!(h.push(&r, 101), Err(HistoryError::TooLarge));
    assert_eq!(h.error(), Some(HistoryError::TooLarge));
    assert_eq!(h.snapshot().unwrap_err(), HistoryError::TooLarge);
    assert_eq!(h.project(), Err(HistoryError::TooLarge));
    let other = Record::now("s2", Body::SessionMeta {});
    let mut h = History::new(&id(), true);
    assert_eq!(h.push(&other, 1), Err(HistoryError::Invalid));
}
