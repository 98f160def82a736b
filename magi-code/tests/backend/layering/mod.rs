//! Tidy test in rust-analyzer's manner: reads every file under `magi-code/src` as text and
//! asserts the layout of `layout.md`:
//!
//! - direction ("Direction"): a file may name its own top-level module and any module in a
//!   strictly lower row of [`LAYERS`], never one in a higher row or another module of its own
//!   row; `util/`, the last row, names nothing else of the crate; a top-level module missing
//!   from the table fails, so every new folder is placed deliberately;
//! - inside a folder, a child (any file but `mod.rs`) names only the folder's files, never what
//!   the folder's `mod.rs` defines (`crate::session::Attachment` or `super::Attachment` from
//!   `session/page.rs` names `session/mod.rs` when there is no `session/Attachment.rs`);
//! - no circle inside a folder, at any depth ([`circles`]): the files and subfolders of each
//!   folder name each other as a DAG (the folder's `mod.rs` is one node of it), except in the
//!   folders of [`CIRCLE_EXCEPTIONS`];
//! - size: no file has more than [`MAX_LINES`] non-test lines.
//!
//! A file's references are the paths of its non-test text that start with `crate::`,
//! `super::`, `self::` or the name of one of its own child modules, `use` lines (groups
//! flattened) and inline paths alike (comments and string literals are blanked first; a
//! visibility such as `pub(super)` names nothing). Its non-test text is what comes before its
//! first `#[cfg(test)]`; files named `tests.rs` or under a `tests/` folder are test text
//! throughout. `lib.rs` (the module list) is exempt.

mod checker;
mod circles;
pub(crate) mod scan;

use circles::{absolute, module_of, Graph};
use scan::{blank_comments_and_strings, paths};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// The direction table, top row first (`layout.md`, "Direction"): a `.rs` name is a file
/// module, a `/` name a folder; both mean the module of that name.
const LAYERS: [&[&str]; 10] = [
    /* 1 */ &["main.rs", "serve.rs", "cli/", "acp/"],
    /* 2 */ &["worker/"],
    /* 3 */ &["agent/", "startup/"],
    // `run/` (the sans-IO run machine) is driven by `agent/` and names no session.
    /* 4 */
    &["session/", "run/"],
    /* 5 */ &["catalog/", "discovery/"],
    // `codemode/` (the Code Mode helper and its protocol) is used by the run, never the
    // other way round.
    /* 6 */
    &["tools/", "providers/", "codemode/"],
    /* 7 */ &["mcp/", "history/"],
    // `runtime.rs` holds the admitted `config::Settings`, so it sits one row above `config/`
    // rather than beside it as layout.md draws it.
    /* 8 */
    &["runtime.rs"],
    // `client/` (the typed client) imports only `wire/`; only `cli/` and `acp/` import it.
    /* 9 */
    &["config/", "store/", "client/"],
    /* 10 */ &["util/", "wire/"],
];

/// The most non-test lines a file under `src` may have.
const MAX_LINES: usize = 600;

/// Paths under `src` the checks skip: the module list.
const EXEMPT: [&str; 1] = ["lib.rs"];

/// Folders (relative to `src`) whose circle the check tolerates: none since the run machine
/// (issue 15). The check fails while an exception here has no circle left, so an entry
/// cannot go stale.
const CIRCLE_EXCEPTIONS: [&str; 0] = [];

/// One broken rule.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Problem {
    path: String,
    line: usize,
    rule: String,
}

/// Every problem of `files` (path relative to `src` with `/` separators, file text), where
/// the folders of `exceptions` may hold a circle (and must).
fn check(files: &[(String, String)], exceptions: &[&str]) -> Vec<Problem> {
    check_crate(files, exceptions, true)
}

/// [`check`], with the direction table of [`LAYERS`] only when `directed` (it is
/// `magi-code`'s; another crate keeps every other rule).
fn check_crate(files: &[(String, String)], exceptions: &[&str], directed: bool) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut unplaced: Vec<&str> = Vec::new();
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .filter(|(p, _)| !is_exempt(p))
        .map(|(p, _)| module_of(p))
        .collect();
    let mut graph = Graph::default();
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
        let placed = if directed { row_of(own) } else { Some(0) };
        let Some(own_row) = placed else {
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
        let me = module_of(path);
        let is_child = |name: &str| {
            let mut m = me.clone();
            m.push(name.to_owned());
            modules.contains(&m)
        };
        let code = blank_comments_and_strings(body);
        for named in paths(&code, &is_child) {
            // A path above the crate root does not compile: nothing to check.
            let Some(segs) = absolute(&me, &named.head, &named.segs) else {
                continue;
            };
            graph.add(&modules, &me, &segs, path, named.line);
            let Some(first) = segs.first().map(String::as_str) else {
                continue;
            };
            if matches!(first, "self" | "*") {
                continue;
            }
            let rules = [
                directed
                    .then(|| direction(own, own_row, first, files))
                    .flatten(),
                names_folder_mod(path, &segs, files),
            ];
            for rule in rules.into_iter().flatten() {
                problems.push(Problem {
                    path: path.clone(),
                    line: named.line,
                    rule: format!("`{}`: {rule}", named.shown()),
                });
            }
        }
    }
    let circles = graph.circles();
    for c in &circles {
        if exceptions.contains(&c.folder.as_str()) {
            continue;
        }
        let (_, _, (path, line)) = &c.walk[0];
        let walk: Vec<String> = c
            .walk
            .iter()
            .map(|(from, to, (p, l))| format!("{from} -> {to} ({p}:{l})"))
            .collect();
        problems.push(Problem {
            path: path.clone(),
            line: *line,
            rule: format!(
                "circle inside `{}/`: {}; around it: {}",
                c.folder,
                c.members.join(" <-> "),
                walk.join(", ")
            ),
        });
    }
    for e in exceptions {
        if !circles.iter().any(|c| c.folder == *e) {
            problems.push(Problem {
                path: format!("{e}/"),
                line: 0,
                rule: "no circle left: remove it from CIRCLE_EXCEPTIONS".to_owned(),
            });
        }
    }
    problems.sort();
    problems
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
    // A folder's own module is its `mod.rs`, or `<folder>.rs` beside it.
    let own = format!("{folder}.rs");
    let own = if files.iter().any(|(p, _)| *p == own) {
        own
    } else {
        format!("{folder}/mod.rs")
    };
    let named = match segs.get(folder_segs.len()).map(String::as_str) {
        None | Some("self" | "*") => return Some(format!("names `{folder}` itself ({own})")),
        Some(x) => x,
    };
    let file_module = format!("{folder}/{named}.rs");
    let dir_module = format!("{folder}/{named}/");
    let is_submodule = files
        .iter()
        .any(|(p, _)| *p == file_module || p.starts_with(&dir_module));
    (!is_submodule).then(|| {
        format!(
            "`{named}` is defined in {own}: a child names only its folder's files (the leaf \
             files such as state.rs, record.rs, target.rs, paths.rs, outcome.rs, input.rs), \
             never mod.rs"
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

pub(crate) fn is_exempt(path: &str) -> bool {
    EXEMPT
        .iter()
        .any(|e| path == *e || (e.ends_with('/') && path.starts_with(e)))
}

/// `tests.rs`, `<name>_tests.rs` (a module's second test file) or anything under `tests/`.
pub(crate) fn is_test_file(path: &str) -> bool {
    path == "tests.rs"
        || path.ends_with("/tests.rs")
        || path.ends_with("_tests.rs")
        || path.starts_with("tests/")
        || path.contains("/tests/")
}

/// What comes before the first `#[cfg(test)]`.
pub(crate) fn non_test(text: &str) -> &str {
    text.split("#[cfg(test)]").next().unwrap_or(text)
}

/// Every `.rs` file under `dir` as (path relative to `root`, text).
pub(crate) fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
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
fn the_other_crates_keep_the_same_rules_but_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in super::fn_length::CRATES
        .iter()
        .filter(|c| **c != "magi-code")
    {
        let src = root.join(krate).join("src");
        let mut files = Vec::new();
        read_tree(&src, &src, &mut files);
        files.sort();
        assert!(!files.is_empty(), "no files under {}", src.display());
        let problems = check_crate(&files, &[], false);
        assert!(
            problems.is_empty(),
            "{krate}/src breaks the house rules:\n{}",
            report(&problems)
        );
    }
}

#[test]
fn src_follows_the_layout() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    read_tree(&src, &src, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no files under {}", src.display());
    let problems = check(&files, &CIRCLE_EXCEPTIONS);
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
