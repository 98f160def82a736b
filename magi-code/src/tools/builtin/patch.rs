//! Codex's patch format, sans-IO (`backend.md` "Tools and approvals", `apply_patch`): the
//! parser (`*** Begin Patch` … `*** End Patch`, with `Add File`, `Delete File`, `Update File`
//! and `Move to`, hunks of ` `, `-` and `+` lines after an optional `@@` context line, and
//! `*** End of File`), and the hunks located in a file's lines with the three tolerances in
//! order: exact, then trailing white space ignored, then leading and trailing.

/// One file's change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// A new file with these lines.
    Add { path: String, lines: Vec<String> },
    /// A file removed.
    Delete { path: String },
    /// A file changed by hunks, maybe moved.
    Update {
        path: String,
        move_to: Option<String>,
        hunks: Vec<Hunk>,
    },
}

impl Op {
    /// The path the op names first.
    pub(crate) fn path(&self) -> &str {
        match self {
            Self::Add { path, .. } | Self::Delete { path } | Self::Update { path, .. } => path,
        }
    }
}

/// One hunk of an update.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Hunk {
    /// The `@@` line's text: a line to find before the hunk's lines.
    pub(crate) context: Option<String>,
    /// Its lines: ` ` kept, `-` removed, `+` added.
    pub(crate) lines: Vec<(char, String)>,
    /// `*** End of File`: the hunk's lines end the file.
    pub(crate) eof: bool,
}

impl Hunk {
    fn old(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|(k, _)| *k != '+')
            .map(|(_, l)| l.as_str())
            .collect()
    }

    fn new_lines(&self) -> Vec<String> {
        self.lines
            .iter()
            .filter(|(k, _)| *k != '-')
            .map(|(_, l)| l.clone())
            .collect()
    }
}

/// Lines added and removed by `op` (an added file's lines; a deleted file's are not known
/// here and count 0).
pub(crate) fn op_counts(op: &Op) -> (u64, u64) {
    match op {
        Op::Add { lines, .. } => (lines.len() as u64, 0),
        Op::Delete { .. } => (0, 0),
        Op::Update { hunks, .. } => {
            hunks
                .iter()
                .flat_map(|h| &h.lines)
                .fold((0, 0), |(a, r), (k, _)| match k {
                    '+' => (a + 1, r),
                    '-' => (a, r + 1),
                    _ => (a, r),
                })
        }
    }
}

const BEGIN: &str = "*** Begin Patch";
const END: &str = "*** End Patch";
const ADD: &str = "*** Add File: ";
const DELETE: &str = "*** Delete File: ";
const UPDATE: &str = "*** Update File: ";
const MOVE: &str = "*** Move to: ";
const EOF_LINE: &str = "*** End of File";

/// The patch's ops, or what is wrong with it (one line).
pub(crate) fn parse(patch: &str) -> Result<Vec<Op>, String> {
    let lines: Vec<&str> = patch
        .lines()
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let mut at = match first {
        Some(i) if lines[i].trim() == BEGIN => i + 1,
        _ => return Err(format!("the patch must start with '{BEGIN}'")),
    };
    let mut ops = Vec::new();
    loop {
        let Some(line) = lines.get(at) else {
            return Err(format!("the patch must end with '{END}'"));
        };
        let line = line.trim_end();
        at += 1;
        if line.trim() == END {
            break;
        }
        if let Some(path) = line.strip_prefix(ADD) {
            let mut added = Vec::new();
            while let Some(l) = lines.get(at).and_then(|l| l.strip_prefix('+')) {
                added.push(l.to_owned());
                at += 1;
            }
            ops.push(Op::Add {
                path: path.trim().to_owned(),
                lines: added,
            });
        } else if let Some(path) = line.strip_prefix(DELETE) {
            ops.push(Op::Delete {
                path: path.trim().to_owned(),
            });
        } else if let Some(path) = line.strip_prefix(UPDATE) {
            let (op, next) = update(&lines, at, path.trim())?;
            ops.push(op);
            at = next;
        } else if line.trim().is_empty() {
            continue;
        } else {
            return Err(format!("'{}' is not a file operation", cut(line)));
        }
    }
    if ops.is_empty() {
        return Err("the patch changes no file".to_owned());
    }
    Ok(ops)
}

/// An `Update File` op from line `at` on: its move and hunks, and where the next op starts.
fn update(lines: &[&str], mut at: usize, path: &str) -> Result<(Op, usize), String> {
    let mut move_to = None;
    if let Some(to) = lines.get(at).and_then(|l| l.strip_prefix(MOVE)) {
        move_to = Some(to.trim().to_owned());
        at += 1;
    }
    let mut hunks: Vec<Hunk> = Vec::new();
    let mut open: Option<Hunk> = None;
    while let Some(&line) = lines.get(at) {
        if line.starts_with("*** ") && line.trim_end() != EOF_LINE {
            break;
        }
        at += 1;
        if line.trim_end() == EOF_LINE {
            open.get_or_insert_with(Hunk::default).eof = true;
            hunks.extend(open.take());
            continue;
        }
        if let Some(rest) = line.strip_prefix("@@") {
            hunks.extend(open.take());
            let context = rest.strip_prefix(' ').unwrap_or(rest);
            open = Some(Hunk {
                context: (!context.trim().is_empty()).then(|| context.to_owned()),
                ..Hunk::default()
            });
            continue;
        }
        let (kind, text) = match line.chars().next() {
            Some(k @ (' ' | '-' | '+')) => (k, &line[1..]),
            // An empty line in a hunk is an empty line kept.
            None => (' ', ""),
            Some(_) => return Err(format!("'{}' is not a hunk line of {path}", cut(line))),
        };
        open.get_or_insert_with(Hunk::default)
            .lines
            .push((kind, text.to_owned()));
    }
    hunks.extend(open.take());
    hunks.retain(|h| !h.lines.is_empty() || h.context.is_some());
    if hunks.is_empty() && move_to.is_none() {
        return Err(format!("the update of {path} has no hunk"));
    }
    let op = Op::Update {
        path: path.to_owned(),
        move_to,
        hunks,
    };
    Ok((op, at))
}

/// At most 120 bytes of `s`, for an error line.
fn cut(s: &str) -> &str {
    crate::util::text::cut(s, 120)
}

/// `text` with `hunks` applied, or the lines that could not be found. A file whose lines end
/// in CR LF keeps CR LF on every line.
pub(crate) fn apply(text: &str, hunks: &[Hunk]) -> Result<String, String> {
    let crlf = text.contains("\r\n");
    let mut lines: Vec<String> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
        .collect();
    // A final LF ends the last line; it does not start an empty one.
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    let mut replacements: Vec<(usize, usize, Vec<String>)> = Vec::new();
    let mut from = 0usize;
    for h in hunks {
        if let Some(ctx) = &h.context {
            match seek(&lines, &[ctx.as_str()], from, false) {
                Some(i) => from = i + 1,
                None => return Err(ctx.clone()),
            }
        }
        let old = h.old();
        if old.is_empty() {
            // Only additions: after the context line if one was given, else at the end.
            let at = if h.context.is_some() {
                from
            } else {
                lines.len()
            };
            replacements.push((at, 0, h.new_lines()));
            continue;
        }
        let Some(start) = seek(&lines, &old, from, h.eof) else {
            return Err(old.join("\n"));
        };
        replacements.push((start, old.len(), h.new_lines()));
        from = start + old.len();
    }
    replacements.sort_by_key(|r| r.0);
    for (start, len, new) in replacements.into_iter().rev() {
        lines.splice(start..start + len, new);
    }
    let end = if crlf { "\r\n" } else { "\n" };
    let mut out = lines.join(end);
    if !lines.is_empty() {
        out.push_str(end);
    }
    Ok(out)
}

/// Where `want` first appears in `lines` at or after `from`: exactly, else ignoring trailing
/// white space, else ignoring leading and trailing. An `eof` hunk is looked for at the end
/// first.
fn seek(lines: &[String], want: &[&str], from: usize, eof: bool) -> Option<usize> {
    if want.len() > lines.len() {
        return None;
    }
    let tolerances: [fn(&str) -> &str; 3] = [|s| s, str::trim_end, str::trim];
    let last = lines.len() - want.len();
    for norm in tolerances {
        let fits = |i: usize| (0..want.len()).all(|k| norm(&lines[i + k]) == norm(want[k]));
        if eof && last >= from && fits(last) {
            return Some(last);
        }
        if let Some(i) = (from..=last).find(|&i| fits(i)) {
            return Some(i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunks(patch: &str) -> Vec<Hunk> {
        match parse(patch).unwrap().remove(0) {
            Op::Update { hunks, .. } => hunks,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_op_parses() {
        let ops = parse(
            "*** Begin Patch\n*** Add File: new.txt\n+one\n+two\n*** Delete File: old.txt\n\
             *** Update File: a.rs\n*** Move to: b.rs\n@@ fn main() {\n-    old();\n+    new();\n\
             *** End of File\n*** End Patch\n",
        )
        .unwrap();
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0],
            Op::Add {
                path: "new.txt".into(),
                lines: vec!["one".into(), "two".into()]
            }
        );
        assert_eq!(
            ops[1],
            Op::Delete {
                path: "old.txt".into()
            }
        );
        let Op::Update {
            path,
            move_to,
            hunks,
        } = &ops[2]
        else {
            panic!()
        };
        assert_eq!((path.as_str(), move_to.as_deref()), ("a.rs", Some("b.rs")));
        assert_eq!(hunks.len(), 1);
        assert_eq!(hunks[0].context.as_deref(), Some("fn main() {"));
        assert!(hunks[0].eof);
        assert_eq!(op_counts(&ops[2]), (1, 1));
    }

    #[test]
    fn malformed_patches_say_what_is_wrong() {
        assert!(parse("*** Update File: a\n")
            .unwrap_err()
            .contains("start with"));
        assert!(parse("*** Begin Patch\n*** Delete File: a\n")
            .unwrap_err()
            .contains("end with"));
        assert!(parse("*** Begin Patch\n*** End Patch\n")
            .unwrap_err()
            .contains("no file"));
        assert!(parse("*** Begin Patch\nrm -rf /\n*** End Patch")
            .unwrap_err()
            .contains("not a file operation"));
        let e = parse("*** Begin Patch\n*** Update File: a\n@@\nxoops\n*** End Patch").unwrap_err();
        assert!(e.contains("not a hunk line of a"), "{e}");
    }

    #[test]
    fn hunks_apply_with_the_three_tolerances_in_order() {
        let text = "fn a() {\n    one();  \n}\nfn b() {\n    one();\n}\n";
        // Exact: the second `one();` (no trailing spaces) after `fn b`.
        let h = hunks("*** Begin Patch\n*** Update File: f\n@@ fn b() {\n-    one();\n+    two();\n*** End Patch");
        assert_eq!(
            apply(text, &h).unwrap(),
            "fn a() {\n    one();  \n}\nfn b() {\n    two();\n}\n"
        );
        // An exact match anywhere wins over a tolerant one before it.
        let h = hunks(
            "*** Begin Patch\n*** Update File: f\n@@\n-    one();\n+    two();\n*** End Patch",
        );
        assert_eq!(
            apply(text, &h).unwrap(),
            "fn a() {\n    one();  \n}\nfn b() {\n    two();\n}\n"
        );
        // Trailing white space ignored when nothing matches exactly.
        let h = hunks(
            "*** Begin Patch\n*** Update File: f\n@@\n-    one();\n+    two();\n*** End Patch",
        );
        assert_eq!(apply("x\n    one();  \n", &h).unwrap(), "x\n    two();\n");
        // Leading white space too.
        let h =
            hunks("*** Begin Patch\n*** Update File: f\n@@\n-one();\n+    three();\n*** End Patch");
        assert!(apply(text, &h)
            .unwrap()
            .starts_with("fn a() {\n    three();\n"));
        // Not there at all: the lines it looked for.
        let h = hunks("*** Begin Patch\n*** Update File: f\n@@\n-missing();\n+x\n*** End Patch");
        assert_eq!(apply(text, &h).unwrap_err(), "missing();");
    }

    #[test]
    fn crlf_files_keep_crlf_and_additions_go_where_asked() {
        let text = "a\r\nb\r\n";
        let h = hunks("*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+c\n+d\n*** End Patch");
        assert_eq!(apply(text, &h).unwrap(), "a\r\nc\r\nd\r\n");
        let h = hunks("*** Begin Patch\n*** Update File: f\n@@\n+z\n*** End Patch");
        assert_eq!(apply("a\n", &h).unwrap(), "a\nz\n");
        let h = hunks("*** Begin Patch\n*** Update File: f\n@@ a\n+after a\n*** End Patch");
        assert_eq!(apply("a\nb\n", &h).unwrap(), "a\nafter a\nb\n");
        // End of file: the last of two equal lines.
        let h = hunks(
            "*** Begin Patch\n*** Update File: f\n@@\n-x\n+y\n*** End of File\n*** End Patch",
        );
        assert_eq!(apply("x\nx\n", &h).unwrap(), "x\ny\n");
    }
}
