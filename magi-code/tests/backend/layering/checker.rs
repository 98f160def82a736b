//! The checker itself: it must be able to fail.

use super::{check, MAX_LINES};

fn tree(files: &[(&str, &str)]) -> Vec<(String, String)> {
    files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect()
}

fn rules(files: &[(&str, &str)]) -> Vec<String> {
    check(&tree(files), &[])
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
        "mod page;\nmod state;\nuse crate::util::paging;\nuse self::page::Page;\n\
         pub use state::SessionState;\npub fn open() { page::f(); }\n",
    ),
    (
        "session/page.rs",
        "use super::{state::SessionState};\npub(super) struct Page;\n\
         pub(in crate::session) fn f() { crate::util::paging::end(); }\n",
    ),
    ("session/state.rs", "pub struct SessionState;\n"),
    ("util/mod.rs", "pub mod cancel;\npub mod paging;\n"),
    ("util/cancel.rs", "pub struct Cancel;\n"),
    (
        "util/paging.rs",
        "// crate::worker in a comment\nconst S: &str = \"crate::worker\";\nconst C: char = '\"';\n\
         pub fn end() { let _ = super::cancel::Cancel; }\n\
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
    let got: Vec<(String, usize)> = check(&files, &[])
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

/// Two files of `config/` that name each other through `super::` paths.
const CIRCLE: [(&str, &str); 3] = [
    ("config/mod.rs", "pub mod hooks;\npub mod settings;\n"),
    (
        "config/settings.rs",
        "use super::hooks::Hooks;\npub struct Invalid;\n",
    ),
    (
        "config/hooks.rs",
        "pub(super) fn f() -> super::settings::Invalid {}\n",
    ),
];

#[test]
fn checker_reports_a_circle_through_super_paths() {
    assert_eq!(
        rules(&CIRCLE),
        [
            "config/hooks.rs:1: circle inside `config/`: hooks <-> settings; around it: hooks -> \
          settings (config/hooks.rs:1), settings -> hooks (config/settings.rs:1)"
        ]
    );
}

#[test]
fn checker_reports_a_circle_deeper_down_through_groups_and_climbs() {
    let mut files = CLEAN.to_vec();
    files.extend([
        ("util/deep/mod.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("util/deep/a.rs", "use super::{b::B, c};\n"),
        ("util/deep/b.rs", "pub struct B;\n"),
        (
            "util/deep/c.rs",
            "fn h() {\n    super::super::deep::a::A::new();\n}\n",
        ),
    ]);
    assert_eq!(
        rules(&files),
        [
            "util/deep/a.rs:1: circle inside `util/deep/`: a <-> c; around it: a -> c \
          (util/deep/a.rs:1), c -> a (util/deep/c.rs:2)"
        ]
    );
}

#[test]
fn checker_reports_a_circle_through_self_and_bare_child_paths() {
    // `inner/leaf.rs` may name what `deep/mod.rs` defines (it is no child of `deep/`), but
    // `deep/mod.rs` names `inner` back: a circle inside `deep/`.
    let mut files = CLEAN.to_vec();
    files.extend([
        (
            "util/deep/mod.rs",
            "pub mod inner;\npub fn helper() {}\nfn f() { inner::run(); }\n",
        ),
        (
            "util/deep/inner/mod.rs",
            "pub mod leaf;\npub use self::leaf::run;\n",
        ),
        (
            "util/deep/inner/leaf.rs",
            "pub fn run() { crate::util::deep::helper(); }\n",
        ),
    ]);
    assert_eq!(
        rules(&files),
        [
            "util/deep/inner/leaf.rs:1: circle inside `util/deep/`: inner <-> mod; around it: \
          inner -> mod (util/deep/inner/leaf.rs:1), mod -> inner (util/deep/mod.rs:3)"
        ]
    );
}

#[test]
fn checker_reports_a_child_naming_its_folders_mod_rs_through_super() {
    let mut files = CLEAN.to_vec();
    files.push((
        "session/append.rs",
        "use super::open;\nuse super::{self, state};\n",
    ));
    let got = rules(&files);
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(
        got[0]
            .starts_with("session/append.rs:1: `super::open`: `open` is defined in session/mod.rs"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("session/append.rs:2: `super`: names `session` itself"),
        "{got:#?}"
    );
}

#[test]
fn checker_tolerates_only_the_excepted_folder_and_refuses_a_stale_exception() {
    let mut files = CIRCLE.to_vec();
    files.extend([
        ("store/mod.rs", "pub mod a;\npub mod b;\n"),
        ("store/a.rs", "use super::b::B;\npub struct A;\n"),
        ("store/b.rs", "use super::a::A;\npub struct B;\n"),
    ]);
    let got: Vec<String> = check(&tree(&files), &["config"])
        .into_iter()
        .map(|p| format!("{}:{}: {}", p.path, p.line, p.rule))
        .collect();
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0].starts_with("store/a.rs:1: circle inside `store/`: a <-> b"),
        "{got:#?}"
    );
    let stale: Vec<String> = check(&tree(&CLEAN), &["config"])
        .into_iter()
        .map(|p| format!("{}:{}: {}", p.path, p.line, p.rule))
        .collect();
    assert_eq!(
        stale,
        ["config/:0: no circle left: remove it from CIRCLE_EXCEPTIONS"]
    );
}
