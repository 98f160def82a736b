//! `write_file` (creating missing parent folders) and `edit_file`, both atomic replacements
//! that sweep their own stale temp files beside the file.

use super::diff::line_counts;
use super::input::{
    invalid, io_phrase, open_regular, read_bounded, EditFileIn, WriteFileIn, FILE_BYTES,
};
use crate::store::{replace_atomically, Sweep};
use crate::tools::outcome::{ToolDetails, ToolOutcome};
use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub(crate) fn write_file(i: WriteFileIn, cwd: &Path) -> ToolOutcome {
    if i.content.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    let path = cwd.join(&i.path);
    // Decision 31: missing parent folders are created (with the process umask).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        match fs::create_dir_all(parent) {
            Ok(()) => {}
            // A file stands where a folder should be.
            Err(e)
                if matches!(
                    e.kind(),
                    ErrorKind::NotADirectory | ErrorKind::AlreadyExists
                ) =>
            {
                return ToolOutcome::fail("not a folder")
            }
            Err(e) => return ToolOutcome::fail(io_phrase(&e)),
        }
    }
    // Replace the symlink's target, not the link, as `edit_file` does; a missing file is new.
    let target = match fs::canonicalize(&path) {
        Ok(p) => p,
        Err(e) if e.kind() == ErrorKind::NotFound => path,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    // The old contents (for the card's line counts) and mode (kept); a new file gets the
    // umask's default mode.
    let (before, mode) = match fs::metadata(&target) {
        Ok(m) if m.is_file() => {
            let before = open_regular(&target)
                .ok()
                .and_then(|f| read_bounded(f, FILE_BYTES).ok())
                .map(|(buf, _)| buf)
                .unwrap_or_default();
            (before, Some(m.permissions().mode() & 0o7777))
        }
        Ok(_) => return ToolOutcome::fail("not a file"),
        Err(e) if e.kind() == ErrorKind::NotFound => (Vec::new(), None),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    // Temp file, fsync, rename: a crash leaves the old content or the new, never less.
    if let Err(e) = replace_atomically(&target, i.content.as_bytes(), mode, Sweep::Beside) {
        return ToolOutcome::fail(io_phrase(&e));
    }
    let n = i.content.len();
    let (added, removed) = line_counts(&before, i.content.as_bytes());
    ToolOutcome::success(
        format!("wrote {n} bytes"),
        format!("wrote {n} bytes"),
        false,
    )
    .with(ToolDetails::FileEdit { added, removed })
}

pub(crate) fn edit_file(i: EditFileIn, cwd: &Path) -> ToolOutcome {
    if i.old.is_empty() {
        return invalid("old must not be empty");
    }
    // Edit the symlink's target, not the link: the rename replaces `real`.
    let real = match fs::canonicalize(cwd.join(&i.path)) {
        Ok(p) => p,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let file = match open_regular(&real) {
        Ok(f) => f,
        Err(p) => return ToolOutcome::fail(p),
    };
    let mode = match file.metadata() {
        Ok(m) => m.permissions().mode() & 0o7777,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let hay = match read_bounded(file, FILE_BYTES) {
        Ok((_, true)) => return ToolOutcome::fail("too large"),
        Ok((buf, false)) => buf,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let old = i.old.as_bytes();
    let Some(at) = memchr::memmem::find(&hay, old) else {
        return ToolOutcome::fail("old text not found");
    };
    // Overlapping occurrences count too: "aa" is not unique in "aaa".
    if memchr::memmem::find(&hay[at + 1..], old).is_some() {
        return ToolOutcome::fail("old text not unique");
    }
    let mut edited = Vec::with_capacity(hay.len() - old.len() + i.new.len());
    edited.extend_from_slice(&hay[..at]);
    edited.extend_from_slice(i.new.as_bytes());
    edited.extend_from_slice(&hay[at + old.len()..]);
    if edited.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    match replace_atomically(&real, &edited, Some(mode), Sweep::Beside) {
        // The folder fsync is best effort here: the edit itself is in place.
        Ok(_synced) => {
            let (added, removed) = line_counts(&hay, &edited);
            ToolOutcome::success("edited".to_owned(), "edited".to_owned(), false)
                .with(ToolDetails::FileEdit { added, removed })
        }
        Err(e) => ToolOutcome::fail(io_phrase(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::FILE_BYTES;
    use crate::tools::outcome::ToolOutcome;
    use crate::util::cancel::Cancel;
    use serde_json::{json, Value};
    use std::ffi::OsString;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;
    use std::path::Path;

    fn go(name: &str, input: Value, cwd: &Path) -> ToolOutcome {
        super::super::run_named(name, &input, cwd, &Cancel::default())
    }

    fn assert_invalid(name: &str, input: Value, cwd: &Path) {
        let o = go(name, input.clone(), cwd);
        assert!(!o.ok, "{name} {input}");
        assert_eq!(o.summary, "invalid input", "{name} {input}");
    }

    #[test]
    fn write_file_paths() {
        let d = tempfile::tempdir().unwrap();
        let o = go(
            "write_file",
            json!({"path": "new.txt", "content": "héllo"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "wrote 6 bytes"));
        assert_eq!(
            fs::read_to_string(d.path().join("new.txt")).unwrap(),
            "héllo"
        );
        let o = go(
            "write_file",
            json!({"path": "new.txt", "content": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "wrote 1 bytes"));
        assert_eq!(fs::read_to_string(d.path().join("new.txt")).unwrap(), "x");
        // Decision 31: missing parent folders are created, relative or absolute.
        let o = go(
            "write_file",
            json!({"path": "no/such/f.txt", "content": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "wrote 1 bytes"));
        assert_eq!(
            fs::read_to_string(d.path().join("no/such/f.txt")).unwrap(),
            "x"
        );
        let abs = d.path().join("abs/deeper/g.txt");
        let o = go(
            "write_file",
            json!({"path": abs.to_str().unwrap(), "content": "y"}),
            d.path(),
        );
        assert!(o.ok, "{}", o.summary);
        assert_eq!(fs::read_to_string(&abs).unwrap(), "y");
        // A file where a folder should be is no folder.
        let o = go(
            "write_file",
            json!({"path": "new.txt/inner", "content": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a folder"));
        assert_eq!(fs::read_to_string(d.path().join("new.txt")).unwrap(), "x");
        let o = go("write_file", json!({"path": ".", "content": "x"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        let big = "z".repeat(FILE_BYTES as usize + 1);
        let o = go(
            "write_file",
            json!({"path": "big/f", "content": big}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "too large"));
        assert!(
            !d.path().join("big").exists(),
            "no folder for a refused write"
        );
        let fits = "z".repeat(FILE_BYTES as usize);
        let o = go(
            "write_file",
            json!({"path": "big", "content": fits}),
            d.path(),
        );
        assert!(o.ok);
    }

    #[test]
    fn write_file_replaces_atomically_keeping_mode_and_links() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("w.txt");
        fs::write(&f, "old\n").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o751)).unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let before = ino(&f);
        std::os::unix::fs::symlink("w.txt", d.path().join("l")).unwrap();
        let o = go(
            "write_file",
            json!({"path": "l", "content": "new"}),
            d.path(),
        );
        assert!(o.ok, "{}", o.summary);
        assert_eq!(fs::read_to_string(&f).unwrap(), "new");
        // A new inode renamed over the old one: never truncated in place.
        assert_ne!(ino(&f), before);
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o751
        );
        assert!(fs::symlink_metadata(d.path().join("l"))
            .unwrap()
            .file_type()
            .is_symlink());
        let mut names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        names.sort();
        assert_eq!(names, [OsString::from("l"), OsString::from("w.txt")]);
    }

    #[test]
    fn write_and_edit_report_a_line_diff() {
        use crate::tools::outcome::ToolDetails;
        let d = tempfile::tempdir().unwrap();
        let edit = |added, removed| ToolDetails::FileEdit { added, removed };
        let o = go(
            "write_file",
            json!({"path": "n.txt", "content": "a\nb\nc"}),
            d.path(),
        );
        assert_eq!(
            o.details,
            edit(3, 0),
            "a new file counts all its lines as added"
        );
        let o = go(
            "write_file",
            json!({"path": "n.txt", "content": "a\nB\nc"}),
            d.path(),
        );
        assert_eq!(o.details, edit(1, 1), "an overwrite diffs");
        let o = go(
            "edit_file",
            json!({"path": "n.txt", "old": "a\n", "new": ""}),
            d.path(),
        );
        assert_eq!(o.details, edit(0, 1));
        let o = go(
            "edit_file",
            json!({"path": "n.txt", "old": "zzz", "new": ""}),
            d.path(),
        );
        assert_eq!(o.details, ToolDetails::None, "a failure has no counts");
    }

    #[test]
    fn edit_file_occurrences() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("e.txt");
        fs::write(&f, "one two two\n").unwrap();
        fs::set_permissions(&f, Permissions::from_mode(0o640)).unwrap();
        let o = go(
            "edit_file",
            json!({"path": "e.txt", "old": "three", "new": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "old text not found"));
        let o = go(
            "edit_file",
            json!({"path": "e.txt", "old": "two", "new": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "old text not unique"));
        let o = go(
            "edit_file",
            json!({"path": "e.txt", "old": "one", "new": "1"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "edited"));
        assert_eq!(fs::read_to_string(&f).unwrap(), "1 two two\n");
        assert_eq!(
            fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
            0o640
        );
        // Overlapping occurrences are not unique.
        fs::write(&f, "aaa").unwrap();
        let o = go(
            "edit_file",
            json!({"path": "e.txt", "old": "aa", "new": "b"}),
            d.path(),
        );
        assert_eq!(o.summary, "old text not unique");
        // Empty `old` is refused.
        assert_invalid(
            "edit_file",
            json!({"path": "e.txt", "old": "", "new": "b"}),
            d.path(),
        );
        // No temp file is left behind.
        let names: Vec<_> = fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("e.txt")]);
        // A symlink stays a symlink; its target is edited.
        std::os::unix::fs::symlink("e.txt", d.path().join("l")).unwrap();
        let o = go(
            "edit_file",
            json!({"path": "l", "old": "aaa", "new": "ccc"}),
            d.path(),
        );
        assert!(o.ok);
        assert!(fs::symlink_metadata(d.path().join("l"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_to_string(&f).unwrap(), "ccc");
        let o = go(
            "edit_file",
            json!({"path": "gone", "old": "a", "new": "b"}),
            d.path(),
        );
        assert_eq!(o.summary, "not found");
    }
}
