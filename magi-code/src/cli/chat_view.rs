//! What `magi-code chat` prints for a turn: the terminal's style, the screen's cursor state,
//! tool card lines, and Code Mode cells shown as one block (`docs/code-mode.md`, "In
//! `magi-code chat`").

pub use crate::client::next_page;
use crate::wire::events::{ActivityData, ActivityKind, ActivityState};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use std::io::Write;

/// The waiting indicator's frames.
const SPINNER: [char; 4] = ['|', '/', '-', '\\'];
/// How a nested call's summary starts (`code-mode.md` 6).
const NESTED: &str = "code: ";
/// How far a cell's nested lines sit under its header.
const INDENT: &str = "  ";

/// What the terminal can show.
pub struct Style {
    /// Stdout is a terminal (the waiting indicator may show).
    pub tty: bool,
    /// Escapes may colour the output (a terminal, and `NO_COLOR` unset or empty).
    pub color: bool,
}

impl Style {
    /// `s` dimmed, when colour is on.
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }

    /// `s` in red, when colour is on.
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }

    fn paint(&self, sgr: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{sgr}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }
}

/// Text from the server as the terminal may show it: no control characters but LF and tab,
/// so a reply cannot move the cursor or recolour the terminal.
pub fn printable(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
        .collect()
}

fn field<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_default()
}

/// A wire enum's spelling (`completed`, `started` …).
pub fn word(v: &impl Serialize) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// A finished `tool.cards` card as one line under its activity: the command and its exit
/// code, a file's line counts, matches found. Running cards show nothing (the activity did).
pub fn card_line(card: &Value) -> Option<String> {
    let count = |k: &str| card[k].as_u64();
    let status = field(card, "status");
    let text = match field(card, "kind") {
        _ if status == "running" || status.is_empty() => return None,
        "command" => {
            let code = card["exit_code"]
                .as_i64()
                .map_or_else(|| "no exit code".to_owned(), |c| format!("exit {c}"));
            let took = count("duration_ms").map_or_else(String::new, |ms| format!(", {ms} ms"));
            format!("$ {} → {code}{took}", field(card, "command"))
        }
        "file_edit" => format!(
            "{} +{} -{}",
            field(card, "path"),
            count("added").unwrap_or(0),
            count("removed").unwrap_or(0)
        ),
        "file_read" => match count("lines") {
            Some(n) => format!("{}: {n} lines", field(card, "path")),
            None => format!("{}: {status}", field(card, "path")),
        },
        "search" => match count("matches") {
            Some(n) => format!("{}: {n} matches", field(card, "title")),
            None => format!("{}: {status}", field(card, "title")),
        },
        _ => format!("{}: {status}", field(card, "title")),
    };
    Some(format!("  {text}"))
}

/// Flushes stdout (a terminal that went away has nothing left to show).
pub fn flush() {
    let _ = std::io::stdout().flush();
}

/// What a running turn has shown.
pub struct Screen {
    /// The cursor is not at the start of a line.
    pub mid_line: bool,
    /// Anything but the waiting indicator was shown.
    pub produced: bool,
    /// The indicator frame on screen, if any.
    spinner: Option<usize>,
}

impl Screen {
    /// A turn's screen, right after its `magi> ` prompt.
    pub fn new() -> Self {
        Self {
            mid_line: true,
            produced: false,
            spinner: None,
        }
    }

    /// Takes the waiting indicator off the screen.
    pub fn clear(&mut self) {
        if self.spinner.take().is_some() {
            print!("\x08 \x08");
        }
    }

    /// Clears the indicator and starts a new line unless at one.
    pub fn line_start(&mut self) {
        self.clear();
        if self.mid_line {
            println!();
            self.mid_line = false;
        }
    }

    /// Prints reply text where the cursor is.
    pub fn show(&mut self, text: &str) {
        if !text.is_empty() {
            self.mid_line = !text.ends_with('\n');
        }
        print!("{text}");
        flush();
    }

    /// Shows the next frame of the waiting indicator.
    pub fn tick(&mut self) {
        let k = self.spinner.map_or(0, |k| (k + 1) % SPINNER.len());
        if self.spinner.is_some() {
            print!("\x08");
        }
        print!("{}", SPINNER[k]);
        flush();
        self.spinner = Some(k);
    }
}

/// The Code Mode cells of one turn. While an `exec` activity is open its cell is one block:
/// a header line when it starts, one indented line per nested call when that call ends (its
/// card beneath it), approvals for nested calls indented too, and the `exec`'s final state as
/// the block's last line. Nothing else changes.
#[derive(Default)]
pub struct Cells {
    /// The open `exec` activity.
    open: Option<String>,
    /// Every `exec` activity of the turn: their own generic card repeats the final line.
    execs: HashSet<String>,
    /// The nested activities of the open cell, whose cards go beneath them.
    nested: HashSet<String>,
}

impl Cells {
    /// The line shown for activity `a`, if any (a nested call shows none when it starts).
    pub fn activity(&mut self, a: &ActivityData) -> Option<String> {
        let state = word(&a.state);
        let nested = matches!(a.kind, ActivityKind::Tool | ActivityKind::Subagent)
            && self.open.is_some()
            && a.summary.starts_with(NESTED);
        if nested {
            self.nested.insert(a.activity_id.clone());
            if a.state == ActivityState::Started {
                return None;
            }
            let summary = &a.summary[NESTED.len()..];
            return Some(format!("{INDENT}[{} {state}: {summary}]", a.name));
        }
        if a.kind == ActivityKind::Tool && a.name == "exec" {
            self.execs.insert(a.activity_id.clone());
            if a.state == ActivityState::Started {
                self.open = Some(a.activity_id.clone());
                self.nested.clear();
                return Some(format!("[{}]", a.summary));
            }
            if self.open.as_ref() == Some(&a.activity_id) {
                self.open = None;
            }
        }
        Some(format!("[{} {state}: {}]", a.name, a.summary))
    }

    /// The line shown for `card` of activity `id`, if any: a nested call's sits under it.
    pub fn card(&self, id: &str, card: &Value) -> Option<String> {
        if self.execs.contains(id) {
            return None;
        }
        let line = card_line(card)?;
        if self.nested.contains(id) {
            Some(format!("{INDENT}{line}"))
        } else {
            Some(line)
        }
    }

    /// The indent of an approval prompt for `summary`: inside the open cell for a nested call.
    pub fn approval_indent(&self, summary: &str) -> &'static str {
        if self.open.is_some() && summary.starts_with(NESTED) {
            INDENT
        } else {
            ""
        }
    }
}
