//! Rendering snapshots: [`ChatApp`] driven by scripted events on ratatui's `TestBackend`
//! with a fixed clock (no process, no sleeps).

use super::app::{Action, ChatApp};
use super::transcript;
use crate::wire::results::HistoryEntry;
use crate::wire::Event;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use ratatui::text::Line;
use ratatui::Terminal;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const W: u16 = 72;
const H: u16 = 10;

fn event(name: &str, mut data: Value) -> Event {
    data["session_id"] = json!("s1");
    data["run_id"] = json!("r1");
    serde_json::from_value(json!({"event": name, "data": data})).unwrap()
}

fn delta(part: u64, text: &str) -> Event {
    event(
        "message.delta",
        json!({"message_id": "m1", "part": part, "text": text}),
    )
}

fn activity(state: &str) -> Event {
    let summary = "shell cargo test";
    event(
        "activity",
        json!({"activity_id": "a1", "kind": "tool", "state": state, "name": "shell", "summary": summary}),
    )
}

fn card(status: &str, exit: Option<i64>) -> Event {
    let card = json!({"kind": "command", "title": "cargo test", "status": status,
        "command": "cargo test", "exit_code": exit, "duration_ms": exit.map(|_| 1200)});
    event("tool.card", json!({"activity_id": "a1", "card": card}))
}

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn typed(app: &mut ChatApp, s: &str, at: Instant) -> Option<Action> {
    let mut last = None;
    for c in s.chars() {
        last = app.on_key(key(KeyCode::Char(c)), at);
    }
    last.or_else(|| app.on_key(key(KeyCode::Enter), at))
}

/// A running app at `t0` with model and title known.
fn running(t0: Instant) -> ChatApp {
    let mut app = ChatApp::default();
    app.info.model = Some("script".to_owned());
    app.info.effort = Some("high".to_owned());
    app.info.title = Some("Fix the tests".to_owned());
    assert_eq!(
        typed(&mut app, "fix it", t0),
        Some(Action::Send("fix it".to_owned()))
    );
    app.turn_started("r1", t0);
    app
}

fn draw(app: &ChatApp) -> Buffer {
    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    term.draw(|f| app.render(f)).unwrap();
    term.backend().buffer().clone()
}

fn rows(buf: &Buffer) -> Vec<String> {
    (0..buf.area.height)
        .map(|y| {
            let row: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
            row.trim_end().to_owned()
        })
        .collect()
}

fn text(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

#[test]
fn a_streaming_reply_renders_markdown_line_by_line() {
    let t0 = Instant::now();
    let mut app = running(t0);
    assert_eq!(text(&app.take_lines()), ["› fix it"]);
    let t1 = t0 + Duration::from_millis(2300);
    app.on_event(
        &delta(
            0,
            "## Plan\n- run **all** tests\n1. fix `a.rs`\n```sh\ncargo te",
        ),
        t1,
    );
    assert_eq!(
        text(&app.take_lines()),
        ["Plan", "• run all tests", "1. fix a.rs", "```sh"]
    );
    assert_eq!(
        rows(&draw(&app)),
        [
            "cargo te",
            "›",
            " script · effort high · Fix the tests · ⠸ 2.3s · Ctrl-C to stop",
            "",
            "",
            "",
            "",
            "",
            "",
            "",
        ]
    );
    // The partial line inside the fence is code already.
    assert_eq!(draw(&app)[(0, 0)].fg, Color::Cyan);
    app.on_event(&delta(1, "st\n```\nAll green.\n"), t1);
    let lines = app.take_lines();
    assert_eq!(text(&lines), ["cargo test", "```", "All green."]);
    assert_eq!(lines[0].style.fg, Some(Color::Cyan));
    let finished = json!({"outcome": "completed", "persistence": "durable", "revision": "v2"});
    app.on_event(
        &event("run.finished", finished),
        t0 + Duration::from_secs(3),
    );
    assert_eq!(text(&app.take_lines()), ["─ done in 3.0s", ""]);
    assert_eq!(
        rows(&draw(&app))[..2],
        [
            "›",
            " script · effort high · Fix the tests · /help for commands"
        ]
    );
}

#[test]
fn a_reconciled_reply_completes_the_streamed_one_or_replaces_it() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    let reconcile = |text: &str| {
        let data = json!({"message_id": "m1", "part": 0, "text": text, "last_part": true,
            "partial": false});
        event("message.reconcile", data)
    };
    app.on_event(&delta(0, "Hello\nwor"), t0);
    app.on_event(&reconcile("Hello\nworld."), t0);
    assert_eq!(text(&app.take_lines()), ["Hello", "world."]);
    let mut app = running(t0);
    app.take_lines();
    app.on_event(&delta(0, "Helo\n"), t0);
    app.on_event(&reconcile("Hello\n"), t0);
    assert_eq!(
        text(&app.take_lines()),
        ["Helo", "(the reply, as recorded:)", "Hello"]
    );
}

#[test]
fn a_tool_is_one_line_with_a_glyph_and_its_card() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    app.on_event(&activity("started"), t0);
    app.on_event(&card("running", None), t0);
    assert_eq!(rows(&draw(&app))[0], "⠋ shell cargo test");
    app.on_event(&activity("completed"), t0);
    app.on_event(&card("completed", Some(0)), t0);
    assert_eq!(
        text(&app.take_lines()),
        ["✓ shell cargo test", "  $ cargo test → exit 0, 1200 ms"]
    );
    assert_eq!(rows(&draw(&app))[0], "›");
}

#[test]
fn a_code_mode_cell_indents_its_nested_calls() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    let act = |id: &str, state: &str, name: &str, summary: &str| {
        let data = json!({"activity_id": id, "kind": "tool", "state": state, "name": name,
            "summary": summary});
        event("activity", data)
    };
    app.on_event(&act("x", "started", "exec", "exec: 3 lines"), t0);
    app.on_event(
        &act("n", "started", "read_file", "code: read_file f.txt"),
        t0,
    );
    assert_eq!(
        rows(&draw(&app))[..2],
        ["⠋ exec: 3 lines", "  ⠋ read_file f.txt"]
    );
    app.on_event(
        &act(
            "n",
            "completed",
            "read_file",
            "code: read_file f.txt: 2 lines",
        ),
        t0,
    );
    let read = json!({"kind": "file_read", "title": "f.txt", "status": "completed",
        "path": "f.txt", "lines": 2});
    app.on_event(
        &event("tool.card", json!({"activity_id": "n", "card": read})),
        t0,
    );
    app.on_event(&act("x", "completed", "exec", "exec: 3 lines"), t0);
    let generic = json!({"kind": "generic", "title": "exec", "status": "completed"});
    app.on_event(
        &event("tool.card", json!({"activity_id": "x", "card": generic})),
        t0,
    );
    assert_eq!(
        text(&app.take_lines()),
        [
            "  ✓ read_file f.txt: 2 lines",
            "    f.txt: 2 lines",
            "✓ exec: 3 lines"
        ]
    );
}

#[test]
fn the_approval_dialog_counts_down_and_ignores_earlier_keys() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.on_event(&activity("started"), t0);
    app.on_event(&card("running", None), t0);
    // Typed while the reply streamed: it is editor text, never an answer.
    let early = t0 + Duration::from_millis(500);
    app.on_key(key(KeyCode::Char('y')), early);
    let shown = t0 + Duration::from_secs(1);
    let approval =
        json!({"approval_id": "p1", "summary": "shell cargo test", "expires_in_ms": 60_000});
    app.on_event(&event("approval.requested", approval), shown);
    assert_eq!(
        app.on_key(key(KeyCode::Enter), early),
        None,
        "an early Enter answers nothing: it queues the editor's text"
    );
    assert_eq!(app.queued, ["y"]);
    let boxed = |s: &str| format!("│{s:<70}│");
    let top = format!("┌ approval {}┐", "─".repeat(60));
    let bottom = format!("└{}┘", "─".repeat(70));
    assert_eq!(
        rows(&draw(&app)),
        [
            "⠋ shell cargo test".to_owned(),
            "queued › y  (sent when the turn ends)".to_owned(),
            top.clone(),
            boxed("Allow shell cargo test?"),
            boxed("  $ cargo test"),
            boxed("y/yes or n/no, then Enter · expires in 60s"),
            boxed("answer›"),
            bottom.clone(),
            "›".to_owned(),
            " script · effort high · Fix the tests · ⠋ 1.0s · Ctrl-C to stop".to_owned(),
        ]
    );
    app.on_tick(shown + Duration::from_millis(17_500));
    let screen = rows(&draw(&app));
    assert_eq!(
        screen[5],
        boxed("y/yes or n/no, then Enter · expires in 43s")
    );
    let later = shown + Duration::from_secs(18);
    assert_eq!(typed(&mut app, "sure", later), None);
    let screen = rows(&draw(&app));
    let hint = boxed("\"sure\" is not an answer: please answer y or n");
    assert!(screen.contains(&hint), "{screen:#?}");
    let answer = typed(&mut app, "yes", later);
    let allow = Action::Answer {
        run_id: "r1".into(),
        approval_id: "p1".into(),
        allow: true,
    };
    assert_eq!(answer, Some(allow));
    assert_eq!(app.queued, ["y"], "the early key stays a prompt");
    assert_eq!(app.next_queued(), None, "sent only once the turn ends");
    let finished = json!({"outcome": "completed", "persistence": "durable"});
    app.on_event(&event("run.finished", finished), later);
    assert_eq!(app.next_queued(), Some("y".to_owned()));
    assert!(app.queued.is_empty());
}

#[test]
fn a_cancelled_turn_puts_its_queued_prompts_back_in_the_editor() {
    let t0 = Instant::now();
    let mut app = running(t0);
    assert_eq!(typed(&mut app, "next one", t0), None);
    assert_eq!(typed(&mut app, "and this", t0), None);
    assert_eq!(app.queued, ["next one", "and this"]);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    app.on_key(ctrl_c, t0);
    let finished = json!({"outcome": "cancelled", "persistence": "durable"});
    app.on_event(&event("run.finished", finished), t0);
    assert_eq!(app.next_queued(), None);
    assert_eq!(app.editor.text(), "next one\nand this");
    assert_eq!(
        app.note.as_deref(),
        Some("the turn stopped: the queued prompt is back in the editor")
    );
}

#[test]
fn the_status_line_fits_the_terminal() {
    use super::render::fit_status;
    let title = "Make the parser accept trailing commas everywhere";
    let fit = |w| {
        fit_status(
            "claude-sonnet-4-5",
            "effort high",
            title,
            Some("⠋ 12.3s"),
            "Ctrl-C to stop",
            w,
        )
    };
    let whole = fit(200);
    assert_eq!(
        whole,
        format!(" claude-sonnet-4-5 · effort high · {title} · ⠋ 12.3s · Ctrl-C to stop")
    );
    for w in [100, 80, 60, 40, 30, 20, 10] {
        let s = fit(w);
        assert!(
            ratatui::text::Span::raw(s.clone()).width() <= w,
            "{w}: {s:?}"
        );
        assert!(s.starts_with(" claude-sonnet-4-5") || w < 19, "{w}: {s:?}");
    }
    assert_eq!(
        fit(80),
        " claude-sonnet-4-5 · effort high · Make the parser a… · ⠋ 12.3s · Ctrl-C to stop"
    );
    assert_eq!(
        fit(60),
        " claude-sonnet-4-5 · effort high · ⠋ 12.3s · Ctrl-C to stop"
    );
    assert_eq!(fit(45), " claude-sonnet-4-5 · effort high · ⠋ 12.3s");
    assert_eq!(fit(30), " claude-sonnet-4-5 · ⠋ 12.3s");
}

#[test]
fn an_unanswered_approval_expires() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    let approval = json!({"approval_id": "p1", "summary": "shell ls", "expires_in_ms": 5_000});
    app.on_event(&event("approval.requested", approval), t0);
    app.on_tick(t0 + Duration::from_secs(5));
    assert!(app.dialog.is_none());
    assert_eq!(
        text(&app.take_lines()),
        ["  expired: shell ls was not answered in time"]
    );
    // The call's end says expired, not denied, and its card (nothing changed) is not shown.
    let failed = json!({"activity_id": "a1", "kind": "tool", "state": "failed", "name": "shell",
        "summary": "shell ls: denied by the user (the approval expired)"});
    app.on_event(&event("activity", failed), t0 + Duration::from_secs(5));
    app.on_event(&card("failed", None), t0 + Duration::from_secs(5));
    assert_eq!(
        text(&app.take_lines()),
        ["⊘ shell ls (expired: not answered in time)"]
    );
}

#[test]
fn the_backend_expiring_first_closes_the_dialog_as_expired() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    let approval = json!({"approval_id": "p1", "summary": "shell ls", "expires_in_ms": 5_000});
    app.on_event(&event("approval.requested", approval), t0);
    let failed = json!({"activity_id": "a1", "kind": "tool", "state": "failed", "name": "shell",
        "summary": "shell ls: denied by the user (the approval expired)"});
    app.on_event(
        &event("activity", failed),
        t0 + Duration::from_millis(4_999),
    );
    assert!(app.dialog.is_none());
    assert_eq!(
        text(&app.take_lines()),
        [
            "  expired: shell ls was not answered in time",
            "⊘ shell ls (expired: not answered in time)"
        ]
    );
}

#[test]
fn events_of_another_run_show_nothing() {
    let t0 = Instant::now();
    let mut app = running(t0);
    app.take_lines();
    let mut other = activity("completed");
    if let Event::Activity(a) = &mut other {
        a.run_id = "r0".to_owned();
    }
    app.on_event(&other, t0);
    let finished = json!({"session_id": "s1", "run_id": "r0", "outcome": "completed",
        "persistence": "durable"});
    let finished: Event =
        serde_json::from_value(json!({"event": "run.finished", "data": finished})).unwrap();
    app.on_event(&finished, t0);
    assert!(app.take_lines().is_empty());
    assert!(app.running(), "another run's end is not this turn's");
}

#[test]
fn ctrl_c_stops_the_turn_then_leaves() {
    let t0 = Instant::now();
    let mut app = running(t0);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(
        app.on_key(ctrl_c, t0),
        Some(Action::Cancel("r1".to_owned()))
    );
    assert!(rows(&draw(&app)).iter().any(|r| r.contains("stopping…")));
    assert_eq!(app.on_key(ctrl_c, t0), Some(Action::Quit));
}

#[test]
fn a_transcript_shows_prompts_replies_and_dimmed_reasoning() {
    let entry = |id: &str, kind: &str, text: &str| -> HistoryEntry {
        serde_json::from_value(json!({"message_id": id, "kind": kind, "text": text,
            "partial": false, "part": 0, "last_part": true}))
        .unwrap()
    };
    let entries = [
        entry("u1", "user", "why?"),
        entry("r1", "reasoning_summary", "Checking the logs first."),
        entry("t1", "activity", "shell: failed — shell ls: exit 2"),
        entry("a1", "assistant", "Because **tests**."),
    ];
    let lines = transcript::lines(&entries);
    let shown = [
        "› why?",
        "  Checking the logs first.",
        "✗ shell ls: exit 2",
        "Because tests.",
    ];
    assert_eq!(text(&lines), shown);
    assert!(lines[1].style.add_modifier.contains(Modifier::DIM));
}

#[test]
fn a_paste_past_the_prompt_bound_is_cut_and_says_so() {
    let t0 = Instant::now();
    let mut app = ChatApp::default();
    app.on_paste(&"p".repeat(super::editor::MAX_BYTES + 10), t0);
    assert_eq!(app.editor.text().len(), super::editor::MAX_BYTES);
    assert!(app.note.as_deref().is_some_and(|n| n.contains("16,384")));
    // Ctrl-U clears the line, and Enter then sends nothing.
    app.on_key(KeyEvent::new(KeyCode::Char('u'), KeyModifiers::CONTROL), t0);
    assert_eq!(app.editor.text(), "");
    assert_eq!(app.on_key(key(KeyCode::Enter), t0), None);
}

#[test]
fn a_prompt_longer_than_the_terminal_wraps_and_the_cursor_follows() {
    let t0 = Instant::now();
    let mut app = ChatApp::default();
    app.now = Some(t0);
    // 69 columns of text a row at W = 72 (the mark takes two, the cursor one).
    let long = "x".repeat(69) + "yyyy";
    app.on_paste(&long, t0);
    let mut term = Terminal::new(TestBackend::new(W, H)).unwrap();
    term.draw(|f| app.render(f)).unwrap();
    let shown = rows(term.backend().buffer());
    let at = shown.iter().position(|r| r.starts_with("› x")).unwrap();
    assert_eq!(shown[at], format!("› {}", "x".repeat(69)));
    assert_eq!(shown[at + 1], "  yyyy");
    let cursor = term.get_cursor_position().unwrap();
    assert_eq!((cursor.x, cursor.y), (6, at as u16 + 1));
}

#[test]
fn a_long_stderr_line_arrives_in_bounded_pieces() {
    let max = super::STDERR_LINE_BYTES as usize;
    let text = format!("{}\nnext\n{}", "a".repeat(2 * max + 5), "b".repeat(max));
    let mut got = Vec::new();
    super::bounded_lines(text.as_bytes(), |l| {
        got.push(l.len());
        true
    });
    // The longest accepted piece is the bound; the last line needs no newline.
    assert_eq!(got, [max, max, 5, 4, max]);
}
