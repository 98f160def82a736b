//! The window state: extension equals a fresh read of the same bytes at any split and any
//! crash point; the projection window at its part edges; replay from the window.

use super::*;
use crate::history::projection::EARLIER_NOT_SHOWN;
use crate::history::{read_state, read_within, Bounds};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::sync::Arc;

const TS: &str = "2026-11-30T12:00:00Z";

fn id() -> SessionId {
    SessionId::new("s1").unwrap()
}

fn rec(v: &Value) -> Vec<u8> {
    let mut b = serde_json::to_vec(v).unwrap();
    b.push(b'\n');
    b
}

fn meta() -> Value {
    json!({"type":"session_meta","session_id":"s1","ts":TS,"cwd":"/w"})
}

fn input(run: &str, text: &str) -> Value {
    json!({"type":"user_input","session_id":"s1","ts":TS,"run_id":run,"text":text})
}

fn reply(run: &str, text: &str) -> Value {
    json!({"type":"assistant_message","session_id":"s1","ts":TS,"run_id":run,"message_id":format!("a-{run}"),"text":text})
}

fn activity(run: &str, id: &str, state: &str) -> Value {
    json!({"type":"activity","session_id":"s1","ts":TS,"run_id":run,"activity_id":id,"kind":"tool","state":state,"name":"read_file"})
}

fn call(run: &str, id: &str) -> Value {
    json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":run,"call_id":id,"name":"read_file","input":{"path":"a"}})
}

fn result(run: &str, id: &str, out: &str) -> Value {
    json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":run,"call_id":id,"output":out,"is_error":false})
}

fn finished(run: &str) -> Value {
    json!({"type":"run_finished","session_id":"s1","ts":TS,"run_id":run,"outcome":"completed"})
}

fn compaction(summary: &str, through: u64) -> Value {
    json!({"type":"compaction","session_id":"s1","ts":TS,"summary":summary,"through":through})
}

fn bytes(v: &[Value]) -> Vec<u8> {
    v.iter().flat_map(rec).collect()
}

fn kinds(p: &Projection) -> Vec<String> {
    p.entries
        .iter()
        .map(|e| {
            serde_json::from_str::<Value>(e).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn first(p: &Projection) -> Value {
    serde_json::from_str(&p.entries[0]).unwrap()
}

/// A history of `turns` turns whose projections are one `user` entry and `acts` activities.
fn turns_of(turns: usize, acts: usize) -> Vec<Value> {
    let mut v = vec![meta()];
    for t in 0..turns {
        let run = format!("r{t}");
        v.push(input(&run, "go"));
        for a in 0..acts {
            v.push(activity(&run, &format!("t{t}-{a}"), "completed"));
        }
        v.push(finished(&run));
    }
    v
}

#[test]
fn exactly_the_part_bound_is_shown_whole_and_one_part_more_is_a_window() {
    // 100 turns of 100 parts: 10,000 parts, all shown, complete.
    let v = turns_of(100, 99);
    let (_, p) = read_state(&bytes(&v), &id()).unwrap();
    assert_eq!(p.entries.len(), SNAPSHOT_PARTS);
    assert!(p.complete);
    assert_eq!(first(&p)["kind"], "user");
    // One part more: the leading diagnostic, then the newest turns that fit (the oldest
    // turn is left out whole).
    let mut v = v;
    let at = v.len() - 1;
    v.insert(at, activity("r99", "extra", "completed"));
    let (_, p) = read_state(&bytes(&v), &id()).unwrap();
    assert!(!p.complete);
    let d = first(&p);
    assert_eq!(
        (
            d["kind"].as_str(),
            d["text"].as_str(),
            d["partial"].as_bool()
        ),
        (Some("diagnostic"), Some(EARLIER_NOT_SHOWN), Some(false))
    );
    assert_eq!(p.entries.len(), 1 + 99 * 100 + 1);
    assert_eq!(kinds(&p)[1], "user");
}

#[test]
fn a_single_turn_over_the_budget_shows_its_newest_parts() {
    let v = turns_of(1, SNAPSHOT_PARTS);
    let (_, p) = read_state(&bytes(&v), &id()).unwrap();
    assert!(!p.complete);
    assert_eq!(p.entries.len(), SNAPSHOT_PARTS);
    assert_eq!(first(&p)["text"], EARLIER_NOT_SHOWN);
    // The newest parts: the last activity is last, the input is not shown.
    let last: Value = serde_json::from_str(p.entries.last().unwrap()).unwrap();
    assert_eq!(
        last["text"], "read_file: completed",
        "the newest activity is shown"
    );
    assert!(!kinds(&p).contains(&"user".to_owned()));
}

#[test]
fn the_byte_bound_holds_at_its_edge() {
    // Turns of raw parts: exactly 8 MiB with one LF per part fits whole.
    let part = |n: usize| -> Arc<str> { Arc::from("x".repeat(n - 1)) };
    let per = SNAPSHOT_BYTES / 4;
    let turn = |n: usize| TurnParts {
        parts: vec![part(n)],
        bytes: n,
    };
    let exact = [turn(per), turn(per), turn(per), turn(per)];
    let p = projection::window(&exact, false, false);
    assert_eq!(p.bytes(), SNAPSHOT_BYTES);
    assert!(p.complete);
    let over = [turn(per + 1), turn(per), turn(per), turn(per)];
    let p = projection::window(&over, false, false);
    assert!(p.bytes() <= SNAPSHOT_BYTES);
    assert!(!p.complete);
    assert_eq!(
        p.entries.len(),
        4,
        "the diagnostic and the newest three turns"
    );
}

#[test]
fn a_compaction_does_not_cut_what_is_shown() {
    let mut v = turns_of(3, 2);
    v.insert(8, compaction("sum", 5));
    let (h, p) = read_state(&bytes(&v), &id()).unwrap();
    assert!(p.complete);
    assert_eq!(kinds(&p).iter().filter(|k| *k == "user").count(), 3);
    assert_eq!(h.snapshot().unwrap().summary.as_deref(), Some("sum"));
}

/// Replay: a window that does not reach the start and holds no compaction starts at its first
/// whole turn after the fixed note; one that holds a compaction starts from it.
#[test]
fn replay_starts_from_the_window() {
    let mut v = vec![meta()];
    for t in 0..10 {
        let run = format!("r{t}");
        v.extend([
            input(&run, &format!("q{t}")),
            call(&run, &format!("c{t}")),
            result(&run, &format!("c{t}"), &"o".repeat(200)),
            reply(&run, &format!("a{t}")),
            finished(&run),
        ]);
    }
    let b = bytes(&v);
    let small = Bounds {
        bytes: 1600,
        lines: 1000,
    };
    let (h, p) = read_within(&b, &id(), small).unwrap();
    let s = h.snapshot().unwrap();
    assert_eq!(s.summary.as_deref(), Some(LEFT_OUT_NOTE));
    assert_eq!(s.inputs_before, 0);
    assert!(matches!(&s.after[0], Item::User { text } if text.starts_with('q')));
    assert!(!p.complete);
    assert_eq!(first(&p)["text"], EARLIER_NOT_SHOWN);
    // The whole file: no note.
    let (h, _) = read_state(&b, &id()).unwrap();
    let s = h.snapshot().unwrap();
    assert_eq!(s.summary, None);
    assert_eq!(s.inputs.len(), 10);
    // A compaction in the window (its `through` naming its turn's input, as written).
    let mut c = v.clone();
    let at = c.len() - 2;
    c.insert(at, compaction("so far", 46));
    let (whole, _) = read_state(&bytes(&c), &id()).unwrap();
    let (part, _) = read_within(&bytes(&c), &id(), small).unwrap();
    let (sw, sp) = (whole.snapshot().unwrap(), part.snapshot().unwrap());
    assert_eq!(sp.summary.as_deref(), Some("so far"));
    assert_eq!(sw.mid, sp.mid, "the compacted turn, found from the window");
    assert_eq!(sw.after, sp.after);
    assert_eq!(
        whole.records(),
        part.records(),
        "the base calibrated from `through`"
    );
    assert!(matches!(&sp.mid[0], Item::User { text } if text == "q9"));
}

#[test]
fn a_window_that_dropped_its_compaction_asks_to_be_read_again() {
    let small = Bounds {
        bytes: 2000,
        lines: 1000,
    };
    let mut h = History::new(&id(), true);
    h.set_bounds(small);
    let mut all = vec![meta()];
    for t in 0..40 {
        let run = format!("r{t}");
        let mut recs = vec![input(&run, &format!("q{t}")), reply(&run, "ok")];
        if t == 3 {
            recs.push(compaction("early", 1 + 3 * 3));
        }
        recs.push(finished(&run));
        all.extend(recs);
    }
    let b = bytes(&all);
    for v in &all {
        h.line(&rec(v)[..rec(v).len() - 1]).unwrap();
    }
    assert_eq!(h.snapshot().unwrap_err(), HistoryError::Evicted);
    // The same bytes read afresh keep what they need.
    let (fresh, p) = read_within(&b, &id(), small).unwrap();
    assert_eq!(h.project().unwrap(), p);
    let s = fresh.snapshot().unwrap();
    assert_eq!(s.summary.as_deref(), Some(LEFT_OUT_NOTE));
}

/// One record of a generated history.
fn arb_turn() -> impl Strategy<Value = (usize, usize, bool, bool, usize)> {
    // (activities, result bytes, finished, compaction, reply bytes)
    (
        0usize..4,
        0usize..400,
        proptest::bool::weighted(0.8),
        proptest::bool::weighted(0.15),
        0usize..300,
    )
}

fn history_of(turns: &[(usize, usize, bool, bool, usize)]) -> Vec<Value> {
    let mut v = vec![meta()];
    for (t, (acts, res, fin, comp, rep)) in turns.iter().enumerate() {
        let run = format!("r{t}");
        let base = v.len() as u64;
        v.push(input(&run, &format!("q{t}")));
        for a in 0..*acts {
            let c = format!("c{t}-{a}");
            v.push(activity(&run, &c, "started"));
            v.push(call(&run, &c));
            v.push(result(&run, &c, &"r".repeat(*res)));
            v.push(activity(&run, &c, "completed"));
        }
        if *comp {
            v.push(compaction(&format!("s{t}"), base));
        }
        v.push(reply(&run, &"é".repeat(*rep)));
        if *fin {
            v.push(finished(&run));
        }
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Appending records one by one (any split of appends) and cutting the file anywhere (any
    /// crash point) give the projection a fresh read of the same bytes gives.
    #[test]
    fn extension_equals_a_fresh_read(turns in proptest::collection::vec(arb_turn(), 1..14), cut in 0usize..10_000, bound in 600u64..4000, lines in 5usize..60) {
        let v = history_of(&turns);
        let b = bytes(&v);
        let bounds = Bounds { bytes: bound, lines };
        let mut h = History::new(&id(), true);
        h.set_bounds(bounds);
        let cut = cut % (b.len() + 1);
        let mut off = 0usize;
        for r in &v {
            let line = rec(r);
            if off + line.len() > cut {
                break;
            }
            if h.line(&line[..line.len() - 1]).is_err() {
                // Only a record larger than the window refuses; a fresh read of it refuses too.
                prop_assert!(read_within(&b[..off + line.len()], &id(), bounds).is_err());
                return Ok(());
            }
            off += line.len();
            let fresh = read_within(&b[..off], &id(), bounds).unwrap().1;
            prop_assert_eq!(h.project().unwrap(), fresh);
        }
        h.finish_read(off < cut);
        match read_within(&b[..cut], &id(), bounds) {
            Ok((_, fresh)) => prop_assert_eq!(h.project().unwrap(), fresh),
            Err(e) => prop_assert_eq!(e, HistoryError::TooLarge),
        }
    }
}

/// The metadata an owner whose state read `covered` (a whole history's bytes so far, under
/// `bounds`) writes for it.
fn owner_meta(covered: &[u8], bounds: Bounds) -> Meta {
    let (owner, _) = read_within(covered, &id(), bounds).unwrap();
    let len = covered.len() as u64;
    let from = usize::try_from(crate::history::meta::digest_from(len)).unwrap();
    Meta::of(
        "s1",
        (1, 2),
        (len, &covered[from..]),
        (owner.records(), owner.horizon(), owner.window_start()),
        owner.summary(),
    )
}

/// What lies before a window comes from verified metadata: the record base, the turn count,
/// the latest title and preferences, whatever the window holds.
#[test]
fn metadata_tells_what_lies_before_the_window() {
    use crate::history::read_seeded;
    let prefs = json!({"type":"session_preferences","session_id":"s1","ts":TS,"provider":"scripted","model":"echo","effort":"high"});
    let title = json!({"type":"title","session_id":"s1","ts":TS,"title":"early"});
    let mut v = vec![meta(), prefs, title];
    for t in 0..20 {
        let run = format!("r{t}");
        v.extend([
            input(&run, "q"),
            reply(&run, &"a".repeat(100)),
            finished(&run),
        ]);
    }
    let m = owner_meta(&bytes(&v), Bounds::READ);
    let m_bytes = m.to_bytes().unwrap();
    for t in 20..30 {
        let run = format!("r{t}");
        v.extend([
            input(&run, "q"),
            reply(&run, &"a".repeat(100)),
            finished(&run),
        ]);
    }
    let all = bytes(&v);
    let small = Bounds {
        bytes: 8000,
        lines: 1000,
    };
    assert!(all.len() > 12_000);
    let (whole, _) = read_state(&all, &id()).unwrap();
    let (bare, _) = read_within(&all, &id(), small).unwrap();
    assert_eq!(bare.summary().title, None, "outside the window");
    assert_eq!(bare.summary().preferences, None);
    let (seeded, p) = read_seeded(&all, &id(), small, Some(m)).unwrap();
    assert_eq!(seeded.summary().title.as_deref(), Some("early"));
    assert_eq!(
        seeded.summary().preferences.as_ref().unwrap().effort,
        "high"
    );
    assert_eq!(seeded.summary().turns, 30);
    assert_eq!(seeded.records(), whole.records());
    assert_eq!(p, bare.project().unwrap(), "the projection is the window's");
    // A window that starts past the cover takes only what it lacks.
    let tiny = Bounds {
        bytes: 2000,
        lines: 1000,
    };
    let m = Meta::parse(&m_bytes, "s1").unwrap();
    let (gap, _) = read_seeded(&all, &id(), tiny, Some(m)).unwrap();
    assert_eq!(gap.summary().title.as_deref(), Some("early"));
    assert!(gap.summary().turns < 30, "turns in the gap are not known");
}

/// Lines the owner's metadata covers are only counted when nothing needs them parsed; the
/// state is the one a full read of the same window builds.
#[test]
fn lines_the_metadata_covers_read_as_a_full_read_does() {
    use crate::history::read_seeded;
    let write = |run: &str, c: &str| {
        vec![
            json!({"type":"tool_call","session_id":"s1","ts":TS,"run_id":run,"call_id":c,"name":"write_file","input":{"path":format!("/w/{c}")}}),
            json!({"type":"tool_result","session_id":"s1","ts":TS,"run_id":run,"call_id":c,"output":"ok","is_error":false}),
        ]
    };
    let mut v = vec![meta()];
    for t in 0..60 {
        let run = format!("r{t}");
        let at = v.len() as u64;
        v.push(input(&run, &format!("q{t}")));
        for k in 0..3 {
            let c = format!("c{t}-{k}");
            v.push(activity(&run, &c, "started"));
            v.push(call(&run, &c));
            v.push(result(&run, &c, &"o".repeat(300)));
            v.push(activity(&run, &c, "completed"));
        }
        v.extend(write(&run, &format!("w{t}")));
        v.push(json!({"type":"provider_item","session_id":"s1","ts":TS,"run_id":run,"provider":"p","item":{"x":t}}));
        v.push(json!({"type":"usage","session_id":"s1","ts":TS,"run_id":run,"input_tokens":100 + t,"output_tokens":1}));
        if t % 20 == 7 {
            v.push(compaction(&format!("s{t}"), at));
        }
        v.push(reply(&run, "done"));
        v.push(finished(&run));
        if t == 45 {
            // The owner's metadata covers everything up to here.
            v.push(json!({"type":"title","session_id":"s1","ts":TS,"title":"cover"}));
        }
    }
    let all = bytes(&v);
    let cover_at = v.iter().position(|r| r["type"] == "title").unwrap();
    let bounds = Bounds {
        bytes: all.len() as u64 * 2 / 3,
        lines: 100_000,
    };
    let m = owner_meta(&bytes(&v[..=cover_at]), bounds);
    assert!(m.replay_from > 0, "a compaction freed earlier turns");
    let (bare, bp) = read_within(&all, &id(), bounds).unwrap();
    let (seeded, sp) = read_seeded(&all, &id(), bounds, Some(m)).unwrap();
    assert_eq!(bp, sp);
    let (a, b) = (bare.snapshot().unwrap(), seeded.snapshot().unwrap());
    assert_eq!(a.summary, b.summary);
    assert_eq!(a.files, b.files);
    assert_eq!(a.inputs, b.inputs);
    assert_eq!(
        (a.inputs_before, &a.mid, &a.after),
        (b.inputs_before, &b.mid, &b.after)
    );
    assert_eq!(
        (a.last_input_tokens, a.bytes_since_usage),
        (b.last_input_tokens, b.bytes_since_usage)
    );
    assert_eq!(seeded.summary().title.as_deref(), Some("cover"));
}
