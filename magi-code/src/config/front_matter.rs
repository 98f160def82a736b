//! The YAML front matter of profile and skill files (`runner.md` 7): a strict parser, sans-IO,
//! for the subset they need. The file starts with a `---` line; YAML runs to the next `---`
//! line. Supported: `key: value` scalars (plain, `'single'` or `"double"` quoted, plain ones
//! folded over indented continuation lines), flow lists `[a, "b"]`, block lists of `- a`
//! lines, and `#` comments. A key whose block is anything else (a nested mapping) is kept as
//! [`Value::Nested`], so unknown keys never fail a file; reading it as text or a list does.

use std::collections::BTreeMap;

/// Most keys in one front matter.
pub const MAX_KEYS: usize = 64;
/// Most items in one list.
pub const MAX_ITEMS: usize = 256;

/// Why a front matter does not parse (never echoes the input).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bad(pub &'static str);

/// One key's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A scalar's text (empty for `key:` with nothing under it).
    Text(String),
    /// A flow or block list of scalars.
    List(Vec<String>),
    /// Something this subset does not read (a nested mapping, a block scalar).
    Nested,
}

/// A parsed file: its front matter keys and the text after the closing `---` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// The keys in the front matter.
    pub keys: BTreeMap<String, Value>,
    /// The body (invalid UTF-8 becomes U+FFFD).
    pub body: String,
}

impl Doc {
    /// The text of `key`: absent → `Ok(None)`; a list or nested block → error.
    pub fn text(&self, key: &str) -> Result<Option<&str>, Bad> {
        match self.keys.get(key) {
            None => Ok(None),
            Some(Value::Text(t)) => Ok(Some(t)),
            Some(_) => Err(Bad("not a scalar")),
        }
    }

    /// The list of `key`: absent → `Ok(None)`; a scalar or nested block → error.
    pub fn list(&self, key: &str) -> Result<Option<&[String]>, Bad> {
        match self.keys.get(key) {
            None => Ok(None),
            Some(Value::List(l)) => Ok(Some(l)),
            Some(_) => Err(Bad("not a list")),
        }
    }
}

/// Whether `line` (without its newline) is a `---` delimiter.
fn is_delimiter(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Splits off the first line: (line without `\n`/`\r\n`, rest).
fn split_line(s: &str) -> (&str, &str) {
    let (line, rest) = s.split_once('\n').unwrap_or((s, ""));
    (line.strip_suffix('\r').unwrap_or(line), rest)
}

/// Parses a file's bytes.
pub fn parse(bytes: &[u8]) -> Result<Doc, Bad> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Only the front matter must be UTF-8: the body may have been cut by a read bound.
    let (first, _) = split_line_bytes(bytes);
    if first.strip_suffix(b"\r").unwrap_or(first).trim_ascii_end() != b"---" {
        return Err(Bad("no front matter"));
    }
    let mut pos = first.len() + 1;
    let mut lines = Vec::new();
    loop {
        if pos > bytes.len() {
            return Err(Bad("unclosed front matter"));
        }
        let (raw, _) = split_line_bytes(&bytes[pos..]);
        let line = std::str::from_utf8(raw).map_err(|_| Bad("not UTF-8"))?;
        let (line, _) = split_line(line);
        pos += raw.len() + 1;
        if is_delimiter(line) {
            break;
        }
        lines.push(line);
    }
    let body = bytes.get(pos..).unwrap_or_default();
    Ok(Doc {
        keys: keys(&lines)?,
        body: String::from_utf8_lossy(body).into_owned(),
    })
}

/// (the bytes before the first `\n`, whether that was the end).
fn split_line_bytes(b: &[u8]) -> (&[u8], bool) {
    match b.iter().position(|&c| c == b'\n') {
        Some(i) => (&b[..i], false),
        None => (b, true),
    }
}

fn is_comment_or_blank(line: &str) -> bool {
    let t = line.trim_start();
    t.is_empty() || t.starts_with('#')
}

fn is_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A block list item: `- x` (any indentation), its scalar text.
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t == "-" {
        return Some("");
    }
    t.strip_prefix("- ")
}

/// The key/value lines, between the delimiters.
fn keys(lines: &[&str]) -> Result<BTreeMap<String, Value>, Bad> {
    let mut out = BTreeMap::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if is_comment_or_blank(line) {
            continue;
        }
        if line.starts_with([' ', '\t']) || line.starts_with('-') {
            return Err(Bad("stray indented line"));
        }
        let (key, rest) = line.split_once(':').ok_or(Bad("not key: value"))?;
        if !is_key(key) || !(rest.is_empty() || rest.starts_with([' ', '\t'])) {
            return Err(Bad("bad key"));
        }
        // The block under the key: its indented and `- ` lines.
        let start = i;
        while i < lines.len()
            && (lines[i].starts_with([' ', '\t'])
                || list_item(lines[i]).is_some()
                || lines[i].trim().is_empty()
                || lines[i].trim_start().starts_with('#') && lines[i].starts_with([' ', '\t']))
        {
            i += 1;
        }
        let block: Vec<&str> = lines[start..i]
            .iter()
            .copied()
            .filter(|l| !is_comment_or_blank(l))
            .collect();
        let value = value(rest.trim(), &block)?;
        if out.insert(key.to_owned(), value).is_some() {
            return Err(Bad("duplicate key"));
        }
        if out.len() > MAX_KEYS {
            return Err(Bad("too many keys"));
        }
    }
    Ok(out)
}

/// The value of one key from the text after its colon and its block.
fn value(inline: &str, block: &[&str]) -> Result<Value, Bad> {
    if inline.is_empty() || inline.starts_with('#') {
        if block.is_empty() {
            return Ok(Value::Text(String::new()));
        }
        let items: Option<Vec<&str>> = block.iter().map(|l| list_item(l)).collect();
        return match items {
            Some(items) => {
                if items.len() > MAX_ITEMS {
                    return Err(Bad("too many items"));
                }
                let items = items
                    .into_iter()
                    .map(|t| scalar_with_comment(t.trim()))
                    .collect::<Result<_, _>>()?;
                Ok(Value::List(items))
            }
            None => Ok(Value::Nested),
        };
    }
    if inline.starts_with(['|', '>', '{', '&', '*', '!']) {
        return Ok(Value::Nested);
    }
    if let Some(inner) = inline.strip_prefix('[') {
        if !block.is_empty() {
            return Err(Bad("multi-line flow list"));
        }
        return flow_list(inner).map(Value::List);
    }
    if inline.starts_with(['"', '\'']) {
        if !block.is_empty() {
            return Err(Bad("multi-line quoted scalar"));
        }
        return scalar_with_comment(inline).map(Value::Text);
    }
    // A plain scalar folds over its continuation lines (one space each), as YAML does.
    let mut text = plain(inline)?.to_owned();
    for l in block {
        if !l.starts_with([' ', '\t']) {
            return Err(Bad("list after a scalar"));
        }
        text.push(' ');
        text.push_str(plain(l.trim())?);
    }
    Ok(Value::Text(text))
}

/// A plain scalar without its trailing ` # comment`.
fn plain(s: &str) -> Result<&str, Bad> {
    let cut = s
        .find(" #")
        .or_else(|| s.find("\t#"))
        .map_or(s, |i| &s[..i]);
    let cut = cut.trim_end();
    if cut.contains(": ") || cut.ends_with(':') {
        return Err(Bad("mapping in a scalar"));
    }
    Ok(cut)
}

/// One scalar, quoted or plain, then nothing but an optional comment.
fn scalar_with_comment(s: &str) -> Result<String, Bad> {
    if s.starts_with(['"', '\'']) {
        let (text, rest) = quoted(s)?;
        let rest = rest.trim_start();
        if rest.is_empty() || rest.starts_with('#') {
            return Ok(text);
        }
        return Err(Bad("text after a quoted scalar"));
    }
    if s.starts_with(['[', '{', '|', '>', '&', '*', '!']) {
        return Err(Bad("unsupported scalar"));
    }
    plain(s).map(str::to_owned)
}

/// A quoted scalar at the start of `s`: (its text, what follows the closing quote).
fn quoted(s: &str) -> Result<(String, &str), Bad> {
    let mut chars = s.char_indices();
    let Some((_, q)) = chars.next() else {
        return Err(Bad("empty"));
    };
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match (q, c) {
            ('\'', '\'') => {
                if s[i + 1..].starts_with('\'') {
                    chars.next();
                    out.push('\'');
                } else {
                    return Ok((out, &s[i + 1..]));
                }
            }
            ('"', '"') => return Ok((out, &s[i + 1..])),
            ('"', '\\') => {
                let (_, e) = chars.next().ok_or(Bad("bad escape"))?;
                out.push(match e {
                    'n' => '\n',
                    't' => '\t',
                    'r' => '\r',
                    '0' => '\0',
                    '"' | '\\' | '/' => e,
                    _ => return Err(Bad("bad escape")),
                });
            }
            _ => out.push(c),
        }
    }
    Err(Bad("unclosed quote"))
}

/// The items of a flow list, `inner` being the text after its `[`.
fn flow_list(inner: &str) -> Result<Vec<String>, Bad> {
    let mut items = Vec::new();
    let mut rest = inner.trim_start();
    if let Some(after) = rest.strip_prefix(']') {
        return end_of_flow(after).map(|()| items);
    }
    loop {
        let (item, after) = if rest.starts_with(['"', '\'']) {
            quoted(rest)?
        } else {
            let end = rest.find([',', ']']).ok_or(Bad("unclosed flow list"))?;
            let t = rest[..end].trim();
            if t.is_empty() || t.starts_with(['[', '{', '#', '&', '*', '!', '|', '>']) {
                return Err(Bad("bad flow item"));
            }
            (plain(t)?.to_owned(), &rest[end..])
        };
        items.push(item);
        if items.len() > MAX_ITEMS {
            return Err(Bad("too many items"));
        }
        let after = after.trim_start();
        if let Some(a) = after.strip_prefix(',') {
            rest = a.trim_start();
        } else if let Some(a) = after.strip_prefix(']') {
            return end_of_flow(a).map(|()| items);
        } else {
            return Err(Bad("bad flow list"));
        }
    }
}

fn end_of_flow(after: &str) -> Result<(), Bad> {
    let t = after.trim_start();
    if t.is_empty() || t.starts_with('#') {
        Ok(())
    } else {
        Err(Bad("text after a flow list"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(src: &str) -> BTreeMap<String, Value> {
        parse(src.as_bytes()).unwrap().keys
    }

    fn text(v: &str) -> Value {
        Value::Text(v.to_owned())
    }

    fn list(v: &[&str]) -> Value {
        Value::List(v.iter().map(|s| (*s).to_owned()).collect())
    }

    #[test]
    fn scalars_plain_and_quoted_with_comments() {
        let k = keys(
            "---\n# a comment\nname: reviewer # trailing\nsingle: 'it''s: ok'\n\
             double: \"a \\\"b\\\"\\n\" # c\nempty:\nfolded: one\n  two\n---\nbody\n",
        );
        assert_eq!(k["name"], text("reviewer"));
        assert_eq!(k["single"], text("it's: ok"));
        assert_eq!(k["double"], text("a \"b\"\n"));
        assert_eq!(k["empty"], text(""));
        assert_eq!(k["folded"], text("one two"));
    }

    #[test]
    fn flow_and_block_lists() {
        let k = keys(
            "---\na: [read_file, \"grep\", 'x, y']\nb: []\nc:\n  - one\n  - 'two'\n- three\nd: [ ]\n---\n",
        );
        assert_eq!(k["a"], list(&["read_file", "grep", "x, y"]));
        assert_eq!(k["b"], list(&[]));
        assert_eq!(k["c"], list(&["one", "two", "three"]));
        assert_eq!(k["d"], list(&[]));
    }

    #[test]
    fn nested_blocks_are_kept_opaque() {
        let k = keys("---\nmetadata:\n  author: me\n  v: 1\nlong: |\n  x\nname: n\n---\n");
        assert_eq!(k["metadata"], Value::Nested);
        assert_eq!(k["long"], Value::Nested);
        assert_eq!(k["name"], text("n"));
        let d = parse(b"---\nm:\n  a: b\n---\n").unwrap();
        assert_eq!(d.text("m"), Err(Bad("not a scalar")));
        assert_eq!(d.list("m"), Err(Bad("not a list")));
        assert_eq!(d.text("absent"), Ok(None));
    }

    #[test]
    fn body_follows_the_closing_line_crlf_and_bom_accepted() {
        let d = parse(b"\xEF\xBB\xBF---\r\nname: a\r\n---\r\nThe body.\r\n").unwrap();
        assert_eq!(d.keys["name"], text("a"));
        assert_eq!(d.body, "The body.\r\n");
        let d = parse(b"---\nname: a\n---").unwrap();
        assert_eq!(d.body, "");
        // A body that is not UTF-8 (e.g. cut by a read bound) is kept lossily.
        let d = parse(b"---\nname: a\n---\n\xE2\x82").unwrap();
        assert_eq!(d.body, "\u{FFFD}");
    }

    #[test]
    fn what_does_not_parse() {
        let bad: &[&[u8]] = &[
            b"",
            b"name: a\n",
            b"\n---\nname: a\n---\n",
            b"---\nname: a\n",
            b"---\nname: a",
            b"---\nname: a\nname: b\n---\n",
            b"---\n  indented: a\n---\n",
            b"---\n- a\n---\n",
            b"---\nno colon\n---\n",
            b"---\nkey:value\n---\n",
            b"---\nbad key: a\n---\n",
            b"---\na: b: c\n---\n",
            b"---\na: 'unclosed\n---\n",
            b"---\na: \"bad \\q escape\"\n---\n",
            b"---\na: \"x\" y\n---\n",
            b"---\na: [x, y\n---\n",
            b"---\na: [x,, y]\n---\n",
            b"---\na: [x] y\n---\n",
            b"---\na: [x, [y]]\n---\n",
            b"---\na: x\n- y\n---\n",
            b"---\na: \xFF\n---\n",
            b"---\na:\n  - [x]\n---\n",
        ];
        for b in bad {
            assert!(parse(b).is_err(), "{:?}", String::from_utf8_lossy(b));
        }
    }

    #[test]
    fn key_and_item_bounds_edges() {
        let many = |n: usize| {
            let mut s = String::from("---\n");
            for i in 0..n {
                s.push_str(&format!("k{i}: v\n"));
            }
            s + "---\n"
        };
        assert_eq!(keys(&many(MAX_KEYS)).len(), MAX_KEYS);
        assert_eq!(
            parse(many(MAX_KEYS + 1).as_bytes()),
            Err(Bad("too many keys"))
        );
        let flow = |n: usize| format!("---\nt: [{}]\n---\n", vec!["x"; n].join(", "));
        assert_eq!(keys(&flow(MAX_ITEMS))["t"], list(&vec!["x"; MAX_ITEMS]));
        assert_eq!(
            parse(flow(MAX_ITEMS + 1).as_bytes()),
            Err(Bad("too many items"))
        );
        let block = |n: usize| format!("---\nt:\n{}---\n", "  - x\n".repeat(n));
        assert_eq!(keys(&block(MAX_ITEMS))["t"], list(&vec!["x"; MAX_ITEMS]));
        assert_eq!(
            parse(block(MAX_ITEMS + 1).as_bytes()),
            Err(Bad("too many items"))
        );
    }
}
