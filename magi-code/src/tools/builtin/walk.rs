//! Which files a search sees (`backend.md` "Tools and approvals"): ripgrep's rules, through
//! ripgrep's own walker (`ignore`). Inside a git repository its `.gitignore` files, nested ones
//! too, `.git/info/exclude` and the global excludes file; `.ignore` and `.rgignore` anywhere;
//! no hidden names (so no `.git`); no symbolic link followed. The folder searched is walked
//! whatever the rules say of it (naming it is asking for it). The walk runs on several
//! threads; its callers sort what it gives, so the result is the same every time.

use crate::util::cancel::Cancel;
use globset::{GlobBuilder, GlobMatcher};
use ignore::{ParallelVisitor, ParallelVisitorBuilder, WalkBuilder, WalkState};
use std::path::{Component, Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The walk's threads: what pays on this kind of machine without starving the backend.
const THREADS: usize = 4;

/// Where a search looks: the path as the tool was given it, resolved against the cwd.
#[derive(Debug, Clone)]
pub(crate) struct Root {
    /// The absolute, lexically normalized path.
    pub(crate) abs: PathBuf,
    /// The cwd its files are shown relative to (when inside it).
    cwd: PathBuf,
}

impl Root {
    /// `path` (default `.`) against `cwd`, with `.` and `..` resolved lexically.
    pub(crate) fn new(cwd: &Path, path: Option<&str>) -> Self {
        let cwd = normalize(cwd);
        Self {
            abs: normalize(&cwd.join(path.unwrap_or("."))),
            cwd,
        }
    }

    /// How `abs` (a path under the root) is printed: relative to the cwd when inside it,
    /// else absolute.
    pub(crate) fn show(&self, abs: &Path) -> String {
        match abs.strip_prefix(&self.cwd) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => abs.to_string_lossy().into_owned(),
        }
    }
}

/// `p` with `.` left out and `..` taking off the component before it (never past the root).
fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The `glob` narrowing of a search: a pattern without `/` matches a file's name at any
/// depth, one with `/` its path relative to the searched folder.
#[derive(Debug, Clone)]
pub(crate) struct Pattern {
    matcher: GlobMatcher,
    by_name: bool,
}

impl Pattern {
    /// The pattern, or why it is not one (a fixed phrase).
    pub(crate) fn new(pattern: &str) -> Result<Self, String> {
        let by_name = !pattern.contains('/');
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| e.kind().to_string())?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            by_name,
        })
    }

    /// Whether the file `abs`, found under `root`, matches.
    pub(crate) fn matches(&self, root: &Path, abs: &Path) -> bool {
        if self.by_name {
            return abs.file_name().is_some_and(|n| self.matcher.is_match(n));
        }
        abs.strip_prefix(root)
            .is_ok_and(|rel| self.matcher.is_match(rel))
    }
}

/// The walker of `root` with the rules above, on [`THREADS`] threads.
fn walker(root: &Path) -> ignore::WalkParallel {
    WalkBuilder::new(root)
        .hidden(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .parents(true)
        .follow_links(false)
        .add_custom_ignore_filename(".rgignore")
        .threads(THREADS)
        .build_parallel()
}

/// Calls `visit` with every regular file under `root` that the rules let through, on the
/// walker's threads, until `visit` says stop or `cancel` is set.
pub(crate) fn files(root: &Path, cancel: &Cancel, visit: &(dyn Fn(&Path) -> bool + Sync)) {
    drop(gather(root, cancel, &|| (), &|(), path| visit(path)));
}

/// Like [`files`], each walker thread with its own state from `init` (no lock per file): the
/// states, once the walk is over.
pub(crate) fn gather<S: Send>(
    root: &Path,
    cancel: &Cancel,
    init: &(dyn Fn() -> S + Sync),
    visit: &(dyn Fn(&mut S, &Path) -> bool + Sync),
) -> Vec<S> {
    let out = Mutex::new(Vec::new());
    let mut builder = Threads {
        init,
        visit,
        cancel,
        out: &out,
    };
    walker(root).visit(&mut builder);
    out.into_inner().unwrap_or_else(PoisonError::into_inner)
}

/// Makes each walker thread's visitor.
struct Threads<'a, S> {
    init: &'a (dyn Fn() -> S + Sync),
    visit: &'a (dyn Fn(&mut S, &Path) -> bool + Sync),
    cancel: &'a Cancel,
    out: &'a Mutex<Vec<S>>,
}

impl<'s, S: Send + 's> ParallelVisitorBuilder<'s> for Threads<'s, S> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Thread {
            state: Some((self.init)()),
            visit: self.visit,
            cancel: self.cancel,
            out: self.out,
        })
    }
}

/// One walker thread's visitor: its state goes to `out` when the thread is done.
struct Thread<'a, S> {
    state: Option<S>,
    visit: &'a (dyn Fn(&mut S, &Path) -> bool + Sync),
    cancel: &'a Cancel,
    out: &'a Mutex<Vec<S>>,
}

impl<S: Send> ParallelVisitor for Thread<'_, S> {
    fn visit(&mut self, entry: Result<ignore::DirEntry, ignore::Error>) -> WalkState {
        if self.cancel.is_cancelled() {
            return WalkState::Quit;
        }
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return WalkState::Continue;
        }
        let Some(state) = self.state.as_mut() else {
            return WalkState::Quit;
        };
        if (self.visit)(state, entry.path()) {
            WalkState::Continue
        } else {
            WalkState::Quit
        }
    }
}

impl<S> Drop for Thread<'_, S> {
    fn drop(&mut self) {
        if let Some(s) = self.state.take() {
            self.out
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_show_relative_to_the_cwd_inside_it_and_absolute_outside() {
        let r = Root::new(Path::new("/w/cwd"), Some("./src/../lib"));
        assert_eq!(r.abs, Path::new("/w/cwd/lib"));
        assert_eq!(r.show(Path::new("/w/cwd/lib/a.rs")), "lib/a.rs");
        let out = Root::new(Path::new("/w/cwd"), Some("../other"));
        assert_eq!(out.show(Path::new("/w/other/b.rs")), "/w/other/b.rs");
        assert_eq!(
            Root::new(Path::new("/w/cwd"), None).show(Path::new("/w/cwd")),
            "."
        );
    }

    #[test]
    fn a_pattern_without_a_slash_is_a_name_at_any_depth() {
        let root = Path::new("/r");
        let rs = Pattern::new("*.rs").unwrap();
        assert!(rs.matches(root, Path::new("/r/a/b/c.rs")));
        assert!(!rs.matches(root, Path::new("/r/a/b/c.rsx")));
        let src = Pattern::new("src/**").unwrap();
        assert!(src.matches(root, Path::new("/r/src/a/b.rs")));
        assert!(!src.matches(root, Path::new("/r/lib/src/b.rs")));
        let one = Pattern::new("src/*.rs").unwrap();
        assert!(one.matches(root, Path::new("/r/src/a.rs")));
        assert!(!one.matches(root, Path::new("/r/src/a/b.rs")));
        assert!(Pattern::new("a[").is_err());
    }
}
