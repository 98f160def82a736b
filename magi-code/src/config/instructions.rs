//! Instructions (runner.md §3): `MC_HOME/AGENTS.md`, the project's `AGENTS.md` files from its
//! top down to the cwd, then the settings' `instructions` paths, read once at `initialize`.

use super::files::read_regular;
use super::invalid::Invalid;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Most bytes kept of one file.
pub const FILE_BYTES: usize = 32 * 1024;
/// Most bytes of the joined text, separators included.
pub const TOTAL_BYTES: usize = 64 * 1024;
/// What joins two files' texts: one blank line.
const SEP: &str = "\n\n";
/// The per-folder instructions file.
const AGENTS_MD: &str = "AGENTS.md";

/// Loads the instructions text of a child whose storage root is `root` and working directory
/// `cwd` (both canonical). A missing `AGENTS.md` (or a folder of that name) is skipped; an
/// `instructions` path that is missing, unreadable or not a regular file is invalid.
pub fn load(root: &Path, cwd: &Path, paths: &[String]) -> Result<String, Invalid> {
    let mut out = Joined::default();
    let global = root.join(AGENTS_MD);
    out.optional(&global)?;
    for dir in project_dirs(cwd) {
        let file = dir.join(AGENTS_MD);
        // MC_HOME inside the project must not repeat the same file.
        if file != global {
            out.optional(&file)?;
        }
    }
    for p in paths {
        out.required(&cwd.join(p))?;
    }
    Ok(out.text)
}

/// The folders from the project top (the nearest ancestor of `cwd`, itself included, holding
/// a `.git` folder or file) down to `cwd`, outermost first; just `cwd` outside a repository.
#[must_use]
pub fn project_dirs(cwd: &Path) -> Vec<PathBuf> {
    let top = cwd
        .ancestors()
        .find(|d| fs::symlink_metadata(d.join(".git")).is_ok())
        .unwrap_or(cwd);
    let mut dirs: Vec<PathBuf> = cwd
        .ancestors()
        .take_while(|d| *d != top)
        .map(Path::to_path_buf)
        .collect();
    dirs.push(top.to_path_buf());
    dirs.reverse();
    dirs
}

/// The joined text under construction.
#[derive(Default)]
struct Joined {
    text: String,
}

impl Joined {
    /// Bytes the next file may add: the per-file bound, less what the total leaves.
    fn room(&self) -> usize {
        let used = if self.text.is_empty() {
            0
        } else {
            self.text.len() + SEP.len()
        };
        FILE_BYTES.min(TOTAL_BYTES.saturating_sub(used))
    }

    fn push(&mut self, part: &str) {
        if part.is_empty() {
            return;
        }
        if !self.text.is_empty() {
            self.text.push_str(SEP);
        }
        self.text.push_str(part);
    }

    /// An `AGENTS.md`: absent or not a regular file → skipped; present but unreadable →
    /// invalid, since silently dropping instructions someone wrote would be worse.
    fn optional(&mut self, path: &Path) -> Result<(), Invalid> {
        match read_bounded(path, self.room()) {
            Ok(Some(part)) => self.push(&part),
            Ok(None) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) => {}
            Err(_) => return Err(Invalid("AGENTS.md unreadable")),
        }
        Ok(())
    }

    /// A settings `instructions` path: it must name a readable regular file, also when the
    /// total is already spent (so the outcome never depends on other files' sizes).
    fn required(&mut self, path: &Path) -> Result<(), Invalid> {
        match read_bounded(path, self.room()) {
            Ok(Some(part)) => {
                self.push(&part);
                Ok(())
            }
            Ok(None) => Err(Invalid("instructions path not a file")),
            Err(_) => Err(Invalid("instructions path unreadable")),
        }
    }
}

/// Reads at most `bound` bytes of text from `path` if it is a regular file (`None` if it is
/// anything else). Never reads more than `bound + 1` bytes and never blocks on a FIFO.
/// Invalid UTF-8 becomes U+FFFD; the bound applies to the text after that, cut at the last
/// character boundary at or before it.
fn read_bounded(path: &Path, bound: usize) -> io::Result<Option<String>> {
    let Some(bytes) = read_regular(path, bound)? else {
        return Ok(None);
    };
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text.truncate(floor_char_boundary(&text, bound));
    Ok(Some(text))
}

/// The largest character boundary of `s` at or before `at`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    if at >= s.len() {
        return s.len();
    }
    // A boundary is at most 3 bytes back (UTF-8 sequences are at most 4 bytes long).
    (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `<tmp>/home` (the storage root) and `<tmp>/repo/a/b` (the cwd), canonical.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(d.path()).unwrap();
        let root = base.join("home");
        let cwd = base.join("repo").join("a").join("b");
        fs::create_dir_all(&root).unwrap();
        fs::create_dir_all(&cwd).unwrap();
        (d, root, cwd)
    }

    fn write(path: &Path, text: impl AsRef<[u8]>) {
        fs::write(path, text).unwrap();
    }

    fn fifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo").arg(path).status();
        assert!(ok.unwrap().success(), "mkfifo failed");
    }

    fn repo(cwd: &Path) -> PathBuf {
        cwd.parent().unwrap().parent().unwrap().to_path_buf()
    }

    #[test]
    fn order_is_home_then_project_top_down_then_settings_paths() {
        let (_d, root, cwd) = tree();
        let repo = repo(&cwd);
        fs::create_dir(repo.join(".git")).unwrap();
        write(&root.join(AGENTS_MD), "home");
        write(&repo.parent().unwrap().join(AGENTS_MD), "above the top");
        write(&repo.join(AGENTS_MD), "top");
        // repo/a has none: skipped.
        write(&cwd.join(AGENTS_MD), "cwd");
        write(&cwd.join("notes.md"), "relative");
        let abs = repo.join("abs.md");
        write(&abs, "absolute");
        let paths = ["notes.md".to_owned(), abs.to_str().unwrap().to_owned()];
        assert_eq!(
            load(&root, &cwd, &paths).unwrap(),
            "home\n\ntop\n\ncwd\n\nrelative\n\nabsolute"
        );
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "home\n\ntop\n\ncwd");
    }

    #[test]
    fn project_top_is_the_nearest_git_folder_or_file() {
        let (_d, _root, cwd) = tree();
        let repo = repo(&cwd);
        let a = cwd.parent().unwrap().to_path_buf();
        fs::create_dir(repo.join(".git")).unwrap();
        assert_eq!(
            project_dirs(&cwd),
            vec![repo.clone(), a.clone(), cwd.clone()]
        );
        // A worktree or submodule has a `.git` file; the nearer one wins.
        write(&a.join(".git"), "gitdir: /elsewhere");
        assert_eq!(project_dirs(&cwd), vec![a, cwd.clone()]);
        // The cwd itself can be the top.
        fs::create_dir(cwd.join(".git")).unwrap();
        assert_eq!(project_dirs(&cwd), vec![cwd.clone()]);
    }

    #[test]
    fn without_git_only_the_cwd_counts() {
        let (_d, root, cwd) = tree();
        if cwd.ancestors().any(|d| d.join(".git").exists()) {
            return; // the temporary folder lives inside a repository: nothing to test here
        }
        assert_eq!(project_dirs(&cwd), vec![cwd.clone()]);
        write(&repo(&cwd).join(AGENTS_MD), "not the project");
        write(&cwd.join(AGENTS_MD), "cwd");
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "cwd");
    }

    #[test]
    fn home_agents_md_inside_the_project_is_read_once() {
        let (_d, _root, cwd) = tree();
        fs::create_dir(cwd.join(".git")).unwrap();
        write(&cwd.join(AGENTS_MD), "once");
        assert_eq!(load(&cwd, &cwd, &[]).unwrap(), "once");
    }

    #[test]
    fn per_file_bound_edges() {
        let (_d, root, cwd) = tree();
        let f = cwd.join("f.md");
        let paths = ["f.md".to_owned()];
        write(&f, "a".repeat(FILE_BYTES));
        assert_eq!(load(&root, &cwd, &paths).unwrap(), "a".repeat(FILE_BYTES));
        write(&f, "a".repeat(FILE_BYTES + 1));
        assert_eq!(load(&root, &cwd, &paths).unwrap(), "a".repeat(FILE_BYTES));
        // A two-byte character across the cut goes whole.
        write(&f, format!("{}é", "a".repeat(FILE_BYTES - 1)));
        assert_eq!(
            load(&root, &cwd, &paths).unwrap(),
            "a".repeat(FILE_BYTES - 1)
        );
        // A two-byte character ending exactly at the bound stays.
        write(&f, format!("{}éz", "a".repeat(FILE_BYTES - 2)));
        assert_eq!(
            load(&root, &cwd, &paths).unwrap(),
            format!("{}é", "a".repeat(FILE_BYTES - 2))
        );
        // AGENTS.md files have the same bound.
        write(&cwd.join(AGENTS_MD), "b".repeat(FILE_BYTES + 10));
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "b".repeat(FILE_BYTES));
    }

    #[test]
    fn total_bound_edges() {
        let (_d, root, cwd) = tree();
        write(&root.join(AGENTS_MD), "h".repeat(FILE_BYTES));
        write(&cwd.join("x.md"), "x".repeat(FILE_BYTES));
        write(&cwd.join("y.md"), "y");
        let paths = ["x.md".to_owned(), "y.md".to_owned()];
        let text = load(&root, &cwd, &paths).unwrap();
        assert_eq!(text.len(), TOTAL_BYTES, "separators count toward the total");
        let want = format!(
            "{}\n\n{}",
            "h".repeat(FILE_BYTES),
            "x".repeat(FILE_BYTES - 2)
        );
        assert_eq!(text, want);
        // One byte less in the first file leaves room for exactly the whole second one.
        write(&root.join(AGENTS_MD), "h".repeat(FILE_BYTES - 2));
        let text = load(&root, &cwd, &paths[..1]).unwrap();
        assert_eq!(text.len(), TOTAL_BYTES);
        assert!(text.ends_with(&"x".repeat(FILE_BYTES)));
        // A multi-byte character across the total's cut goes whole.
        write(&root.join(AGENTS_MD), "h".repeat(FILE_BYTES - 1));
        write(
            &cwd.join("x.md"),
            format!("{}€", "x".repeat(FILE_BYTES - 2)),
        );
        let text = load(&root, &cwd, &paths[..1]).unwrap();
        assert_eq!(text.len(), TOTAL_BYTES - 1);
        assert!(text.ends_with('x'));
    }

    #[test]
    fn invalid_utf8_is_replaced_and_still_bounded() {
        let (_d, root, cwd) = tree();
        write(&cwd.join(AGENTS_MD), b"ok \xff!");
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "ok \u{fffd}!");
        write(&cwd.join(AGENTS_MD), vec![0xff; FILE_BYTES]);
        let text = load(&root, &cwd, &[]).unwrap();
        assert!(text.len() <= FILE_BYTES && text.len() > FILE_BYTES - 3);
        assert!(text.chars().all(|c| c == '\u{fffd}'));
    }

    #[test]
    fn missing_or_odd_agents_md_is_skipped() {
        let (_d, root, cwd) = tree();
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "");
        fs::create_dir(root.join(AGENTS_MD)).unwrap();
        fifo(&cwd.join(AGENTS_MD));
        assert_eq!(load(&root, &cwd, &[]).unwrap(), "");
    }

    #[test]
    fn bad_instructions_paths_are_invalid() {
        let (_d, root, cwd) = tree();
        write(&cwd.join("ok.md"), "ok");
        fs::create_dir(cwd.join("dir")).unwrap();
        fifo(&cwd.join("pipe"));
        write(&cwd.join("file"), "not a folder");
        for bad in ["missing.md", "dir", "pipe", "file/below.md", ""] {
            let paths = ["ok.md".to_owned(), bad.to_owned()];
            assert!(load(&root, &cwd, &paths).is_err(), "{bad:?} accepted");
        }
        assert_eq!(load(&root, &cwd, &["ok.md".to_owned()]).unwrap(), "ok");
    }

    #[test]
    fn instructions_paths_are_checked_after_the_total_is_spent() {
        let (_d, root, cwd) = tree();
        write(&cwd.join("big.md"), "a".repeat(FILE_BYTES));
        let paths: Vec<String> = ["big.md", "big.md", "big.md", "missing.md"]
            .map(str::to_owned)
            .to_vec();
        assert!(load(&root, &cwd, &paths).is_err());
        assert_eq!(load(&root, &cwd, &paths[..3]).unwrap().len(), TOTAL_BYTES);
    }

    #[test]
    fn unreadable_files_are_invalid() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, root, cwd) = tree();
        // A regular file whose read fails (EIO), whatever our privileges.
        let mem = Path::new("/proc/self/mem");
        assert!(load(&root, &cwd, &[mem.to_str().unwrap().to_owned()]).is_err());
        std::os::unix::fs::symlink(mem, cwd.join(AGENTS_MD)).unwrap();
        assert!(
            load(&root, &cwd, &[]).is_err(),
            "an unreadable AGENTS.md is not skipped"
        );
        fs::remove_file(cwd.join(AGENTS_MD)).unwrap();
        let f = cwd.join("secret.md");
        write(&f, "x");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o000)).unwrap();
        if fs::File::open(&f).is_ok() {
            return; // running with privileges that ignore modes: nothing to test here
        }
        assert!(load(&root, &cwd, &["secret.md".to_owned()]).is_err());
        fs::rename(&f, cwd.join(AGENTS_MD)).unwrap();
        assert!(load(&root, &cwd, &[]).is_err());
    }
}
