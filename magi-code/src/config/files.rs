//! Bounded reads of the files and folders configuration names (profiles, skills,
//! instructions): regular files only, never blocking on a FIFO.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads at most `bound + 1` bytes of `path` if it is a regular file (`None` if it is anything
/// else); never blocks on a FIFO.
pub(super) fn read_regular(path: &Path, bound: usize) -> io::Result<Option<Vec<u8>>> {
    // O_NONBLOCK: opening a FIFO without a writer returns at once; fstat then rejects it.
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.take(bound as u64 + 1).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// The entries of `dir` (empty when it is missing or not a folder), sorted by name.
pub(super) fn entries(dir: &Path) -> io::Result<Vec<(String, std::path::PathBuf)>> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(Vec::new())
        }
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e?;
        // A name that is not UTF-8 can name neither a profile file we read nor a skill.
        if let Ok(name) = e.file_name().into_string() {
            out.push((name, e.path()));
        }
    }
    out.sort();
    Ok(out)
}
