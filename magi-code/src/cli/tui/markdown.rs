//! A line-oriented Markdown renderer for replies: headings, emphasis, bold, inline code,
//! fenced code blocks (kept verbatim) and lists. Line by line, so a streaming reply renders
//! each line once it is complete and its partial last line with the same state.

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// The renderer's state between lines: inside a fenced code block or not.
#[derive(Clone, Debug, Default)]
pub struct Markdown {
    /// The open fence's marker (```` ``` ```` or `~~~`), inside a code block.
    fence: Option<String>,
}

/// What a tab becomes.
const TAB: &str = "    ";

/// How a code block's lines look.
fn code_style() -> Style {
    Style::new().fg(Color::Cyan)
}

impl Markdown {
    /// Renders one complete source line (no `\n`), updating the fence state.
    pub fn line(&mut self, src: &str) -> Line<'static> {
        // The terminal's buffer drops control characters, a tab included: code indented with
        // tabs would lose its indentation.
        let expanded;
        let src = if src.contains('\t') {
            expanded = src.replace('\t', TAB);
            expanded.as_str()
        } else {
            src
        };
        let trimmed = src.trim_start();
        if let Some(fence) = &self.fence {
            if trimmed.starts_with(fence.as_str()) {
                self.fence = None;
                return Line::styled(src.to_owned(), Style::new().add_modifier(Modifier::DIM));
            }
            return Line::styled(src.to_owned(), code_style());
        }
        for marker in ["```", "~~~"] {
            if trimmed.starts_with(marker) {
                self.fence = Some(marker.to_owned());
                return Line::styled(src.to_owned(), Style::new().add_modifier(Modifier::DIM));
            }
        }
        block(src)
    }

    /// Renders every line of `text` (a trailing newline adds no empty line).
    pub fn lines(&mut self, text: &str) -> Vec<Line<'static>> {
        let text = text.strip_suffix('\n').unwrap_or(text);
        text.split('\n').map(|l| self.line(l)).collect()
    }
}

/// A line outside code blocks: a heading, a list item, a quote or a paragraph line.
fn block(src: &str) -> Line<'static> {
    let indent = src.len() - src.trim_start().len();
    let rest = &src[indent..];
    let hashes = rest.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && rest[hashes..].starts_with(' ') {
        let style = Style::new().add_modifier(Modifier::BOLD).fg(Color::Magenta);
        return Line::from(inline(rest[hashes + 1..].trim(), style));
    }
    let mut spans = vec![Span::raw(" ".repeat(indent))];
    let body = if let Some(item) = ["- ", "* ", "+ "].iter().find_map(|m| rest.strip_prefix(m)) {
        spans.push(Span::styled("• ", Style::new().fg(Color::Yellow)));
        item
    } else if let Some((num, item)) = numbered(rest) {
        spans.push(Span::styled(
            format!("{num}. "),
            Style::new().fg(Color::Yellow),
        ));
        item
    } else if let Some(q) = rest.strip_prefix("> ") {
        spans.push(Span::styled("│ ", Style::new().add_modifier(Modifier::DIM)));
        q
    } else {
        rest
    };
    spans.extend(inline(body, Style::new()));
    Line::from(spans)
}

/// `12. item` as ("12", "item").
fn numbered(s: &str) -> Option<(&str, &str)> {
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let item = s[digits..].strip_prefix(". ")?;
    Some((&s[..digits], item))
}

/// Inline markup: `code`, **bold**, *emphasis* and _emphasis_, on top of `base`.
fn inline(s: &str, base: Style) -> Vec<Span<'static>> {
    let mut spans = Vec::new();
    let mut plain = String::new();
    let mut rest = s;
    while let Some(c) = rest.chars().next() {
        let marked = match c {
            '`' => delimited(rest, "`").map(|(t, n)| (t, n, base.patch(code_style()))),
            '*' if rest.starts_with("**") => {
                delimited(rest, "**").map(|(t, n)| (t, n, base.add_modifier(Modifier::BOLD)))
            }
            '*' | '_' => delimited(rest, &rest[..1])
                .filter(|(t, _)| !t.starts_with(' '))
                .map(|(t, n)| (t, n, base.add_modifier(Modifier::ITALIC))),
            _ => None,
        };
        match marked {
            Some((text, len, style)) => {
                if !plain.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut plain), base));
                }
                spans.push(Span::styled(text.to_owned(), style));
                rest = &rest[len..];
            }
            None => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !plain.is_empty() || spans.is_empty() {
        spans.push(Span::styled(plain, base));
    }
    spans
}

/// The text between `mark` at the start of `s` and its closing `mark`, and the length of the
/// whole marked run; None when it does not close or is empty.
fn delimited<'a>(s: &'a str, mark: &str) -> Option<(&'a str, usize)> {
    let body = &s[mark.len()..];
    let end = body.find(mark)?;
    (end > 0).then(|| (&body[..end], mark.len() * 2 + end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(l: &Line<'_>) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn tabs_become_spaces_so_code_keeps_its_indentation() {
        let mut md = Markdown::default();
        let lines = md.lines("```go\nfunc f() {\n\treturn\n}\n```\n\tindented\n");
        let shown: Vec<String> = lines.iter().map(text).collect();
        assert_eq!(shown[2], "    return");
        assert_eq!(shown[5], "    indented");
    }

    proptest::proptest! {
        /// Any reply, markup or not, renders without a panic, and no tab reaches the buffer.
        #[test]
        fn any_text_renders(src in "[ \t#*_`~0-9.+a-zé漢-]{0,40}") {
            let mut md = Markdown::default();
            for line in md.lines(&src) {
                let shown = text(&line);
                proptest::prop_assert!(!shown.contains('\t'));
            }
        }
    }

    #[test]
    fn lists_headings_and_inline_marks_render() {
        let mut md = Markdown::default();
        let lines = md.lines("# Plan\n- one **two**\n2. `x` and *y*\n");
        let shown: Vec<String> = lines.iter().map(text).collect();
        assert_eq!(shown, ["Plan", "• one two", "2. x and y"]);
        let bold = &lines[1].spans[3];
        assert_eq!(bold.content, "two");
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        let (code, em) = (&lines[2].spans[2], &lines[2].spans[4]);
        assert_eq!(
            (code.content.as_ref(), code.style.fg),
            ("x", Some(Color::Cyan))
        );
        assert_eq!(em.content, "y");
        assert!(em.style.add_modifier.contains(Modifier::ITALIC));
    }

    #[test]
    fn a_code_block_is_kept_verbatim() {
        let mut md = Markdown::default();
        let lines = md.lines("```rust\nlet *a* = `b`;\n```\n- after");
        let shown: Vec<String> = lines.iter().map(text).collect();
        assert_eq!(shown, ["```rust", "let *a* = `b`;", "```", "• after"]);
        assert_eq!(lines[1].style.fg, Some(Color::Cyan));
    }

    #[test]
    fn unclosed_marks_stay_plain() {
        let mut md = Markdown::default();
        assert_eq!(text(&md.line("2 * 3 and `x")), "2 * 3 and `x");
    }
}
