//! The terminal chat's state, sans IO: keys, pastes, server events and clock ticks go in,
//! [`Action`]s for the terminal loop come out, and [`ChatApp::render`] draws the live area.
//! Finished lines wait in a queue for the terminal's scrollback.

use super::dialog::{Answer, Dialog};
use super::editor::Editor;
use super::live::{dim, Live};
use crate::cli::chat_view::{printable, word};
use crate::client::turn::run_of;
use crate::client::words::said;
use crate::wire::events::ActivityState;
use crate::wire::Event;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use std::time::{Duration, Instant};

/// What the terminal loop must do for the app.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start a turn with this prompt ([`ChatApp::turn_started`] or [`ChatApp::error`] after).
    Send(String),
    /// Answer an approval.
    Answer {
        /// The run.
        run_id: String,
        /// The request.
        approval_id: String,
        /// Allow or deny.
        allow: bool,
    },
    /// Send `turn.cancel` for this run.
    Cancel(String),
    /// A slash command other than `/help` and `/quit`, with its argument.
    Command(String, String),
    /// Leave the chat.
    Quit,
}

/// What the status line shows about the session.
#[derive(Clone, Debug, Default)]
pub struct Info {
    /// The attached session.
    pub session: String,
    /// Its title, once one exists.
    pub title: Option<String>,
    /// The selected model.
    pub model: Option<String>,
    /// The effective (or requested) effort.
    pub effort: Option<String>,
}

/// The most characters the approval dialog's answer field holds.
const FIELD_CHARS: usize = 16;
/// The note shown when typing or a paste would pass the prompt bound.
const TOO_LONG: &str = "a prompt is at most 16,384 bytes: the rest was left out";

/// The commands `/help` lists.
pub const HELP: &str = "\
/help          this list
/sessions      the sessions of this folder
/open ID       switch to session ID and show its conversation
/new           start a new session
/model [ID]    list the catalog's models, or switch to one
/effort [LVL]  list the model's effort levels, or switch to one
/quit          leave (Ctrl-D at an empty prompt too)
Enter sends; Alt-Enter or Ctrl-J adds a line; Up/Down walk the history
Ctrl-A/E start/end of line, Ctrl-U/K delete to start/end, Ctrl-W the word before
Ctrl-C stops the running turn; at an empty prompt, or pressed twice, it leaves";

/// The chat: editor, running turn, dialog, status and the lines bound for the scrollback.
#[derive(Debug, Default)]
pub struct ChatApp {
    /// The prompt editor.
    pub editor: Editor,
    /// The running turn.
    pub live: Option<Live>,
    /// The open approval dialog.
    pub dialog: Option<Dialog>,
    /// What the status line shows.
    pub info: Info,
    /// A one-line note above the editor (a hint, "stopping…").
    pub note: Option<String>,
    /// The last tick's time.
    pub now: Option<Instant>,
    /// Prompts typed while a turn ran, sent in order once it ends.
    pub queued: Vec<String>,
    /// Lines finished and not yet in the scrollback.
    out: Vec<Line<'static>>,
}

impl ChatApp {
    /// Takes the lines finished since the last call, for the terminal's scrollback.
    pub fn take_lines(&mut self) -> Vec<Line<'static>> {
        std::mem::take(&mut self.out)
    }

    /// Queues lines for the scrollback.
    pub fn print(&mut self, lines: impl IntoIterator<Item = Line<'static>>) {
        self.out.extend(lines);
    }

    /// Queues a plain text (each of its lines; an empty text is one empty line) for the
    /// scrollback.
    pub fn say(&mut self, text: &str) {
        let lines: Vec<Line<'static>> = printable(text)
            .split('\n')
            .map(|l| Line::raw(l.to_owned()))
            .collect();
        self.out.extend(lines);
    }

    /// Queues an error line.
    pub fn error(&mut self, text: &str) {
        self.out
            .push(Line::styled(printable(text), Style::new().fg(Color::Red)));
    }

    /// The turn `run_id` was admitted at `now`.
    pub fn turn_started(&mut self, run_id: &str, now: Instant) {
        self.live = Some(Live::new(run_id, now));
        self.now = Some(now);
    }

    /// Whether a turn is running.
    pub fn running(&self) -> bool {
        self.live.is_some()
    }

    /// A bracketed paste: one text, newlines kept, into the dialog field or the editor.
    pub fn on_paste(&mut self, text: &str, at: Instant) {
        match &mut self.dialog {
            Some(d) if at >= d.shown_at => {
                // An answer is a word: a longer field can only ask again, so it stays short.
                d.field.extend(
                    text.trim()
                        .chars()
                        .take(FIELD_CHARS.saturating_sub(d.field.chars().count())),
                );
            }
            _ => {
                if !self.editor.insert(text) {
                    self.note = Some(TOO_LONG.to_owned());
                }
            }
        }
    }

    /// Advances the clock: the status line's elapsed time and the dialog's countdown.
    pub fn on_tick(&mut self, now: Instant) {
        self.now = Some(now);
        if self.dialog.as_ref().is_some_and(|d| d.expired(now)) {
            self.expire();
        }
    }

    /// The open dialog's request expired unanswered: the call does not run.
    fn expire(&mut self) {
        let Some(d) = self.dialog.take() else { return };
        self.note = None;
        self.out.push(Line::styled(
            format!("  expired: {} was not answered in time", d.summary),
            Style::new().fg(Color::Yellow),
        ));
        if let Some(live) = &mut self.live {
            live.ended = Some(super::live::Ended::Expired);
        }
    }

    /// The next queued prompt, once no turn runs: it goes to the scrollback as sent.
    pub fn next_queued(&mut self) -> Option<String> {
        if self.running() || self.queued.is_empty() {
            return None;
        }
        let prompt = self.queued.remove(0);
        self.print(prompt_lines(&prompt));
        Some(prompt)
    }

    /// One key read at `at`. Keys read before the dialog appeared go to the editor, never to
    /// the dialog.
    pub fn on_key(&mut self, key: KeyEvent, at: Instant) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl && key.code == KeyCode::Char('c') {
            return self.interrupt();
        }
        if self.dialog.as_ref().is_some_and(|d| at >= d.shown_at) {
            return self.dialog_key(key);
        }
        self.editor_key(key, ctrl)
    }

    /// Ctrl-C: stops the running turn, leaves when pressed again or at an empty prompt, and
    /// otherwise clears the editor.
    fn interrupt(&mut self) -> Option<Action> {
        match &mut self.live {
            Some(live) if live.cancelling => Some(Action::Quit),
            Some(live) => {
                live.cancelling = true;
                self.note = Some("stopping; Ctrl-C again leaves".to_owned());
                Some(Action::Cancel(live.turn.run_id().to_owned()))
            }
            None if self.editor.text().is_empty() => Some(Action::Quit),
            None => {
                self.editor.take();
                None
            }
        }
    }

    fn dialog_key(&mut self, key: KeyEvent) -> Option<Action> {
        let d = self.dialog.as_mut()?;
        match key.code {
            KeyCode::Enter => {
                let answer = d.submit()?;
                let d = self.dialog.take()?;
                let allow = answer == Answer::Allow;
                let word = if allow { "allowed" } else { "denied" };
                self.out
                    .push(Line::styled(format!("  {word}: {}", d.summary), dim()));
                if let (Some(live), false) = (&mut self.live, allow) {
                    live.ended = Some(super::live::Ended::Denied);
                }
                Some(Action::Answer {
                    run_id: d.run_id,
                    approval_id: d.approval_id,
                    allow,
                })
            }
            KeyCode::Backspace => {
                d.field.pop();
                None
            }
            KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if d.field.chars().count() < FIELD_CHARS {
                    d.field.push(c);
                }
                None
            }
            _ => None,
        }
    }

    fn editor_key(&mut self, key: KeyEvent, ctrl: bool) -> Option<Action> {
        let e = &mut self.editor;
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let newline = key
            .modifiers
            .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT);
        let breaks =
            (key.code == KeyCode::Enter && newline) || (ctrl && key.code == KeyCode::Char('j'));
        let typed = match key.code {
            _ if breaks => Some("\n".to_owned()),
            KeyCode::Char(c) if !(ctrl || (alt && matches!(c, 'b' | 'f'))) => Some(c.to_string()),
            KeyCode::Tab => Some("\t".to_owned()),
            _ => None,
        };
        if let Some(t) = typed {
            if !e.insert(&t) {
                self.note = Some(TOO_LONG.to_owned());
            }
            return None;
        }
        match key.code {
            KeyCode::Char('d') if ctrl && e.text().is_empty() => return Some(Action::Quit),
            KeyCode::Char('a') if ctrl => e.home(),
            KeyCode::Char('e') if ctrl => e.end(),
            KeyCode::Char('u') if ctrl => e.kill_to_start(),
            KeyCode::Char('k') if ctrl => e.kill_to_end(),
            KeyCode::Char('w') if ctrl => e.delete_word(),
            KeyCode::Char('b') if alt => e.word_left(),
            KeyCode::Char('f') if alt => e.word_right(),
            KeyCode::Left if ctrl || alt => e.word_left(),
            KeyCode::Right if ctrl || alt => e.word_right(),
            KeyCode::Enter => return self.enter(),
            KeyCode::Backspace => e.backspace(),
            KeyCode::Delete => e.delete(),
            KeyCode::Left => e.left(),
            KeyCode::Right => e.right(),
            KeyCode::Home => e.home(),
            KeyCode::End => e.end(),
            KeyCode::Up => e.up(),
            KeyCode::Down => e.down(),
            _ => {}
        }
        None
    }

    /// Enter: a command, or a prompt when no turn runs.
    fn enter(&mut self) -> Option<Action> {
        let text = self.editor.text();
        let line = text.trim();
        if line.is_empty() {
            return None;
        }
        if let Some(cmd) = line.strip_prefix('/') {
            let (cmd, arg) = cmd.split_once(char::is_whitespace).unwrap_or((cmd, ""));
            let (cmd, arg) = (cmd.to_owned(), arg.trim().to_owned());
            self.editor.take();
            self.out.push(Line::styled(format!("› {line}"), dim()));
            return match cmd.as_str() {
                "quit" | "exit" => Some(Action::Quit),
                "help" => {
                    self.say(HELP);
                    None
                }
                _ if self.running() => {
                    self.error("a turn is running: commands wait until it ends");
                    None
                }
                _ => Some(Action::Command(cmd, arg)),
            };
        }
        let prompt = self.editor.take();
        if self.running() {
            // Sent when the turn ends; the live area shows it meanwhile.
            self.editor.remember(&prompt);
            self.queued.push(prompt);
            return None;
        }
        self.note = None;
        self.print(prompt_lines(&prompt));
        Some(Action::Send(prompt))
    }

    /// One server event at `now`.
    pub fn on_event(&mut self, e: &Event, now: Instant) {
        self.now = Some(now);
        if let Event::Activity(a) = e {
            // A call's end closes its open request: unanswered, it expired (a cancelled
            // turn closes it by its end instead).
            let cancelling = self.live.as_ref().is_some_and(|l| l.cancelling);
            if a.state != ActivityState::Started && self.dialog.is_some() && !cancelling {
                self.expire();
            }
        }
        let Some(live) = &mut self.live else { return };
        if live.apply(e, &mut self.out).is_err() {
            // The turn cannot be trusted any more: the prompt comes back.
            let broke = Line::styled(
                "[the server broke the protocol]",
                Style::new().fg(Color::Red),
            );
            self.out.push(broke);
            self.live = None;
            self.dialog = None;
            return;
        }
        if run_of(e) != live.turn.run_id() {
            return;
        }
        if let Event::ApprovalRequested(a) = e {
            let mut card = live.running_card.take();
            // The counts of the change it proposes, when `tool.diff` showed it.
            if let Some((_, added, removed)) = live
                .proposed
                .take()
                .filter(|(id, _, _)| *id == a.approval_id)
            {
                let shown = card.unwrap_or_else(|| "the change".to_owned());
                card = Some(format!("{shown} +{added} -{removed} (the diff is above)"));
            }
            let ids = (a.run_id.clone(), a.approval_id.clone());
            let summary = printable(&a.summary);
            let expires = Duration::from_millis(a.expires_in_ms);
            self.dialog = Some(Dialog::new(ids, summary, card, now, expires));
            return;
        }
        if let Event::RunFinished(d) = e {
            live.flush(&mut self.out);
            let took = elapsed(now.saturating_duration_since(live.began));
            match (word(&d.outcome).as_str(), &d.error_code) {
                ("completed", _) => self
                    .out
                    .push(Line::styled(format!("─ done in {took}"), dim())),
                ("cancelled", _) => {
                    self.out.push(Line::styled(
                        format!("■ stopped: the turn was cancelled after {took}"),
                        Style::new().fg(Color::Yellow),
                    ));
                }
                (outcome, code) => {
                    let said = code.as_deref().map_or_else(|| "-".to_owned(), said);
                    self.error(&format!("[the turn {outcome}: {said}]"));
                }
            }
            self.out.push(Line::raw(""));
            self.live = None;
            self.dialog = None;
            self.note = None;
            if word(&d.outcome) == "cancelled" {
                self.unqueue();
            }
        }
    }
}

impl ChatApp {
    /// A stopped turn keeps its queued prompts in the editor, unsent.
    fn unqueue(&mut self) {
        if self.queued.is_empty() {
            return;
        }
        let mut text = std::mem::take(&mut self.queued).join("\n");
        let typed = self.editor.take();
        if !typed.is_empty() {
            text = format!("{text}\n{typed}");
        }
        if !self.editor.insert(&text) {
            self.note = Some(TOO_LONG.to_owned());
            return;
        }
        self.note = Some("the turn stopped: the queued prompt is back in the editor".to_owned());
    }
}

/// The prompt as the scrollback shows it.
pub fn prompt_lines(prompt: &str) -> Vec<Line<'static>> {
    let style = Style::new().add_modifier(Modifier::BOLD);
    printable(prompt)
        .split('\n')
        .enumerate()
        .map(|(i, l)| {
            let lead = if i == 0 { "› " } else { "  " };
            Line::from(vec![
                Span::styled(lead, Style::new().fg(Color::Cyan)),
                Span::styled(l.to_owned(), style),
            ])
        })
        .collect()
}

/// `4.2s`, `1m 05s`.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{}.{}s", s, d.subsec_millis() / 100)
    } else {
        format!("{}m {:02}s", s / 60, s % 60)
    }
}
