//! Tidy test: no function under the `src` of any crate of the workspace ([`CRATES`]) outside
//! test code is longer than [`MAX_FN_LINES`] lines, counted from its `fn` line to its closing
//! brace, except
//! those listed in [`EXCEPTIONS`] (which may only shrink: an entry that is back under the bound,
//! or gone, fails the test too, so the list cannot go stale).
//!
//! Test text is what `layering` calls test text (after the first `#[cfg(test)]`, files named
//! `tests.rs`, `*_tests.rs` or under `tests/`).

use super::layering::{is_test_file, non_test, read_tree, scan};
use std::path::Path;

/// The longest a function may be, in lines from `fn` to its closing brace.
const MAX_FN_LINES: usize = 80;

/// The workspace's crates, by folder: every one is read.
pub(crate) const CRATES: [&str; 3] = ["magi-code", "protocol-core", "io-driver"];

/// Functions still over the bound, as `crate/src/path::name`, with why each stays for now.
/// Shrink this list; never grow it.
const EXCEPTIONS: [&str; 3] = [
    // One match over every settings key, read top to bottom like the table of `backend.md`;
    // not on the turn path (startup only).
    "magi-code/src/config/settings.rs::interpret",
    // One arm per stored record type of `history-format.md`: a table, splitting it would
    // only scatter it.
    "magi-code/src/history/record.rs::from_fields",
    // Data, not logic: the built-in tools' specs as one literal list, one `spec(..)` each.
    "magi-code/src/tools/builtin/schema.rs::specs",
];

/// Every `.rs` file under the `src` of each crate, as (`crate/src/path`, text).
pub(crate) fn workspace_sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut all = Vec::new();
    for krate in CRATES {
        let src = root.join(krate).join("src");
        let mut files = Vec::new();
        read_tree(&src, &src, &mut files);
        assert!(!files.is_empty(), "no files under {}", src.display());
        all.extend(
            files
                .into_iter()
                .map(|(p, t)| (format!("{krate}/src/{p}"), t)),
        );
    }
    all
}

/// One function: where its `fn` is, its name and its length in lines.
#[derive(Debug, PartialEq, Eq)]
struct Function {
    line: usize,
    name: String,
    lines: usize,
}

/// The functions with a body in `code` (comments and literals already blanked): every `fn`
/// keyword followed by a name, up to its matching closing brace. A declaration without a body
/// (`fn f();` in a trait) and a pointer type (`fn(u8)`) are skipped; nested functions are
/// counted on their own too.
fn functions(code: &[u8]) -> Vec<Function> {
    let is_ident = scan::is_ident;
    let line_at = |i: usize| 1 + code[..i].iter().filter(|&&b| b == b'\n').count();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 <= code.len() {
        let keyword = &code[i..i + 2] == b"fn"
            && (i == 0 || !is_ident(code[i - 1]))
            && code.get(i + 2).is_some_and(|b| b.is_ascii_whitespace());
        if !keyword {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while code.get(j).is_some_and(|b| b.is_ascii_whitespace()) {
            j += 1;
        }
        let start = j;
        while code.get(j).copied().is_some_and(is_ident) {
            j += 1;
        }
        if j == start {
            i += 2;
            continue;
        }
        let name = String::from_utf8_lossy(&code[start..j]).into_owned();
        // The body opens at the first `{` outside parentheses (a signature holds no braces
        // elsewhere); a `;` first means no body.
        let mut parens = 0usize;
        let mut open = None;
        while let Some(&b) = code.get(j) {
            match b {
                b'(' | b'[' => parens += 1,
                b')' | b']' => parens = parens.saturating_sub(1),
                b';' if parens == 0 => break,
                b'{' if parens == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
            j += 1;
        }
        let Some(open) = open else {
            i = j;
            continue;
        };
        let mut depth = 0usize;
        let mut close = open;
        for (k, &b) in code.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = k;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_at(i);
        out.push(Function {
            line: first,
            name,
            lines: line_at(close) - first + 1,
        });
        // Go on inside the body, so nested functions are seen.
        i = open + 1;
    }
    out
}

/// Every function over the bound in `files` (path, text), as (`path::name`, line, length),
/// outside test text.
fn too_long(files: &[(String, String)]) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (path, text) in files {
        if is_test_file(path) {
            continue;
        }
        let code = scan::blank_comments_and_strings(non_test(text));
        for f in functions(&code) {
            if f.lines > MAX_FN_LINES {
                out.push((format!("{path}::{}", f.name), f.line, f.lines));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn functions_stay_under_80_lines() {
    let files = workspace_sources();
    let long = too_long(&files);
    let mut problems: Vec<String> = long
        .iter()
        .filter(|(name, _, _)| !EXCEPTIONS.contains(&name.as_str()))
        .map(|(name, line, n)| {
            format!("  {name} (line {line}): {n} lines, over {MAX_FN_LINES}: split it")
        })
        .collect();
    for e in EXCEPTIONS {
        if !long.iter().any(|(name, _, _)| name == e) {
            problems.push(format!(
                "  {e}: no longer over {MAX_FN_LINES} lines (or gone): remove it from \
                 EXCEPTIONS"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_counter_sees_bodies_nesting_and_declarations() {
    let text = "trait T {\n    fn decl(&self);\n}\nfn outer(f: fn(u8) -> u8) -> u8 {\n    \
                fn inner() {\n        let s = \"}\";\n    }\n    f(1)\n}\n\
                fn generic<T: Fn() -> ()>(x: [u8; 2]) where T: Copy { }\n";
    let code = scan::blank_comments_and_strings(text);
    let got = functions(&code);
    let want = [("outer", 4, 6), ("inner", 5, 3), ("generic", 10, 1)];
    let got: Vec<(&str, usize, usize)> = got
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_check_fails_over_the_bound_and_passes_at_it() {
    let body = |n: usize| {
        // `fn` line, n - 2 body lines, closing brace: n lines in all.
        format!("fn f() {{\n{}}}\n", "    let _ = 1;\n".repeat(n - 2))
    };
    let at = vec![("store/a.rs".to_owned(), body(MAX_FN_LINES))];
    assert_eq!(too_long(&at), Vec::new());
    let over = vec![("store/a.rs".to_owned(), body(MAX_FN_LINES + 1))];
    assert_eq!(
        too_long(&over),
        vec![("store/a.rs::f".to_owned(), 1, MAX_FN_LINES + 1)]
    );
    let agent = vec![("agent/a.rs".to_owned(), body(MAX_FN_LINES + 1))];
    assert_eq!(too_long(&agent).len(), 1, "the turn path is bounded too");
    let tested = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", body(MAX_FN_LINES + 1));
    assert_eq!(too_long(&[("store/a.rs".to_owned(), tested)]), Vec::new());
}
