//! Tidy test in rust-analyzer's manner: reads every file under `magi-code/src` as text and
//! asserts the layout of `layout.md`:
//!
//! - direction ("Direction"): a file may name its own top-level module and any module in a
//!   strictly lower row of [`LAYERS`], never one in a higher row or another module of its own
//!   row; `util/`, the last row, names nothing else of the crate; a top-level module missing
//!   from the table fails, so every new folder is placed deliberately;
//! - inside a folder, a child (any file but `mod.rs`) names only the folder's files, never what
//!   the folder's `mod.rs` defines (`crate::session::Attachment` from `session/page.rs` names
//!   `session/mod.rs` when there is no `session/Attachment.rs`);
//! - size: no file has more than [`MAX_LINES`] non-test lines.
//!
//! A file's references are the `crate::` paths of its non-test text, `use` lines and inline
//! paths alike (comments and string literals are blanked first). Its non-test text is what
//! comes before its first `#[cfg(test)]`; files named `tests.rs` or under a `tests/` folder
//! are test text throughout. `lib.rs` (the module list) and `bin/` (other crate roots, whose
//! `crate::` is themselves) are exempt.

use std::fs;
use std::path::Path;

/// The direction table, top row first (`layout.md`, "Direction"): a `.rs` name is a file
/// module, a `/` name a folder; both mean the module of that name.
const LAYERS: [&[&str]; 10] = [
    /* 1 */ &["main.rs", "serve.rs", "cli/"],
    /* 2 */ &["worker/"],
    /* 3 */ &["agent/", "startup/"],
    /* 4 */ &["session/"],
    /* 5 */ &["catalog/", "discovery/"],
    /* 6 */ &["tools/", "providers/"],
    /* 7 */ &["mcp/", "history/"],
    // `runtime.rs` holds the admitted `config::Settings`, so it sits one row above `config/`
    // rather than beside it as layout.md draws it.
    /* 8 */
    &["runtime.rs"],
    // `client/` (the typed client) imports only `wire/`; only `cli/` imports it.
    /* 9 */
    &["config/", "store/", "client/"],
    /* 10 */ &["util/", "wire/"],
];

/// The most non-test lines a file under `src` may have.
const MAX_LINES: usize = 600;

/// Paths under `src` the checks skip: the module list and the other binaries' crate roots.
const EXEMPT: [&str; 2] = ["lib.rs", "bin/"];

/// One broken rule.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    path: String,
    line: usize,
    rule: String,
}

/// Every problem of `files`: (path relative to `src` with `/` separators, file text).
fn check(files: &[(String, String)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut unplaced: Vec<&str> = Vec::new();
    for (path, text) in files {
        if is_exempt(path) || is_test_file(path) {
            continue;
        }
        let body = non_test(text);
        let lines = body.matches('\n').count();
        if lines > MAX_LINES {
            problems.push(Problem {
                path: path.clone(),
                line: 1,
                rule: format!("{lines} non-test lines, over {MAX_LINES}"),
            });
        }
        let own = top_module(path);
        let Some(own_row) = row_of(own) else {
            if !unplaced.contains(&own) {
                unplaced.push(own);
                problems.push(Problem {
                    path: path.clone(),
                    line: 1,
                    rule: format!(
                        "top-level module `{own}` is not in the direction table: place it in a \
                         row of LAYERS"
                    ),
                });
            }
            continue;
        };
        let code = blank_comments_and_strings(body);
        for (segs, line) in crate_paths(&code) {
            let Some(first) = segs.first().map(String::as_str) else {
                continue;
            };
            if matches!(first, "self" | "*") {
                continue;
            }
            if let Some(rule) = direction(own, own_row, first, files) {
                problems.push(Problem {
                    path: path.clone(),
                    line,
                    rule: format!("`{}`: {rule}", shown(&segs)),
                });
            }
            if let Some(rule) = names_folder_mod(path, &segs, files) {
                problems.push(Problem {
                    path: path.clone(),
                    line,
                    rule: format!("`{}`: {rule}", shown(&segs)),
                });
            }
        }
    }
    problems.sort();
    problems
}

/// `crate::a::b` for the path `[a, b]` (and for `[a, b, self]`).
fn shown(segs: &[String]) -> String {
    let segs = match segs.split_last() {
        Some((last, rest)) if last == "self" => rest,
        _ => segs,
    };
    format!("crate::{}", segs.join("::"))
}

/// Why `own` (in row `own_row`) may not name `target`, if it may not.
fn direction(
    own: &str,
    own_row: usize,
    target: &str,
    files: &[(String, String)],
) -> Option<String> {
    if target == own {
        return None;
    }
    let Some(row) = row_of(target) else {
        // A module of `src` that is not in the table is reported once, at its own files.
        let exists = files
            .iter()
            .any(|(p, _)| !is_exempt(p) && top_module(p) == target);
        return (!exists)
            .then(|| format!("`{target}` is not a top-level module of the direction table"));
    };
    if row == own_row {
        Some(format!(
            "`{own}` and `{target}` are both in row {}: a module may not name another module of \
             its own row",
            row + 1
        ))
    } else if row < own_row {
        Some(format!(
            "`{own}` (row {}) names `{target}` (row {}), a higher row: only the own module and \
             lower rows",
            own_row + 1,
            row + 1
        ))
    } else {
        None
    }
}

/// Why the path `segs` named from the file `path` names its folder's `mod.rs`, if it does.
fn names_folder_mod(path: &str, segs: &[String], files: &[(String, String)]) -> Option<String> {
    let (folder, file) = path.rsplit_once('/')?;
    if file == "mod.rs" {
        return None;
    }
    let folder_segs: Vec<&str> = folder.split('/').collect();
    if segs.len() < folder_segs.len() || segs.iter().zip(&folder_segs).any(|(a, b)| a != b) {
        return None;
    }
    let named = match segs.get(folder_segs.len()).map(String::as_str) {
        None | Some("self" | "*") => {
            return Some(format!("names `{folder}` itself ({folder}/mod.rs)"))
        }
        Some(x) => x,
    };
    let file_module = format!("{folder}/{named}.rs");
    let dir_module = format!("{folder}/{named}/");
    let is_submodule = files
        .iter()
        .any(|(p, _)| *p == file_module || p.starts_with(&dir_module));
    (!is_submodule).then(|| {
        format!(
            "`{named}` is defined in {folder}/mod.rs: a child names only its folder's files \
             (the leaf files such as state.rs, record.rs, target.rs, paths.rs, outcome.rs, \
             input.rs), never mod.rs"
        )
    })
}

/// The row (0-based) of the top-level module `name`.
fn row_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|row| {
        row.iter()
            .any(|m| m.trim_end_matches('/').trim_end_matches(".rs") == name)
    })
}

/// The top-level module of `path`: its first component, without `.rs`.
fn top_module(path: &str) -> &str {
    let first = path.split('/').next().unwrap_or(path);
    first.strip_suffix(".rs").unwrap_or(first)
}

fn is_exempt(path: &str) -> bool {
    EXEMPT
        .iter()
        .any(|e| path == *e || (e.ends_with('/') && path.starts_with(e)))
}

fn is_test_file(path: &str) -> bool {
    path == "tests.rs"
        || path.ends_with("/tests.rs")
        || path.starts_with("tests/")
        || path.contains("/tests/")
}

/// What comes before the first `#[cfg(test)]`.
fn non_test(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `text` with every comment and string or char literal replaced by spaces (newlines kept, so
/// line numbers stay).
fn blank_comments_and_strings(text: &str) -> Vec<u8> {
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

/// Every path named through `crate::` in `code` (already blanked), flattened out of `use`
/// groups, with the line where it is written (its item, inside a group).
fn crate_paths(code: &[u8]) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = code[i..].windows(7).position(|w| w == b"crate::") {
        let at = i + p;
        i = at + 7;
        if at > 0 && is_ident(code[at - 1]) {
            continue;
        }
        let mut found = Vec::new();
        let mut j = i;
        parse_tree(code, &mut j, Vec::new(), &mut found);
        for (segs, pos) in found {
            let line = 1 + code[..pos].iter().filter(|&&b| b == b'\n').count();
            out.push((segs, line));
        }
    }
    out
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

/// Every `.rs` file under `dir` as (path relative to `root`, text).
fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            read_tree(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under src");
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            let text =
                fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            out.push((rel.join("/"), text));
        }
    }
}

fn report(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("  src/{}:{}: {}", p.path, p.line, p.rule))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn src_follows_the_layout() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no files under {}", src.display());
    let problems = check(&files);
    let rows: Vec<String> = LAYERS
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{} {}", i + 1, r.join(" ")))
        .collect();
    assert!(
        problems.is_empty(),
        "magi-code/src breaks layout.md ({} problems; rows: {}):\n{}",
        problems.len(),
        rows.join(" | "),
        report(&problems)
    );
}

// ---------------------------------------------------------------------------------------------
// The checker itself: it must be able to fail.

fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

fn rules(files: &[(&str, &str)]) -> Vec<String> {
    check(&tree(files))
        .into_iter()
        .map(|p| format!("{}:{}: {}", p.path, p.line, p.rule))
        .collect()
}

/// A small tree that keeps every rule.
const CLEAN: [(&str, &str); 9] = [
    ("lib.rs", "pub mod worker;\npub mod session;\npub mod util;\n"),
    ("main.rs", "use magi_code::worker;\n"),
    (
        "worker/mod.rs",
        "use crate::{session::{self, state::SessionState}, util::cancel::Cancel};\n",
    ),
    (
        "session/mod.rs",
        "mod page;\nmod state;\nuse crate::util::paging;\npub fn open() {}\n",
    ),
    (
        "session/page.rs",
        "use crate::session::state::SessionState;\nfn f() { crate::util::paging::end(); }\n",
    ),
    ("session/state.rs", "pub struct SessionState;\n"),
    ("util/mod.rs", "pub mod cancel;\npub mod paging;\n"),
    ("util/cancel.rs", "pub struct Cancel;\n"),
    (
        "util/paging.rs",
        "// crate::worker in a comment\nconst S: &str = \"crate::worker\";\nconst C: char = '\"';\n\
         pub fn end() { let _ = crate::util::cancel::Cancel; }\n\
         #[cfg(test)]\nmod tests { use crate::worker::Workers; }\n",
    ),
];

#[test]
fn checker_passes_a_clean_tree() {
    assert_eq!(rules(&CLEAN), Vec::<String>::new());
}

#[test]
fn checker_reports_an_upward_import() {
    let mut files = CLEAN.to_vec();
    files.push((
        "util/ids.rs",
        "use std::sync::Arc;\n\nuse crate::session::open;\n",
    ));
    let got = rules(&files);
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(got[0].starts_with("util/ids.rs:3: `crate::session::open`: `util` (row 10) names `session` (row 4), a higher row"), "{got:#?}");
}

#[test]
fn checker_reports_upward_paths_inside_groups_and_code() {
    let files = tree(&[
        (
            "session/mod.rs",
            "use crate::{\n    util::paging,\n    worker::{shared::Shared, Workers},\n};\n",
        ),
        (
            "session/load.rs",
            "fn f() {\n    let r = crate::worker::run();\n}\n",
        ),
        ("worker/mod.rs", ""),
        ("worker/shared.rs", ""),
        ("util/paging.rs", ""),
    ]);
    let got: Vec<(String, usize)> = check(&files)
        .into_iter()
        .map(|p| (p.path, p.line))
        .collect();
    assert_eq!(
        got,
        [
            ("session/load.rs".to_owned(), 2),
            ("session/mod.rs".to_owned(), 3),
            ("session/mod.rs".to_owned(), 3),
        ]
    );
}

#[test]
fn checker_reports_same_row_and_unplaced_modules() {
    let got = rules(&[
        ("tools/mod.rs", "use crate::providers::Target;\n"),
        ("providers/mod.rs", ""),
        ("backend.rs", "use crate::tools::Registry;\n"),
        ("backend/extra.rs", ""),
        ("history/mod.rs", "use crate::Registry;\n"),
    ]);
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(
        got[0]
            .starts_with("backend.rs:1: top-level module `backend` is not in the direction table"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with(
            "history/mod.rs:1: `crate::Registry`: `Registry` is not a top-level module"
        ),
        "{got:#?}"
    );
    assert!(
        got[2].contains("`tools` and `providers` are both in row 6"),
        "{got:#?}"
    );
}

#[test]
fn checker_reports_a_child_naming_its_folders_mod_rs() {
    let mut files = CLEAN.to_vec();
    files.push(("session/append.rs", "use crate::session::open;\nuse crate::session::{self, state};\nuse crate::session::page::Page;\n"));
    let got = rules(&files);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0].starts_with(
            "session/append.rs:1: `crate::session::open`: `open` is defined in session/mod.rs"
        ),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("session/append.rs:2: `crate::session`: names `session` itself"),
        "{got:#?}"
    );
}

#[test]
fn checker_counts_only_non_test_lines() {
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let ok = format!("{}#[cfg(test)]\n{long}", "fn f() {}\n".repeat(MAX_LINES));
    let got = rules(&[
        ("util/big.rs", &long),
        ("util/ok.rs", &ok),
        ("util/tests.rs", &long),
    ]);
    assert_eq!(
        got,
        [format!(
            "util/big.rs:1: {} non-test lines, over {MAX_LINES}",
            MAX_LINES + 1
        )]
    );
}
