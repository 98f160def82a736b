//! A saved conversation (`history.page` entries) as scrollback lines: prompts, replies as
//! Markdown, reasoning summaries dimmed, tools and their cards, diagnostics.

use super::app::prompt_lines;
use super::live::{dim, tool_line};
use super::markdown::Markdown;
use crate::cli::chat_view::{card_line, printable};
use crate::wire::results::{EntryKind, HistoryEntry};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;

/// How reasoning summaries look: dimmed and italic.
pub fn reasoning() -> Style {
    Style::new().add_modifier(Modifier::DIM | Modifier::ITALIC)
}

/// The lines of `entries`, contiguous parts of one message joined first.
pub fn lines(entries: &[HistoryEntry]) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let e = &entries[i];
        let mut text = e.text.clone();
        let mut j = i + 1;
        while j < entries.len() && entries[j].message_id == e.message_id && entries[j].part > 0 {
            text.push_str(&entries[j].text);
            j += 1;
        }
        entry(e, &printable(&text), &mut out);
        i = j;
    }
    out
}

fn entry(e: &HistoryEntry, text: &str, out: &mut Vec<Line<'static>>) {
    match e.kind {
        EntryKind::User => {
            if !out.is_empty() {
                out.push(Line::raw(""));
            }
            out.extend(prompt_lines(text));
        }
        EntryKind::Assistant => out.extend(Markdown::default().lines(text)),
        EntryKind::ReasoningSummary => {
            out.extend(
                text.lines()
                    .map(|l| Line::styled(format!("  {l}"), reasoning())),
            );
        }
        EntryKind::Activity => {
            // The projection's text is `name: state — summary`; the glyph says the state.
            let (glyph, shown) = match text.split_once(" — ") {
                Some((head, rest)) if head.ends_with(": completed") => (("✓", Color::Green), rest),
                Some((head, rest)) if head.ends_with(": failed") => (("✗", Color::Red), rest),
                _ if e.partial => (("…", Color::Cyan), text),
                _ => (("•", Color::Green), text),
            };
            out.push(tool_line(glyph.0, glyph.1, shown));
        }
        EntryKind::ToolCard => {
            let card = serde_json::to_value(&e.card).unwrap_or_default();
            if let Some(line) = card_line(&card) {
                out.push(Line::styled(printable(&line), dim()));
            }
        }
        EntryKind::Compaction | EntryKind::Diagnostic => {
            out.push(Line::styled(format!("[{text}]"), dim()));
        }
    }
}
