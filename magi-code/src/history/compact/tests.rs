use super::*;
use crate::history::record::RunOutcome;
use crate::history::Replay;
use serde_json::json;

#[test]
fn the_80_percent_trigger_at_its_edge() {
    assert!(
        !over_threshold(8_000, 10_000),
        "the largest estimate that does not trigger"
    );
    assert!(over_threshold(8_001, 10_000), "the first that does");
    assert!(!over_threshold(159_999, 200_000));
    assert!(over_threshold(160_001, 200_000));
    assert!(!over_threshold(0, 1_000));
    assert!(over_threshold(u64::MAX, 10_000_000));
}

fn u(t: &str) -> Item {
    Item::User { text: t.into() }
}

fn call(id: &str) -> Item {
    Item::ToolCall {
        call_id: id.into(),
        name: "read_file".into(),
        input: json!({"path": id}),
    }
}

fn res(id: &str, n: usize) -> Item {
    Item::ToolResult {
        call_id: id.into(),
        output: "o".repeat(n),
        is_error: false,
    }
}

fn total(items: &[Item], fixed: u64) -> u64 {
    fixed + items_bytes(items)
}

#[test]
fn recent_inputs_walk_newest_first_within_20_percent() {
    // Window 1,000 tokens: 800 bytes of inputs.
    let inputs: Vec<String> = ["a", "b", "c"].iter().map(|c| c.repeat(390)).collect();
    let items = build(
        &Pieces {
            summary: "S",
            files: &[],
            inputs: &inputs,
            mid: &[u("now")],
            after: &[],
            current: None,
        },
        1_000,
        0,
        Path::new("/w"),
    );
    let Item::User { text } = &items[0] else {
        panic!()
    };
    assert!(text.contains(&inputs[2]) && text.contains(&inputs[1]));
    assert!(
        !text.contains(&inputs[0]),
        "the third does not fit and ends the walk"
    );
    assert_eq!(
        items[1],
        Item::Assistant {
            text: CONTEXT_ACK.into()
        }
    );
    assert_eq!(items[2], u("now"));
    // 400 + 400 = 800 bytes fits exactly; one byte more does not.
    for (first, fits) in [(400, true), (401, false)] {
        let two: Vec<String> = vec!["x".repeat(first), "y".repeat(400)];
        let text = inputs_text(&two);
        assert_eq!(text.contains(&two[0]), fits, "{first} + 400 bytes");
        assert!(text.contains(&two[1]), "the newest always fits");
    }
}

/// The text of the first item `build` gives for `inputs` alone in a 1,000-token window.
fn inputs_text(inputs: &[String]) -> String {
    let items = build(
        &Pieces {
            summary: "S",
            files: &[],
            inputs,
            mid: &[],
            after: &[],
            current: None,
        },
        1_000,
        0,
        Path::new("/w"),
    );
    let Item::User { text } = &items[0] else {
        panic!("{items:?}")
    };
    text.clone()
}

#[test]
fn files_are_relative_to_the_cwd_once_each() {
    let files = vec![
        "/w/src/a.rs".to_owned(),
        "src/a.rs".to_owned(),
        "/elsewhere/b".to_owned(),
    ];
    let items = build(
        &Pieces {
            summary: "S",
            files: &files,
            inputs: &[],
            mid: &[],
            after: &[],
            current: None,
        },
        10_000,
        0,
        Path::new("/w"),
    );
    let Item::User { text } = &items[0] else {
        panic!()
    };
    assert_eq!(text.matches("- src/a.rs\n").count(), 1, "{text}");
    assert!(text.contains("- /elsewhere/b\n"));
}

#[test]
fn the_replay_is_cut_to_half_the_window() {
    // Window 1,000 tokens: 2,000 bytes in all. The turn's three steps of 550-byte results do
    // not fit with 500 fixed bytes: its oldest steps go, its input and newest step stay.
    let mid = vec![
        u("task"),
        call("c1"),
        res("c1", 550),
        call("c2"),
        res("c2", 550),
        call("c3"),
        res("c3", 550),
    ];
    let items = build(
        &Pieces {
            summary: "S",
            files: &[],
            inputs: &["old".into()],
            mid: &mid,
            after: &[],
            current: None,
        },
        1_000,
        500,
        Path::new("/w"),
    );
    assert!(total(&items, 500) <= 2_000, "{}", total(&items, 500));
    assert_eq!(
        &items[2..],
        &[
            u("task"),
            call("c2"),
            res("c2", 550),
            call("c3"),
            res("c3", 550)
        ]
    );
    let Item::User { text } = &items[0] else {
        panic!()
    };
    assert!(
        !text.contains("old"),
        "recent inputs go before the turn's steps"
    );
    // Past every step, the text is cut: still within the half.
    let huge = vec![u(&"t".repeat(5_000))];
    let items = build(
        &Pieces {
            summary: &"s".repeat(5_000),
            files: &[],
            inputs: &[],
            mid: &huge,
            after: &[],
            current: None,
        },
        1_000,
        500,
        Path::new("/w"),
    );
    assert!(total(&items, 500) <= 2_000, "{}", total(&items, 500));
    let (Item::User { text: ctx }, Item::User { text: input }) = (&items[0], &items[2]) else {
        panic!("{items:?}")
    };
    assert!(
        ctx.contains("sss\n[") && ctx.contains(" bytes left out]"),
        "{ctx}"
    );
    assert!(
        input.starts_with("ttt") && input.ends_with("ttt"),
        "{input}"
    );
    assert!(input.contains(" bytes left out]\n"), "{input}");
}

/// The replay of `summary` and a current input `now` beside `fixed` bytes in a 1,000-token
/// window (2,000 bytes for its half).
fn replay(summary: &str, files: &[String], now: &str, fixed: u64) -> Vec<Item> {
    build(
        &Pieces {
            summary,
            files,
            inputs: &[],
            mid: &[],
            after: &[Item::Assistant { text: "a".into() }],
            current: Some(now),
        },
        1_000,
        fixed,
        Path::new("/w"),
    )
}

fn texts(items: &[Item]) -> (&str, &str) {
    match (&items[0], items.last()) {
        (Item::User { text: c }, Some(Item::User { text: n })) => (c, n),
        _ => panic!("{items:?}"),
    }
}

#[test]
fn the_summary_is_cut_before_the_input_and_each_cut_says_how_many_bytes() {
    // The largest summary that fits whole, then one byte more: only the summary is cut.
    let cut_at = |n: usize| {
        let items = replay(&"s".repeat(n), &[], "now", 1_000);
        texts(&items).0.contains("left out")
    };
    let mut n = 0;
    while !cut_at(n + 1) {
        n += 1;
    }
    let whole = replay(&"s".repeat(n), &[], "now", 1_000);
    assert!(!texts(&whole).0.contains("left out"));
    assert_eq!(
        total(&whole, 1_000),
        2_000,
        "the largest summary kept whole fills the half"
    );
    let cut = replay(&"s".repeat(n + 1), &[], "now", 1_000);
    let (ctx, now) = texts(&cut);
    assert!(
        ctx.contains("\n[") && ctx.ends_with(" bytes left out]"),
        "{ctx}"
    );
    let kept = ctx
        .split("## Summary\n")
        .nth(1)
        .unwrap()
        .split('\n')
        .next()
        .unwrap()
        .len();
    assert!(
        ctx.ends_with(&format!("[{} bytes left out]", n + 1 - kept)),
        "{ctx}"
    );
    assert_eq!(now, "now", "the input is whole while the summary can give");
    assert!(total(&cut, 1_000) <= 2_000);
    // The list of files goes before the summary is cut.
    let files = vec!["/w/f.rs".to_owned()];
    let listed = replay(&"s".repeat(n), &files, "now", 1_000);
    let (ctx, _) = texts(&listed);
    assert!(!ctx.contains("f.rs") && !ctx.contains("left out"), "{ctx}");
}

#[test]
fn a_fixed_part_past_half_the_window_leaves_both_pieces_at_their_floor_never_empty() {
    let summary = "s".repeat(3_000);
    let now = format!("FIRST{}LAST", "m".repeat(3_000));
    let items = replay(&summary, &[], &now, 5_000);
    let (ctx, input) = texts(&items);
    assert_eq!(items.len(), 4, "{items:?}");
    let kept = ctx
        .split("## Summary\n")
        .nth(1)
        .unwrap()
        .split('\n')
        .next()
        .unwrap()
        .len();
    assert!(
        (SUMMARY_FLOOR - 40..=SUMMARY_FLOOR).contains(&kept),
        "{kept}"
    );
    assert!(
        (INPUT_FLOOR - 30..=INPUT_FLOOR).contains(&input.len()),
        "{}",
        input.len()
    );
    assert!(
        input.starts_with("FIRST") && input.ends_with("LAST"),
        "{input}"
    );
    // Pieces shorter than their floor stay whole.
    let items = replay("short", &[], "tiny", 1_000_000);
    let (ctx, input) = texts(&items);
    assert!(ctx.contains("## Summary\nshort"), "{ctx}");
    assert_eq!(input, "tiny");
}

fn rec(body: Body) -> Record {
    Record::now("s", body)
}

fn input(run: &str, text: &str) -> Record {
    rec(Body::UserInput {
        run_id: run.into(),
        message_id: None,
        text: text.into(),
    })
}

fn done(run: &str) -> Record {
    rec(Body::RunFinished {
        run_id: run.into(),
        outcome: RunOutcome::Completed,
        error_code: None,
    })
}

fn reply(run: &str, text: &str) -> Record {
    rec(Body::AssistantMessage {
        run_id: run.into(),
        message_id: format!("m-{text}"),
        text: Some(text.into()),
        partial: false,
    })
}

#[test]
fn a_replay_snapshot_after_a_mid_turn_compaction() {
    let mut r = Replay::default();
    let write = |id: &str, ok: bool| {
        [
            rec(Body::ToolCall {
                run_id: "r2".into(),
                call_id: id.into(),
                name: "write_file".into(),
                input: json!({"path": format!("{id}.txt")}),
            }),
            rec(Body::ToolResult {
                run_id: "r2".into(),
                call_id: id.into(),
                output: "ok".into(),
                is_error: !ok,
            }),
        ]
    };
    let mut all = vec![
        rec(Body::SessionMeta {}),
        input("r1", "one"),
        reply("r1", "a1"),
        done("r1"),
    ];
    all.push(input("r2", "two")); // record 4
    all.push(rec(Body::Usage {
        run_id: "r2".into(),
        input_tokens: 9_000,
        output_tokens: 1,
        cached_input_tokens: None,
        cache_creation_input_tokens: None,
    }));
    all.extend(write("w1", true));
    all.extend(write("w2", false));
    all.push(rec(Body::Compaction {
        summary: Some("S".into()),
        through: Some(4),
        title: None,
    }));
    all.push(reply("r2", "a2"));
    all.push(done("r2"));
    for x in &all {
        r.push(x, 10);
    }
    assert_eq!(r.records(), all.len() as u64);
    assert_eq!(
        r.last_input_tokens(),
        None,
        "the compaction reset the usage"
    );
    let s = r.snapshot();
    assert_eq!(s.summary.as_deref(), Some("S"));
    assert_eq!(s.files, ["w1.txt"], "a failed write is not a file written");
    assert_eq!(
        (s.inputs.as_slice(), s.inputs_before),
        (&["one".to_owned(), "two".to_owned()][..], 1)
    );
    assert_eq!(s.mid.len(), 5, "{:?}", s.mid);
    assert_eq!(s.mid[0], u("two"));
    assert_eq!(s.after, [Item::Assistant { text: "a2".into() }]);
    // Without a compaction: everything.
    let mut plain = Replay::default();
    for x in &all[..4] {
        plain.push(x, 10);
    }
    let s = plain.snapshot();
    assert_eq!((s.summary, s.inputs_before, s.after.len()), (None, 1, 2));
}

#[test]
fn the_files_an_applied_patch_added_or_updated_count_as_written() {
    let call = |id: &str, name: &str, input: serde_json::Value| Body::ToolCall {
        run_id: "r".into(),
        call_id: id.into(),
        name: name.into(),
        input,
    };
    let result = |id: &str, is_error: bool| Body::ToolResult {
        run_id: "r".into(),
        call_id: id.into(),
        output: String::new(),
        is_error,
    };
    let patch = "*** Begin Patch\n*** Add File: new.txt\n+x\n*** Update File: a.rs\n\
                 *** Move to: b.rs\n@@\n-x\n+y\n*** Delete File: gone.txt\n\
                 *** Update File: c.rs\n@@\n-x\n+y\n*** End Patch";
    let mut w = Written::default();
    w.note(&call("1", "apply_patch", json!({ "patch": patch })));
    assert!(w.waiting());
    w.note(&result("1", false));
    assert!(!w.waiting());
    assert_eq!(w.files, ["new.txt", "b.rs", "c.rs"]);
    // A failed patch wrote nothing.
    w.note(&call(
        "2",
        "apply_patch",
        json!({ "patch": "*** Begin Patch\n*** Add File: z\n+z\n*** End Patch" }),
    ));
    w.note(&result("2", true));
    assert_eq!(w.files, ["new.txt", "b.rs", "c.rs"]);
}
