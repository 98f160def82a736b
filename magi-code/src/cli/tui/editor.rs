//! The prompt editor: a multi-line buffer with a cursor, editing keys and a history of the
//! prompts sent.

use unicode_width::UnicodeWidthChar;

/// The most UTF-8 bytes a prompt may have (the protocol's bound on `turn.start`'s prompt).
pub const MAX_BYTES: usize = protocol_core::limits::PROMPT_BYTES;

/// The text being typed, its cursor and the history Up/Down walk.
#[derive(Debug, Default)]
pub struct Editor {
    /// The buffer's characters (a `Vec<char>` so the cursor is an index, never mid-UTF-8).
    text: Vec<char>,
    cursor: usize,
    history: Vec<String>,
    /// The history entry shown, while walking it; the draft it replaced.
    walk: Option<(usize, String)>,
}

impl Editor {
    /// The buffer as a string.
    pub fn text(&self) -> String {
        self.text.iter().collect()
    }

    /// The cursor as (line, column) in characters.
    pub fn cursor(&self) -> (usize, usize) {
        let before = &self.text[..self.cursor];
        let line = before.iter().filter(|c| **c == '\n').count();
        let col = before.iter().rev().take_while(|c| **c != '\n').count();
        (line, col)
    }

    /// Inserts `s` at the cursor (a paste keeps its newlines; CR and CRLF become LF), as much
    /// of it as keeps the buffer within [`MAX_BYTES`]; false when some was left out.
    pub fn insert(&mut self, s: &str) -> bool {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        let mut room = MAX_BYTES.saturating_sub(self.text.iter().map(|c| c.len_utf8()).sum());
        let mut all = true;
        let add: Vec<char> = s
            .chars()
            .filter(|c| !c.is_control() || matches!(c, '\n' | '\t'))
            .take_while(|c| {
                all = c.len_utf8() <= room;
                room = room.saturating_sub(c.len_utf8());
                all
            })
            .collect();
        let n = add.len();
        // One splice: a long paste in mid-text moves the tail once, not once a character.
        self.text.splice(self.cursor..self.cursor, add);
        self.cursor += n;
        all
    }

    /// Ctrl-U: deletes from the start of the line to the cursor.
    pub fn kill_to_start(&mut self) {
        let end = self.cursor;
        self.home();
        self.text.drain(self.cursor..end);
    }

    /// Ctrl-K: deletes from the cursor to the end of the line.
    pub fn kill_to_end(&mut self) {
        let start = self.cursor;
        self.end();
        self.text.drain(start..self.cursor);
        self.cursor = start;
    }

    /// Ctrl-W: deletes the word before the cursor (and the blanks after it).
    pub fn delete_word(&mut self) {
        let end = self.cursor;
        self.word_left();
        self.text.drain(self.cursor..end);
    }

    /// Ctrl-Left or Alt-b: to the start of the word before the cursor.
    pub fn word_left(&mut self) {
        while self.cursor > 0 && self.text[self.cursor - 1].is_whitespace() {
            self.cursor -= 1;
        }
        while self.cursor > 0 && !self.text[self.cursor - 1].is_whitespace() {
            self.cursor -= 1;
        }
    }

    /// Ctrl-Right or Alt-f: past the end of the word after the cursor.
    pub fn word_right(&mut self) {
        let n = self.text.len();
        while self.cursor < n && self.text[self.cursor].is_whitespace() {
            self.cursor += 1;
        }
        while self.cursor < n && !self.text[self.cursor].is_whitespace() {
            self.cursor += 1;
        }
    }

    /// Deletes the character before the cursor.
    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            self.cursor -= 1;
            self.text.remove(self.cursor);
        }
    }

    /// Deletes the character under the cursor.
    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    /// The buffer soft-wrapped to rows of at most `width` display columns (a tab shown as
    /// one space), and the cursor's (row, column).
    pub fn rows(&self, width: usize) -> (Vec<String>, (usize, usize)) {
        let width = width.max(2);
        let mut rows = vec![String::new()];
        let (mut col, mut at) = (0, None);
        for (i, &c) in self.text.iter().enumerate() {
            let c = if c == '\t' { ' ' } else { c };
            let w = if c == '\n' { 0 } else { c.width().unwrap_or(0) };
            if col + w > width {
                rows.push(String::new());
                col = 0;
            }
            if i == self.cursor {
                at = Some((rows.len() - 1, col));
            }
            if c == '\n' {
                rows.push(String::new());
                col = 0;
                continue;
            }
            if let Some(row) = rows.last_mut() {
                row.push(c);
            }
            col += w;
        }
        // At the end of a full row the cursor begins the next one.
        let at = at.unwrap_or_else(|| {
            if col >= width {
                rows.push(String::new());
                col = 0;
            }
            (rows.len() - 1, col)
        });
        (rows, at)
    }

    /// Moves the cursor one character left.
    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    /// Moves the cursor one character right.
    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.text.len());
    }

    /// Moves the cursor to the start of its line.
    pub fn home(&mut self) {
        while self.cursor > 0 && self.text[self.cursor - 1] != '\n' {
            self.cursor -= 1;
        }
    }

    /// Moves the cursor to the end of its line.
    pub fn end(&mut self) {
        while self.cursor < self.text.len() && self.text[self.cursor] != '\n' {
            self.cursor += 1;
        }
    }

    /// Up: the previous line of a multi-line buffer, else the previous prompt sent.
    pub fn up(&mut self) {
        let (line, col) = self.cursor();
        if line > 0 {
            self.home();
            self.left();
            self.home();
            self.advance(col);
            return;
        }
        let next = match &self.walk {
            Some((i, _)) => i.checked_sub(1),
            None => self.history.len().checked_sub(1),
        };
        if let Some(i) = next {
            let draft = self.walk.take().map_or_else(|| self.text(), |(_, d)| d);
            self.walk = Some((i, draft));
            self.set(&self.history[i].clone());
        }
    }

    /// Down: the next line of a multi-line buffer, else the next prompt (then the draft).
    pub fn down(&mut self) {
        let (line, col) = self.cursor();
        if line < self.text.iter().filter(|c| **c == '\n').count() {
            self.end();
            self.right();
            self.advance(col);
            return;
        }
        if let Some((i, draft)) = self.walk.take() {
            if i + 1 < self.history.len() {
                self.walk = Some((i + 1, draft));
                self.set(&self.history[i + 1].clone());
            } else {
                self.set(&draft);
            }
        }
    }

    /// Moves right by at most `n` characters within the line.
    fn advance(&mut self, n: usize) {
        for _ in 0..n {
            if self.cursor >= self.text.len() || self.text[self.cursor] == '\n' {
                break;
            }
            self.cursor += 1;
        }
    }

    fn set(&mut self, s: &str) {
        self.text = s.chars().collect();
        self.cursor = self.text.len();
    }

    /// Takes the buffer (Enter): it joins the history when not blank.
    pub fn take(&mut self) -> String {
        let s = self.text();
        self.set("");
        self.walk = None;
        self.remember(&s);
        s
    }

    /// Adds a prompt to the history (a reopened session's earlier prompts).
    pub fn remember(&mut self, prompt: &str) {
        if !prompt.trim().is_empty() && self.history.last().map(String::as_str) != Some(prompt) {
            self.history.push(prompt.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_the_width_and_the_cursor_follows() {
        let mut e = Editor::default();
        e.insert("abcdefgh");
        let (rows, at) = e.rows(3);
        assert_eq!(rows, ["abc", "def", "gh"]);
        assert_eq!(at, (2, 2));
        // A full last row puts the cursor on a new one.
        e.backspace();
        e.backspace();
        assert_eq!(e.rows(3).1, (2, 0));
        // Wide characters take two columns; a new line starts a row of the prompt.
        let mut e = Editor::default();
        e.insert("漢字漢\nx");
        let (rows, at) = e.rows(4);
        assert_eq!(rows, ["漢字", "漢", "x"]);
        assert_eq!(at, (2, 1));
        e.home();
        e.up();
        assert_eq!(e.rows(4).1, (0, 0));
    }

    #[test]
    fn line_and_word_keys_delete_and_move() {
        let mut e = Editor::default();
        e.insert("one two  three");
        e.delete_word();
        assert_eq!(e.text(), "one two  ");
        e.word_left();
        assert_eq!(e.cursor(), (0, 4));
        e.kill_to_end();
        assert_eq!(e.text(), "one ");
        e.insert("x\nsecond line");
        e.word_left();
        e.kill_to_start();
        assert_eq!(e.text(), "one x\nline");
        assert_eq!(e.cursor(), (1, 0));
        e.word_right();
        assert_eq!(e.cursor(), (1, 4));
    }

    #[test]
    fn the_buffer_holds_at_most_the_prompt_bound() {
        let mut e = Editor::default();
        assert!(e.insert(&"a".repeat(MAX_BYTES - 2)));
        // A two-byte character fits exactly; the next byte does not.
        assert!(e.insert("é"));
        assert!(!e.insert("b"));
        assert_eq!(e.text().len(), MAX_BYTES);
        e.backspace();
        // A paste is cut at the bound, never mid-character.
        assert!(!e.insert("xé"));
        assert_eq!(e.text().len(), MAX_BYTES - 1);
        assert!(e.text().ends_with('x'));
    }

    #[test]
    fn cursor_keys_edit_in_place() {
        let mut e = Editor::default();
        e.insert("helo");
        e.left();
        e.insert("l");
        e.home();
        e.delete();
        e.insert("H");
        e.end();
        e.backspace();
        assert_eq!(e.text(), "Hell");
        assert_eq!(e.cursor(), (0, 4));
    }

    #[test]
    fn a_paste_is_one_multi_line_prompt() {
        let mut e = Editor::default();
        e.insert("one\r\ntwo\nthree");
        assert_eq!(e.cursor(), (2, 5));
        e.up();
        assert_eq!(e.cursor(), (1, 3));
        assert_eq!(e.take(), "one\ntwo\nthree");
        assert_eq!(e.text(), "");
    }

    #[test]
    fn up_and_down_walk_the_history_and_restore_the_draft() {
        let mut e = Editor::default();
        e.insert("first");
        e.take();
        e.insert("second");
        e.take();
        e.insert("draft");
        e.up();
        assert_eq!(e.text(), "second");
        e.up();
        assert_eq!(e.text(), "first");
        e.up();
        assert_eq!(e.text(), "first");
        e.down();
        assert_eq!(e.text(), "second");
        e.down();
        assert_eq!(e.text(), "draft");
    }
}
