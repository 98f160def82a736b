//! Draws the live area: the running turn's tools and partial line, the approval dialog, a
//! note, the prompt editor and the status line, bottom up.

use super::app::{elapsed, ChatApp};
use super::live::{dim, tool_line};
use ratatui::layout::{Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Paragraph, Wrap};
use ratatui::Frame;
use std::time::{Duration, Instant};

/// The running glyph's frames, one per 100 ms of the turn.
const SPINNER: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/// Most editor lines shown (the cursor's line stays visible).
const EDITOR_LINES: usize = 6;

impl ChatApp {
    /// Draws the live area into `frame`, top down: the running turn, the dialog, a note,
    /// the editor and the status line, so the cursor sits right under the conversation.
    pub fn render(&self, frame: &mut Frame<'_>) {
        let now = self.now.unwrap_or_else(Instant::now);
        let area = frame.area();
        let (editor, (row, col)) = self.editor_lines(area.width);
        let dialog = self.dialog_lines(now);
        let note = self.note.iter().count();
        let fixed = editor.len() + dialog.as_ref().map_or(0, |d| d.len() + 2) + note + 1;
        let turn: Vec<Line<'static>> = self
            .turn_lines(now)
            .into_iter()
            .flat_map(|l| wrap(l, area.width))
            .collect();
        let room = usize::from(area.height).saturating_sub(fixed);
        let turn = &turn[turn.len().saturating_sub(room)..];
        let mut y = area.y;
        let mut take = |h: usize| {
            let h = (h as u16).min(area.bottom().saturating_sub(y));
            let r = Rect {
                y,
                height: h,
                ..area
            };
            y += h;
            r
        };
        frame.render_widget(Paragraph::new(turn.to_vec()), take(turn.len()));
        let mut cursor = None;
        if let Some(lines) = dialog {
            let r = take(lines.len() + 2);
            let block = Block::bordered()
                .title(" approval ")
                .border_style(Style::new().fg(Color::Yellow));
            frame.render_widget(
                Paragraph::new(lines)
                    .block(block)
                    .wrap(Wrap { trim: false }),
                r,
            );
            let field = self.dialog.as_ref().map_or(0, |d| d.field.chars().count()) as u16;
            let x = (r.x + 9 + field).min(r.right().saturating_sub(2));
            cursor = Some(Position::new(x, r.bottom().saturating_sub(2)));
        }
        if let Some(note) = &self.note {
            let line = Line::styled(note.clone(), Style::new().fg(Color::Yellow));
            frame.render_widget(Paragraph::new(line), take(1));
        }
        let r = take(editor.len());
        frame.render_widget(Paragraph::new(editor), r);
        let x = (r.x + 2 + col as u16).min(r.right().saturating_sub(1));
        let pos = Position::new(x, r.y + row as u16);
        let reverse = Style::new().add_modifier(Modifier::REVERSED);
        frame.render_widget(
            Paragraph::new(self.status_line(now, area.width)).style(reverse),
            take(1),
        );
        frame.set_cursor_position(cursor.unwrap_or(pos));
    }

    /// The dialog's lines inside its border.
    fn dialog_lines(&self, now: Instant) -> Option<Vec<Line<'static>>> {
        let d = self.dialog.as_ref()?;
        let mut lines = vec![Line::from(vec![
            Span::raw("Allow "),
            Span::styled(d.summary.clone(), Style::new().add_modifier(Modifier::BOLD)),
            Span::raw("?"),
        ])];
        if let Some(card) = &d.card {
            lines.push(Line::styled(
                format!("  {card}"),
                Style::new().fg(Color::Cyan),
            ));
        }
        let left = d.seconds_left(now);
        let ask = format!("y/yes or n/no, then Enter · expires in {left}s");
        lines.push(Line::styled(ask, dim()));
        if let Some(hint) = &d.hint {
            lines.push(Line::styled(hint.clone(), Style::new().fg(Color::Yellow)));
        }
        lines.push(Line::raw(format!("answer› {}", d.field)));
        Some(lines)
    }

    /// The editor's rows around the cursor, soft-wrapped to `width`, and the cursor's
    /// (row among them, column).
    fn editor_lines(&self, width: u16) -> (Vec<Line<'static>>, (usize, usize)) {
        let (rows, (row, col)) = self.editor.rows(usize::from(width).saturating_sub(3));
        let first = (row + 1).saturating_sub(EDITOR_LINES);
        let lead = Style::new().fg(Color::Cyan);
        let shown = rows[first..rows.len().min(first + EDITOR_LINES)]
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let mark = if first + i == 0 { "› " } else { "  " };
                Line::from(vec![Span::styled(mark, lead), Span::raw(text.clone())])
            })
            .collect();
        (shown, (row - first, col))
    }

    /// The running tools and the reply's partial line.
    fn turn_lines(&self, now: Instant) -> Vec<Line<'static>> {
        let Some(live) = &self.live else {
            return Vec::new();
        };
        let glyph = spinner(now.saturating_duration_since(live.began));
        let mut lines: Vec<Line<'static>> = live
            .tools
            .iter()
            .map(|t| tool_line(glyph, Color::Cyan, &t.label))
            .collect();
        lines.extend(live.partial());
        for q in &self.queued {
            let first = q.lines().next().unwrap_or_default();
            let more = if q.lines().nth(1).is_some() {
                " …"
            } else {
                ""
            };
            lines.push(Line::from(vec![
                Span::styled("queued › ", Style::new().fg(Color::Cyan)),
                Span::styled(format!("{first}{more}"), dim()),
                Span::styled("  (sent when the turn ends)", dim()),
            ]));
        }
        lines
    }

    /// Model, effort, title, the turn's elapsed time and how to stop it, fitted into
    /// `width` columns: the title is shortened first, then the hint, the effort and the
    /// title go, in that order; the model and a running turn's time stay.
    fn status_line(&self, now: Instant, width: u16) -> Line<'static> {
        let info = &self.info;
        let model = info.model.clone().unwrap_or_else(|| "no model".to_owned());
        let effort = format!("effort {}", info.effort.as_deref().unwrap_or("default"));
        let title = info.title.clone().unwrap_or_else(|| "untitled".to_owned());
        let (time, hint) = match &self.live {
            Some(live) => {
                let took = now.saturating_duration_since(live.began);
                let stop = if live.cancelling {
                    "stopping…"
                } else {
                    "Ctrl-C to stop"
                };
                (
                    Some(format!("{} {}", spinner(took), elapsed(took))),
                    stop.to_owned(),
                )
            }
            None => (None, "/help for commands".to_owned()),
        };
        Line::raw(fit_status(
            &model,
            &effort,
            &title,
            time.as_deref(),
            &hint,
            usize::from(width),
        ))
    }
}

/// The status line's text in at most `width` columns (see [`ChatApp::status_line`]).
pub fn fit_status(
    model: &str,
    effort: &str,
    title: &str,
    time: Option<&str>,
    hint: &str,
    width: usize,
) -> String {
    let cols = |s: &str| Span::raw(s.to_owned()).width();
    let join = |title: Option<&str>, effort_on: bool, hint_on: bool| {
        let mut parts = vec![model];
        if effort_on {
            parts.push(effort);
        }
        parts.extend(title);
        parts.extend(time);
        if hint_on {
            parts.push(hint);
        }
        format!(" {}", parts.join(" · "))
    };
    let whole = join(Some(title), true, true);
    if cols(&whole) <= width {
        return whole;
    }
    // The title shortened to what is left, with an ellipsis, if a few characters fit.
    let room = width.saturating_sub(cols(&join(Some(""), true, true)));
    if room >= 8 {
        let mut short = String::new();
        for c in title.chars() {
            if cols(&short) + cols(&c.to_string()) + 1 > room {
                break;
            }
            short.push(c);
        }
        short.push('…');
        return join(Some(&short), true, true);
    }
    for s in [join(None, true, true), join(None, true, false)] {
        if cols(&s) <= width {
            return s;
        }
    }
    join(None, false, false).chars().take(width).collect()
}

/// Splits `line` into rows of at most `width` columns (the scrollback needs exact heights,
/// and the live area counts its rows).
pub fn wrap(line: Line<'static>, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width.max(1));
    if line.width() <= width {
        return vec![line];
    }
    let mut rows = vec![Line::default().style(line.style)];
    let mut used = 0;
    for span in line.spans {
        for c in span.content.chars() {
            let w = Span::raw(c.to_string()).width();
            if used + w > width {
                rows.push(Line::default().style(line.style));
                used = 0;
            }
            if let Some(row) = rows.last_mut() {
                row.spans.push(Span::styled(c.to_string(), span.style));
            }
            used += w;
        }
    }
    rows
}

/// The running glyph `took` into a turn.
fn spinner(took: Duration) -> &'static str {
    SPINNER[(took.as_millis() / 100 % SPINNER.len() as u128) as usize]
}
