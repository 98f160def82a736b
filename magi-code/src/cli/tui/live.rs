//! A running turn as the chat shows it: the reply streams as Markdown (each completed line
//! goes to the scrollback, the partial last line stays live), each tool is one line with a
//! status glyph and, with `tool.cards`, its card beneath it.

use super::markdown::Markdown;
use crate::cli::chat_view::{card_line, printable};
use crate::client::turn::run_of;
use crate::client::{Turn, TurnError, Update};
use crate::wire::events::{ActivityData, ActivityKind, ActivityState, ToolOutputData};
use crate::wire::Event;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use serde_json::Value;
use std::collections::HashSet;
use std::time::Instant;

/// How a nested Code Mode call's summary starts (`docs/code-mode.md`).
const NESTED: &str = "code: ";

/// A tool still running: its line stays in the live area until it ends.
#[derive(Debug)]
pub struct Tool {
    /// The activity ID.
    pub id: String,
    /// `name: summary`, indented for a call nested in a Code Mode cell.
    pub label: String,
}

/// A running turn and what it has shown.
#[derive(Debug)]
pub struct Live {
    /// The run's accumulator (deltas, reconciliation, terminal).
    pub turn: Turn,
    /// When the turn started (the status line's elapsed time).
    pub began: Instant,
    /// `turn.cancel` was sent: a second Ctrl-C leaves.
    pub cancelling: bool,
    md: Markdown,
    /// The message streaming and its text since its last completed line.
    message: Option<String>,
    partial: String,
    /// Tools running, in start order.
    pub tools: Vec<Tool>,
    /// The last running card: the approval dialog shows it.
    pub running_card: Option<String>,
    /// How the last approval request ended unallowed: the next failed tool did not run.
    pub ended: Option<Ended>,
    /// Calls that never ran (denied or expired): their final card has nothing to show.
    unrun: HashSet<String>,
    /// The last proposed change: its approval and line counts, for the dialog.
    pub proposed: Option<(String, u64, u64)>,
    /// The last call that ended, with its final summary.
    ended_with: Option<(String, String)>,
    /// The open Code Mode cell (`exec` activity), whose nested calls are indented.
    exec: Option<String>,
    /// Every `exec` of the turn (their generic card repeats the final line) and the nested
    /// calls (their cards are indented too).
    execs: HashSet<String>,
    nested: HashSet<String>,
}

/// How an approval request ended without an allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The person answered no.
    Denied,
    /// Nobody answered before the request expired.
    Expired,
}

/// How dimmed text looks (reasoning, notes, tool lines).
pub fn dim() -> Style {
    Style::new().add_modifier(Modifier::DIM)
}

/// A tool line: glyph, name and summary.
pub fn tool_line(glyph: &str, colour: Color, label: &str) -> Line<'static> {
    let text = label.trim_start();
    Line::from(vec![
        Span::raw(" ".repeat(label.len() - text.len())),
        Span::styled(format!("{glyph} "), Style::new().fg(colour)),
        Span::styled(printable(text), dim()),
    ])
}

/// A running card as one line: the command, or the file and what is done to it.
pub fn card_preview(card: &Value) -> Option<String> {
    let field = |k: &str| card[k].as_str().map(printable);
    match card["kind"].as_str()? {
        "command" => field("command").map(|c| format!("$ {c}")),
        "file_edit" => field("path").map(|p| format!("edit {p}")),
        "file_read" => field("path").map(|p| format!("read {p}")),
        _ => field("title"),
    }
}

impl Live {
    /// The turn of run `run_id`, started at `now`.
    pub fn new(run_id: &str, now: Instant) -> Self {
        Self {
            turn: Turn::new(run_id),
            began: now,
            cancelling: false,
            md: Markdown::default(),
            message: None,
            partial: String::new(),
            tools: Vec::new(),
            running_card: None,
            ended: None,
            unrun: HashSet::new(),
            proposed: None,
            ended_with: None,
            exec: None,
            execs: HashSet::new(),
            nested: HashSet::new(),
        }
    }

    /// The partial last line of the reply, rendered with the current Markdown state.
    pub fn partial(&self) -> Option<Line<'static>> {
        (!self.partial.is_empty()).then(|| self.md.clone().line(&self.partial))
    }

    /// Appends reply text of `message`, committing each completed line to `out`.
    fn text(&mut self, message: &str, text: &str, out: &mut Vec<Line<'static>>) {
        if self.message.as_deref() != Some(message) {
            self.flush(out);
            self.message = Some(message.to_owned());
        }
        self.partial.push_str(&printable(text));
        while let Some(nl) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=nl).collect();
            out.push(self.md.line(&line[..nl]));
        }
    }

    /// Commits the partial line (the message ended or something else shows).
    pub fn flush(&mut self, out: &mut Vec<Line<'static>>) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            out.push(self.md.line(&line));
        }
    }

    /// Applies one event of the turn, committing what it completed to `out`; Err when the
    /// server broke the protocol.
    pub fn apply(&mut self, e: &Event, out: &mut Vec<Line<'static>>) -> Result<(), TurnError> {
        let update = self.turn.apply(e)?;
        if run_of(e) != self.turn.run_id() {
            return Ok(());
        }
        match update {
            Update::Delta { message, text } => self.text(&message, &text, out),
            Update::Reconciled {
                message,
                text,
                shown,
                ..
            } => {
                // What the deltas showed is in the scrollback; a reply that differs from it
                // is shown again whole.
                match text.strip_prefix(shown.as_str()) {
                    Some(rest) => self.text(&message, rest, out),
                    None => {
                        self.flush(out);
                        out.push(Line::styled("(the reply, as recorded:)", dim()));
                        self.message = None;
                        self.text(&message, &text, out);
                    }
                }
                self.flush(out);
                self.md = Markdown::default();
            }
            _ => match e {
                Event::Activity(a) => self.activity(a, out),
                Event::ToolCard(c)
                    if self.execs.contains(&c.activity_id)
                        || self.unrun.contains(&c.activity_id) => {}
                Event::ToolCard(c) => {
                    let card = serde_json::to_value(&c.card).unwrap_or_default();
                    let indent = if self.nested.contains(&c.activity_id) {
                        "  "
                    } else {
                        ""
                    };
                    match card_line(&card) {
                        Some(line) => {
                            out.push(Line::styled(format!("{indent}{}", printable(&line)), dim()))
                        }
                        None => self.running_card = card_preview(&card),
                    }
                }
                // A one-line output the tool's own line already says ("wrote 3 bytes").
                Event::ToolOutput(o)
                    if self.ended_with.as_ref().is_some_and(|(id, summary)| {
                        *id == o.activity_id
                            && !o.tail.contains('\n')
                            && summary.ends_with(&format!(": {}", o.tail))
                    }) => {}
                Event::ToolOutput(o) if !self.execs.contains(&o.activity_id) => {
                    let indent = if self.nested.contains(&o.activity_id) {
                        "    "
                    } else {
                        "  "
                    };
                    out.extend(tail_lines(o, indent));
                }
                Event::ToolDiff(d) => {
                    out.extend(diff_lines(&d.diff));
                    self.proposed = Some((d.approval_id.clone(), d.added, d.removed));
                }
                Event::Diagnostic(d) => {
                    self.flush(out);
                    let line = format!("[{}: {}]", d.code, d.summary);
                    out.push(Line::styled(printable(&line), dim()));
                }
                _ => {}
            },
        }
        Ok(())
    }

    fn activity(&mut self, a: &ActivityData, out: &mut Vec<Line<'static>>) {
        let id = &a.activity_id;
        let in_cell = self.exec.is_some() && a.summary.starts_with(NESTED);
        if in_cell && a.kind != ActivityKind::Compaction {
            self.nested.insert(id.clone());
        }
        let summary = match self.nested.contains(id) {
            true => format!("  {}", &a.summary[NESTED.len()..]),
            false => a.summary.clone(),
        };
        let label = if summary.trim_start().starts_with(&a.name) {
            summary
        } else {
            format!("{}: {summary}", a.name)
        };
        if a.kind == ActivityKind::Tool && a.name == "exec" {
            self.execs.insert(id.clone());
            match a.state {
                ActivityState::Started => self.exec = Some(id.clone()),
                _ if self.exec.as_ref() == Some(id) => self.exec = None,
                _ => {}
            }
        }
        // What the reply said before the tool is complete: it goes above the tool line.
        self.flush(out);
        if a.state == ActivityState::Started {
            self.tools.push(Tool {
                id: a.activity_id.clone(),
                label,
            });
            return;
        }
        self.tools.retain(|t| t.id != a.activity_id);
        self.running_card = None;
        self.ended_with = Some((a.activity_id.clone(), a.summary.clone()));
        let line = match a.state {
            ActivityState::Completed => tool_line("✓", Color::Green, &label),
            _ => match self.ended.take() {
                Some(how) => {
                    self.unrun.insert(a.activity_id.clone());
                    let word = match how {
                        Ended::Denied => "denied",
                        Ended::Expired => "expired: not answered in time",
                    };
                    let label = label.split(": denied by the user").next().unwrap_or(&label);
                    tool_line("⊘", Color::Yellow, &format!("{label} ({word})"))
                }
                None => tool_line("✗", Color::Red, &label),
            },
        };
        out.push(line);
    }
}

/// Most lines of a proposed diff shown in the scrollback.
const DIFF_LINES: usize = 40;

/// A tool's output tail under its line: how much there was when the tail is not all of it,
/// then the tail's lines, dimmed.
fn tail_lines(o: &ToolOutputData, indent: &str) -> Vec<Line<'static>> {
    let tail = printable(&o.tail);
    let shown = tail.lines().count() as u64;
    let mut lines = Vec::new();
    if shown < o.lines {
        lines.push(Line::styled(
            format!(
                "{indent}… {} lines, {} bytes; the last {shown}:",
                o.lines, o.bytes
            ),
            dim(),
        ));
    }
    for l in tail.lines() {
        lines.push(Line::from(vec![
            Span::styled(format!("{indent}│ "), dim()),
            Span::styled(l.to_owned(), dim()),
        ]));
    }
    lines
}

/// A proposed diff for the scrollback, coloured by line, at most 40 lines.
pub fn diff_lines(diff: &str) -> Vec<Line<'static>> {
    let diff = printable(diff);
    let total = diff.lines().count();
    let mut lines: Vec<Line<'static>> = diff
        .lines()
        .take(DIFF_LINES)
        .map(|l| {
            let style = if l.starts_with("+++") || l.starts_with("---") {
                Style::new().add_modifier(Modifier::BOLD)
            } else if l.starts_with('+') {
                Style::new().fg(Color::Green)
            } else if l.starts_with('-') {
                Style::new().fg(Color::Red)
            } else if l.starts_with("@@") {
                Style::new().fg(Color::Cyan)
            } else {
                dim()
            };
            Line::styled(format!("  {l}"), style)
        })
        .collect();
    if total > DIFF_LINES {
        lines.push(Line::styled(
            format!("  … {} more lines of the diff", total - DIFF_LINES),
            dim(),
        ));
    }
    lines
}
