//! Reading a file's code as text: comments and literals blanked, then the module paths it
//! names, flattened out of `use` groups.

pub fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with every comment and string or char literal replaced by spaces (newlines kept, so
/// line numbers stay).
pub fn blank_comments_and_strings(text: &str) -> Vec<u8> {
    let mut s = text.as_bytes().to_vec();
    let n = s.len();
    let blank = |s: &mut Vec<u8>, from: usize, to: usize| {
        for b in &mut s[from..to.min(n)] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
    };
    let mut i = 0;
    while i < n {
        let prev_ident = i > 0 && is_ident(s[i - 1]);
        if s[i..].starts_with(b"//") {
            let end = s[i..].iter().position(|&b| b == b'\n').map_or(n, |p| i + p);
            blank(&mut s, i, end);
            i = end;
        } else if s[i..].starts_with(b"/*") {
            let (mut j, mut depth) = (i + 2, 1);
            while j < n && depth > 0 {
                if s[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if s[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut s, i, j);
            i = j;
        } else if s[i] == b'r'
            && (!prev_ident || (s[i - 1] == b'b' && (i == 1 || !is_ident(s[i - 2]))))
        {
            // A raw string `r"…"`, `r#"…"#` (or `br…`).
            let mut j = i + 1;
            while j < n && s[j] == b'#' {
                j += 1;
            }
            if j < n && s[j] == b'"' {
                let hashes = j - i - 1;
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let end = s[j + 1..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(n, |p| j + 1 + p + close.len());
                blank(&mut s, j, end);
                i = end;
            } else {
                i += 1;
            }
        } else if s[i] == b'"' {
            let mut j = i + 1;
            while j < n && s[j] != b'"' {
                j += if s[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut s, i, j + 1);
            i = j + 1;
        } else if s[i] == b'\'' {
            // A char literal, or else a lifetime or label (left alone).
            let end = if s.get(i + 1) == Some(&b'\\') {
                s[i + 3.min(n - i)..]
                    .iter()
                    .position(|&b| b == b'\'')
                    .map(|p| i + 3 + p + 1)
            } else {
                let width = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                (s.get(i + 1 + width) == Some(&b'\'')).then_some(i + 2 + width)
            };
            match end {
                Some(end) => {
                    blank(&mut s, i, end);
                    i = end;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    s
}

/// Where a named path starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Head {
    /// `crate::`.
    Crate,
    /// `super::` (each further leading `super` of the path climbs once more).
    Super,
    /// `self::`.
    SelfMod,
    /// A child module of the file's own module, named bare (`titles::spawn` in `worker/mod.rs`,
    /// `pub use hooks::Hooks` in `config/mod.rs`).
    Child(String),
}

/// One path named in a file's code.
#[derive(Debug)]
pub struct Named {
    /// How it starts.
    pub head: Head,
    /// Its segments after the head, flattened out of `use` groups.
    pub segs: Vec<String>,
    /// The line where it is written (its item, inside a group).
    pub line: usize,
}

impl Named {
    /// The path as written, without a trailing `self` (`super::settings::Invalid`).
    pub fn shown(&self) -> String {
        let segs = match self.segs.split_last() {
            Some((last, rest)) if last == "self" => rest,
            _ => &self.segs[..],
        };
        let head = match &self.head {
            Head::Crate => "crate",
            Head::Super => "super",
            Head::SelfMod => "self",
            Head::Child(c) => c,
        };
        std::iter::once(head)
            .chain(segs.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join("::")
    }
}

/// Every path of `code` (already blanked) that starts with `crate::`, `super::`, `self::` or
/// `name::` for a `name` that `is_child` accepts. A path inside another path's `use` group is
/// that path's item, never a start of its own; a path in a visibility (`pub(in crate::a)`)
/// names nothing.
pub fn paths(code: &[u8], is_child: &dyn Fn(&str) -> bool) -> Vec<Named> {
    let n = code.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        if !is_ident(code[i]) || (i > 0 && is_ident(code[i - 1])) || code[..i].ends_with(b"::") {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && is_ident(code[i]) {
            i += 1;
        }
        let mut j = i;
        skip_ws(code, &mut j);
        if !code[j..].starts_with(b"::") {
            continue;
        }
        let word = String::from_utf8_lossy(&code[start..i]).into_owned();
        let head = match word.as_str() {
            "crate" => Some(Head::Crate),
            "super" => Some(Head::Super),
            "self" => Some(Head::SelfMod),
            w if is_child(w) => Some(Head::Child(word)),
            _ => None,
        };
        // Parse the whole tree, whatever its head, so its group items are skipped.
        let mut found = Vec::new();
        let mut end = j + 2;
        parse_tree(code, &mut end, Vec::new(), &mut found);
        i = end.max(i);
        let Some(head) = head else { continue };
        if in_visibility(&code[..start]) {
            continue;
        }
        for (segs, pos) in found {
            let line = 1 + code[..pos].iter().filter(|&&b| b == b'\n').count();
            out.push(Named {
                head: head.clone(),
                segs,
                line,
            });
        }
    }
    out
}

/// Whether the code before a path ends in `pub(in`: the path is a visibility's scope.
fn in_visibility(before: &[u8]) -> bool {
    let t = before.trim_ascii_end();
    t.strip_suffix(b"in").is_some_and(|t| {
        !t.last().copied().is_some_and(is_ident) && t.trim_ascii_end().ends_with(b"(")
    })
}

fn skip_ws(s: &[u8], i: &mut usize) {
    while *i < s.len() && s[*i].is_ascii_whitespace() {
        *i += 1;
    }
}

/// Parses a path or `use` tree at `i` below `prefix`; pushes each leaf path with the position
/// where it starts (its item, inside a group).
fn parse_tree(s: &[u8], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut path = prefix;
    let mut first = *i;
    loop {
        skip_ws(s, i);
        if path.is_empty() {
            first = *i;
        }
        match s.get(*i) {
            Some(b'{') => {
                *i += 1;
                loop {
                    skip_ws(s, i);
                    match s.get(*i) {
                        None => return,
                        Some(b'}') => {
                            *i += 1;
                            return;
                        }
                        _ => {}
                    }
                    parse_tree(s, i, path.clone(), out);
                    // Skip a rename (`as name`) up to the next item.
                    while *i < s.len() && !matches!(s[*i], b',' | b'}') {
                        *i += 1;
                    }
                    if s.get(*i) == Some(&b',') {
                        *i += 1;
                    }
                }
            }
            Some(b'*') => {
                *i += 1;
                path.push("*".to_owned());
                out.push((path, first));
                return;
            }
            _ => {
                let start = *i;
                while *i < s.len() && is_ident(s[*i]) {
                    *i += 1;
                }
                if start == *i {
                    if !path.is_empty() {
                        out.push((path, first));
                    }
                    return;
                }
                path.push(String::from_utf8_lossy(&s[start..*i]).into_owned());
                let mut j = *i;
                skip_ws(s, &mut j);
                if s[j..].starts_with(b"::") {
                    *i = j + 2;
                } else {
                    out.push((path, first));
                    return;
                }
            }
        }
    }
}
