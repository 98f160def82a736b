use super::*;
use crate::wire::DiagnosticCode;

fn u(t: &str) -> Item {
    Item::User { text: t.into() }
}

fn a(t: &str) -> Item {
    Item::Assistant { text: t.into() }
}

#[test]
fn the_transcript_leaves_out_its_oldest_entries_until_it_fits() {
    // Entries short beside an eighth of the budget: none is cut, whole ones are left out.
    let items: Vec<Item> = (0..16)
        .map(|i| {
            if i % 2 == 0 {
                u(&format!("w{i}"))
            } else {
                a(&format!("w{i}"))
            }
        })
        .collect();
    let whole = transcript(&items, 1_000);
    assert!(whole.starts_with("[user]\nw0\n\n[assistant]\nw1\n\n[user]\nw2\n\n"));
    assert!(whole.ends_with("[user]\nw14\n\n[assistant]\nw15"));
    assert!(
        transcript(&items, whole.len()) == whole,
        "the largest budget that keeps all"
    );
    let cut = transcript(&items, whole.len() - 1);
    assert!(
        cut.starts_with(TRIMMED_NOTE) && !cut.contains("w0\n"),
        "{cut}"
    );
    assert!(cut.ends_with("w15") && cut.len() < whole.len(), "{cut}");
    // A long newest entry is cut to an eighth of the budget, its end kept.
    let big = vec![u("q"), a(&format!("{}tail end", "x".repeat(5_000)))];
    let t = transcript(&big, 1_000);
    assert!(t.starts_with("[user]\nq\n\n[assistant]\nxx"), "{t}");
    assert!(t.len() <= 10 + 125 && t.ends_with("tail end"), "{t}");
}

#[test]
fn tool_calls_become_text_without_provider_items() {
    let items = vec![
        u("q"),
        Item::ProviderItem {
            provider: "anthropic".into(),
            item: json!({"signature": "secret"}),
        },
        Item::ToolCall {
            call_id: "c".into(),
            name: "shell".into(),
            input: json!({"command": "ls"}),
        },
        Item::ToolResult {
            call_id: "c".into(),
            output: "denied".into(),
            is_error: true,
        },
    ];
    let t = transcript(&items, 10_000);
    assert!(t.contains("[tool call: shell]\n{\"command\":\"ls\"}"));
    assert!(t.contains("[tool result, failed]\ndenied"));
    assert!(!t.contains("secret"));
}

#[test]
fn the_summary_budget_leaves_room_for_the_output() {
    let fixed = SUMMARY_SYSTEM.len() + SUMMARY_INSTRUCTION.len() + 64;
    assert_eq!(summary_budget(10_000, 1_000), 36_000 - fixed);
    // The summary's output bound is at most a quarter of the window and at most 4,096.
    assert_eq!(summary_budget(10_000, 16_384), 30_000 - fixed);
    assert_eq!(
        summary_budget(200_000, 16_384),
        (200_000 - 4_096) * 4 - fixed
    );
}

#[test]
fn the_estimate_uses_the_last_usage_or_the_whole_request() {
    let snap = Snapshot {
        after: vec![u(&"x".repeat(84))],
        ..Snapshot::default()
    };
    let (mut c, items) = Compactor::start(snap, 10_000, 400, PathBuf::from("/w"), &"y".repeat(80));
    // No usage yet: (400 fixed + 84 + 16 overhead + the prompt's 80 + 16) / 4.
    assert_eq!(c.estimate(&items), 149);
    let usage = Record::now(
        "s",
        Body::Usage {
            run_id: "r".into(),
            input_tokens: 7_990,
            output_tokens: 1,
            cached_input_tokens: None,
            cache_creation_input_tokens: None,
        },
    );
    c.note(&[usage]);
    assert_eq!(c.estimate(&items), 7_990);
    assert!(!c.due(&items));
    let more = Record::now(
        "s",
        Body::Title {
            title: "t".repeat(40),
        },
    );
    c.note(&[more]);
    assert!(c.estimate(&items) > 8_000 && c.due(&items));
}

#[test]
fn compaction_is_due_past_80_percent_of_the_window_at_its_edge() {
    let usage = |tokens| {
        Record::now(
            "s",
            Body::Usage {
                run_id: "r".into(),
                input_tokens: tokens,
                output_tokens: 1,
                cached_input_tokens: None,
                cache_creation_input_tokens: None,
            },
        )
    };
    let (mut c, items) =
        Compactor::start(Snapshot::default(), 10_000, 0, PathBuf::from("/w"), "go");
    c.note(&[usage(8_000)]);
    assert!(!c.due(&items), "exactly 80% is not past it");
    c.note(&[usage(8_001)]);
    assert!(c.due(&items), "the first token past 80%");
}

#[test]
fn one_long_entry_is_cut_to_its_ends_so_earlier_turns_stay() {
    let long = format!("HEAD{}TAIL", "x".repeat(20_000));
    let items = vec![u("first turn"), a("one"), u("second"), a(&long), u("third")];
    let t = transcript(&items, 8_000);
    assert!(t.len() <= 8_000, "{}", t.len());
    assert!(
        !t.starts_with(TRIMMED_NOTE),
        "nothing is left out whole: {t}"
    );
    assert!(t.contains("[user]\nfirst turn") && t.contains("[user]\nthird"));
    assert!(t.contains("[assistant]\nHEAD") && t.contains("TAIL\n\n[user]\nthird"));
    assert!(t.contains(" bytes left out]"));
    // An entry of exactly an eighth of the budget stays whole; one byte more is cut.
    let entry = |n: usize| vec![a(&"y".repeat(n - "[assistant]\n".len()))];
    assert!(!transcript(&entry(1_000), 8_000).contains("left out"));
    assert!(transcript(&entry(1_001), 8_000).contains("left out"));
}

#[test]
fn the_summary_output_bound_is_a_quarter_of_the_window_and_at_most_4096() {
    assert_eq!(summary_output_bound(10_000, 16_384), 2_500);
    assert_eq!(summary_output_bound(10_003, 16_384), 2_500);
    assert_eq!(summary_output_bound(16_384, 16_384), 4_096);
    assert_eq!(summary_output_bound(16_388, 16_384), 4_096);
    assert_eq!(summary_output_bound(200_000, 16_384), SUMMARY_OUTPUT_MAX);
    assert_eq!(summary_output_bound(200_000, 1_000), 1_000);
}

#[test]
fn a_step_bound_is_the_room_left_and_at_least_256_tokens() {
    assert_eq!(output_bound(2_048, 1_000, 16_384), Some(1_048));
    assert_eq!(output_bound(200_000, 1_000, 16_384), Some(16_384));
    // The smallest room accepted, and the first refused.
    assert_eq!(output_bound(2_048, 2_048 - 256, 16_384), Some(256));
    assert_eq!(output_bound(2_048, 2_048 - 255, 16_384), None);
    assert_eq!(output_bound(2_048, 5_000, 16_384), None);
    // A provider bound under 256 needs only its own room.
    assert_eq!(output_bound(2_048, 2_048 - 64, 64), Some(64));
    assert_eq!(output_bound(2_048, 2_048 - 63, 64), None);
    assert_eq!(output_bound(u64::MAX, 1 << 40, 16_384), Some(16_384));
}

#[test]
fn an_empty_reply_past_half_the_window_is_an_overflow() {
    use crate::providers::StepFailure as F;
    assert_eq!(overflowed(F::EmptyReply, 5_001, 10_000), F::ContextOverflow);
    assert_eq!(overflowed(F::EmptyReply, 5_000, 10_000), F::EmptyReply);
    assert_eq!(
        F::EmptyReply.code().map(DiagnosticCode::as_str),
        Some("provider_stream_invalid")
    );
    assert_eq!(
        overflowed(F::StreamInvalid, 9_000, 10_000),
        F::StreamInvalid
    );
    assert_eq!(overflowed(F::Remote, 9_000, 10_000), F::Remote);
}
