use super::*;

fn u(t: &str) -> Item {
    Item::User { text: t.into() }
}

fn a(t: &str) -> Item {
    Item::Assistant { text: t.into() }
}

#[test]
fn the_transcript_leaves_out_its_oldest_entries_until_it_fits() {
    let items = vec![u("first"), a("one"), u("second"), a("two")];
    let whole = transcript(&items, 1_000);
    assert_eq!(
        whole,
        "[user]\nfirst\n\n[assistant]\none\n\n[user]\nsecond\n\n[assistant]\ntwo"
    );
    assert!(
        transcript(&items, whole.len()) == whole,
        "the largest budget that keeps all"
    );
    let cut = transcript(&items, whole.len() - 1);
    assert!(
        cut.starts_with(TRIMMED_NOTE) && !cut.contains("first"),
        "{cut}"
    );
    assert!(cut.ends_with("wo") && cut.len() < whole.len(), "{cut}");
    // A long oldest entry goes whole; the rest stays after the note, at the budget's edge.
    let items = vec![u(&"f".repeat(200)), a("one"), u("second"), a("two")];
    let kept = format!("{TRIMMED_NOTE}\n\n[assistant]\none\n\n[user]\nsecond\n\n[assistant]\ntwo");
    assert_eq!(transcript(&items, kept.len()), kept);
    // The newest entry alone is cut to its end.
    let big = vec![u(&"x".repeat(500)), a("tail end")];
    let t = transcript(&big, 100);
    assert!(
        t.len() <= 100 && t.ends_with("tail end") && t.starts_with(TRIMMED_NOTE),
        "{t}"
    );
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
    // An output bound past half the window leaves the other half.
    assert_eq!(summary_budget(10_000, 16_384), 20_000 - fixed);
}

#[test]
fn the_estimate_uses_the_last_usage_or_the_whole_request() {
    let snap = Snapshot {
        after: vec![u(&"x".repeat(84))],
        ..Snapshot::default()
    };
    let (mut c, items) = Compactor::start(snap, 10_000, 400, PathBuf::from("/w"));
    // No usage yet: (400 fixed + 84 + 16 overhead) / 4.
    assert_eq!(c.estimate(&items), 125);
    let usage = Record::now(
        "s",
        Body::Usage {
            run_id: "r".into(),
            input_tokens: 7_990,
            output_tokens: 1,
            cached_input_tokens: None,
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
fn the_base_prompt_and_built_in_tools_fit_in_12_kib() {
    let rt = crate::runtime::Runtime::for_tests(
        std::path::Path::new("/home/someone/.magi"),
        std::path::Path::new("/home/someone/projects/a-fairly-long-project-folder-name"),
    );
    let specs = crate::tools::specs();
    let instructions = super::super::context::instructions(&rt, &specs);
    let bytes = fixed_bytes(&instructions, &specs);
    assert!(bytes <= 12 * 1024, "{bytes} bytes");
}
