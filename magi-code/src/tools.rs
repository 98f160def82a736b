//! The six built-in tools of `backend.md` "Tools and approvals", with the inputs of decision 17:
//! exact input validation, bounded reads and output, atomic edits, and a shell whose timeout or
//! cancellation kills its whole process group. Tool access is not an OS sandbox: absolute paths
//! are allowed and the shell runs with the backend's own rights.

use crate::cancel::Cancel;
use crate::redact::sanitize_text;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::collections::BinaryHeap;
use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Largest `output` kept per call.
pub const OUTPUT_BYTES: usize = 64 * 1024;

/// Longest `describe` text and `summary`.
const SUMMARY_BYTES: usize = 1024;
/// Largest file read by `read_file`/`edit_file`, and largest content written.
const FILE_BYTES: u64 = 8 << 20;
const READ_LIMIT_DEFAULT: u64 = 2_000;
const READ_LIMIT_MAX: u64 = 10_000;
const LIST_ENTRIES: usize = 1_000;
const GREP_FILES: usize = 10_000;
const GREP_MATCHES: usize = 500;
const GREP_FILE_BYTES: u64 = 1 << 20;
/// Folders and files `grep` looks at (pending or visited) before it stops, whatever they are.
const GREP_ENTRIES: usize = 100_000;
const SHELL_TIMEOUT_DEFAULT_MS: u64 = 30_000;
const SHELL_TIMEOUT_MAX_MS: u64 = 600_000;
const POLL: Duration = Duration::from_millis(10);
/// How long the pipes may stay open after the process group was killed.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// Appended (on its own line) to an output that was cut.
const TRUNCATED: &str = "[truncated]";

/// Policy class of a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    /// Reads files or folders: `read_file`, `list_dir`, `grep`.
    Read,
    /// Changes files: `write_file`, `edit_file`.
    Write,
    /// Runs a command: `shell`.
    Shell,
}

/// The class of a built-in tool name (`read_file`, `list_dir`, `grep` → Read; `write_file`,
/// `edit_file` → Write; `shell` → Shell), None for unknown names.
#[must_use]
pub fn class(name: &str) -> Option<ToolClass> {
    match name {
        "read_file" | "list_dir" | "grep" => Some(ToolClass::Read),
        "write_file" | "edit_file" => Some(ToolClass::Write),
        "shell" => Some(ToolClass::Shell),
        _ => None,
    }
}

/// What a tool run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// A safe display summary (≤ 1024 bytes, sanitized, no raw output), e.g. "read 120 lines",
    /// "exit 0", "wrote 3 bytes", "invalid input".
    pub summary: String,
    /// The bounded raw result for the model (at most [`OUTPUT_BYTES`] bytes, UTF-8, cut at a
    /// char boundary, with a clear `[truncated]` marker when cut).
    pub output: String,
}

impl ToolOutcome {
    fn success(summary: String, output: String, truncated: bool) -> Self {
        Self {
            ok: true,
            summary: one_line(&summary),
            output: bound_output(output, truncated),
        }
    }

    /// A failure whose output for the model is the summary phrase itself.
    fn fail(phrase: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(phrase.to_owned(), false),
        }
    }

    /// A failure with a longer explanation for the model.
    fn fail_with(phrase: &str, detail: &str) -> Self {
        Self {
            ok: false,
            summary: one_line(phrase),
            output: bound_output(format!("{phrase}: {detail}"), false),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Inputs (decision 17), validated exactly.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadFileIn {
    path: String,
    #[serde(default, deserialize_with = "present")]
    offset: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    limit: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListDirIn {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GrepIn {
    pattern: String,
    #[serde(default, deserialize_with = "present")]
    path: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteFileIn {
    path: String,
    content: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditFileIn {
    path: String,
    old: String,
    new: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellIn {
    command: String,
    #[serde(default, deserialize_with = "present")]
    timeout_ms: Option<u64>,
}

/// An optional field that, when present, must have its type: an explicit `null` is refused.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// Parses a tool input; only a JSON object is accepted (serde would also take an array).
fn parse<'a, T: Deserialize<'a>>(input: &'a Value) -> Result<T, String> {
    if !input.is_object() {
        return Err("expected a JSON object".to_owned());
    }
    T::deserialize(input).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Display helpers.

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Sanitized, one line (every white space becomes a space, ends trimmed), at most
/// [`SUMMARY_BYTES`].
fn one_line(s: &str) -> String {
    let clean: String = sanitize_text(s)
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    cut(clean.trim(), SUMMARY_BYTES).to_owned()
}

/// Bounds a model-facing output to [`OUTPUT_BYTES`], appending the marker when it was cut here
/// or earlier (`truncated`).
fn bound_output(s: String, truncated: bool) -> String {
    if !truncated && s.len() <= OUTPUT_BYTES {
        return s;
    }
    // Room for a separating LF and the marker.
    let mut out = cut(&s, OUTPUT_BYTES - TRUNCATED.len() - 1).to_owned();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(TRUNCATED);
    out
}

/// A short, safe, one-line description of a call for activity/approval summaries, e.g.
/// `read_file src/lib.rs`, `shell: cargo test`; at most 1024 UTF-8 bytes, sanitized, never
/// file contents or tool output.
#[must_use]
pub fn describe(name: &str, input: &Value) -> String {
    let text = match name {
        "read_file" => parse::<ReadFileIn>(input)
            .ok()
            .map(|i| format!("read_file {}", i.path)),
        "list_dir" => parse::<ListDirIn>(input)
            .ok()
            .map(|i| format!("list_dir {}", i.path)),
        "grep" => parse::<GrepIn>(input)
            .ok()
            .map(|i| format!("grep {} in {}", i.pattern, i.path.as_deref().unwrap_or("."))),
        "write_file" => parse::<WriteFileIn>(input)
            .ok()
            .map(|i| format!("write_file {} ({} bytes)", i.path, i.content.len())),
        "edit_file" => parse::<EditFileIn>(input)
            .ok()
            .map(|i| format!("edit_file {}", i.path)),
        "shell" => parse::<ShellIn>(input)
            .ok()
            .map(|i| format!("shell: {}", i.command)),
        _ => return one_line(&format!("unknown tool {name}")),
    };
    one_line(&text.unwrap_or_else(|| format!("{name} (invalid input)")))
}

// ---------------------------------------------------------------------------------------------
// Running.

/// Runs a built-in tool with paths resolved against `cwd`. Never panics; every failure is
/// `ok: false` with a safe summary (a fixed phrase such as "not found", never OS error text).
#[must_use]
pub fn run(name: &str, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    if class(name).is_none() {
        return ToolOutcome::fail("unknown tool");
    }
    if cancel.is_cancelled() {
        return ToolOutcome::fail("cancelled");
    }
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_tool(name, input, cwd, cancel)
    }))
    .unwrap_or_else(|_| ToolOutcome::fail("internal error"))
}

fn run_tool(name: &str, input: &Value, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let result = match name {
        "read_file" => parse(input).map(|i| read_file(i, cwd)),
        "list_dir" => parse(input).map(|i| list_dir(i, cwd, cancel)),
        "grep" => parse(input).map(|i| grep(i, cwd, cancel)),
        "write_file" => parse(input).map(|i| write_file(i, cwd)),
        "edit_file" => parse(input).map(|i| edit_file(i, cwd)),
        "shell" => parse(input).map(|i| shell(i, cwd, cancel)),
        _ => return ToolOutcome::fail("unknown tool"),
    };
    result.unwrap_or_else(|e| invalid(&e))
}

fn invalid(detail: &str) -> ToolOutcome {
    ToolOutcome::fail_with("invalid input", detail)
}

/// A fixed phrase for an I/O error: never the OS text, which may carry paths.
fn io_phrase(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => "not found",
        io::ErrorKind::PermissionDenied => "permission denied",
        io::ErrorKind::IsADirectory => "not a file",
        io::ErrorKind::InvalidInput => "invalid path",
        io::ErrorKind::AlreadyExists => "already exists",
        _ if e.raw_os_error() == Some(libc::ENXIO) => "not a file",
        _ if e.raw_os_error() == Some(libc::ELOOP) => "too many symlinks",
        _ if e.raw_os_error() == Some(libc::ENAMETOOLONG) => "name too long",
        _ if e.raw_os_error() == Some(libc::ENOSPC) => "no space left",
        _ if e.raw_os_error() == Some(libc::EROFS) => "read-only file system",
        _ => "i/o error",
    }
}

/// Opens a regular file for reading without ever blocking on a FIFO or device.
fn open_regular(path: &Path) -> Result<File, &'static str> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| io_phrase(&e))?;
    let meta = file.metadata().map_err(|e| io_phrase(&e))?;
    if meta.is_file() {
        Ok(file)
    } else {
        Err("not a file")
    }
}

/// Reads at most `max` bytes; the flag tells whether more were there.
fn read_bounded(file: File, max: u64) -> io::Result<(Vec<u8>, bool)> {
    let mut buf = Vec::new();
    file.take(max.saturating_add(1)).read_to_end(&mut buf)?;
    let over = buf.len() as u64 > max;
    if over {
        buf.truncate(usize::try_from(max).unwrap_or(usize::MAX));
    }
    Ok((buf, over))
}

fn read_file(i: ReadFileIn, cwd: &Path) -> ToolOutcome {
    let limit = i.limit.unwrap_or(READ_LIMIT_DEFAULT);
    if !(1..=READ_LIMIT_MAX).contains(&limit) {
        return invalid("limit must be 1..=10000");
    }
    let offset = usize::try_from(i.offset.unwrap_or(0)).unwrap_or(usize::MAX);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let file = match open_regular(&cwd.join(&i.path)) {
        Ok(f) => f,
        Err(p) => return ToolOutcome::fail(p),
    };
    let (buf, over) = match read_bounded(file, FILE_BYTES) {
        Ok(r) => r,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let text = String::from_utf8_lossy(&buf);
    let mut pieces = text.split_inclusive('\n');
    if offset > 0 {
        // `nth(offset - 1)` skips `offset` pieces.
        let _ = pieces.nth(offset - 1);
    }
    let mut out = String::new();
    let mut n = 0usize;
    for piece in pieces.by_ref().take(limit) {
        n += 1;
        if out.len() <= OUTPUT_BYTES {
            out.push_str(piece);
        }
    }
    // The 8 MiB cut matters only when the selection ran into it.
    let truncated = over && pieces.next().is_none();
    ToolOutcome::success(format!("read {n} lines"), out, truncated)
}

fn list_dir(i: ListDirIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let path = cwd.join(&i.path);
    match fs::metadata(&path) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return ToolOutcome::fail("not a folder"),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    }
    let entries = match fs::read_dir(&path) {
        Ok(rd) => rd,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    // The smallest LIST_ENTRIES names, kept in a bounded max-heap however big the folder is.
    let mut heap: BinaryHeap<(String, bool)> = BinaryHeap::new();
    let mut total = 0usize;
    for (k, entry) in entries.enumerate() {
        if k % 1024 == 0 && cancel.is_cancelled() {
            return ToolOutcome::fail("cancelled");
        }
        let Ok(entry) = entry else { continue };
        total += 1;
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        heap.push((entry.file_name().to_string_lossy().into_owned(), is_dir));
        if heap.len() > LIST_ENTRIES {
            heap.pop();
        }
    }
    let mut out = String::new();
    for (name, is_dir) in heap.into_sorted_vec() {
        out.push_str(&name);
        if is_dir {
            out.push('/');
        }
        out.push('\n');
    }
    ToolOutcome::success(format!("{total} entries"), out, total > LIST_ENTRIES)
}

/// What `grep` found so far.
struct GrepState {
    re: regex::Regex,
    out: String,
    matches: usize,
    truncated: bool,
}

impl GrepState {
    /// Searches one file; false once the match bound is reached.
    fn search(&mut self, abs: &Path, display: &Path) -> bool {
        let Ok(file) = open_regular(abs) else {
            return true;
        };
        if file.metadata().map_or(true, |m| m.len() > GREP_FILE_BYTES) {
            return true;
        }
        let Ok((buf, over)) = read_bounded(file, GREP_FILE_BYTES) else {
            return true;
        };
        if over || memchr::memchr(0, &buf).is_some() {
            return true;
        }
        let text = String::from_utf8_lossy(&buf);
        let display = display.to_string_lossy();
        for (k, line) in text.lines().enumerate() {
            if !self.re.is_match(line) {
                continue;
            }
            if self.matches == GREP_MATCHES {
                self.truncated = true;
                return false;
            }
            self.matches += 1;
            if self.out.len() <= OUTPUT_BYTES {
                let _ = writeln!(self.out, "{display}:{}:{line}", k + 1);
            }
        }
        true
    }
}

fn grep(i: GrepIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let re = match regex::Regex::new(&i.pattern) {
        Ok(re) => re,
        Err(e) => return ToolOutcome::fail_with("invalid pattern", &e.to_string()),
    };
    let arg = i.path.as_deref().unwrap_or(".");
    let root = cwd.join(arg);
    // Shown paths start from the path as given, without `./`, so they work with `read_file`.
    let base: PathBuf = Path::new(arg)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect();
    let meta = match fs::metadata(&root) {
        Ok(m) => m,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    let mut st = GrepState {
        re,
        out: String::new(),
        matches: 0,
        truncated: false,
    };
    if meta.is_file() {
        st.search(&root, &base);
    } else if meta.is_dir() {
        if let Err(p) = grep_tree(&mut st, root, base, cancel) {
            return ToolOutcome::fail(p);
        }
    } else {
        return ToolOutcome::fail("not a file");
    }
    let summary = format!("{} matches", st.matches);
    ToolOutcome::success(summary, st.out, st.truncated)
}

/// Walks a folder in sorted pre-order: no symlinks, no `.git` or `target` folders, regular
/// files only, within the file and entry bounds.
fn grep_tree(
    st: &mut GrepState,
    root: PathBuf,
    base: PathBuf,
    cancel: &Cancel,
) -> Result<(), &'static str> {
    // (absolute path, shown path, is a folder)
    let mut stack: Vec<(PathBuf, PathBuf, bool)> = vec![(root, base, true)];
    let mut seen = 0usize;
    let mut files = 0usize;
    while let Some((abs, shown, is_dir)) = stack.pop() {
        if cancel.is_cancelled() {
            return Err("cancelled");
        }
        if !is_dir {
            files += 1;
            if files > GREP_FILES {
                st.truncated = true;
                return Ok(());
            }
            if !st.search(&abs, &shown) {
                return Ok(());
            }
            continue;
        }
        let Ok(entries) = fs::read_dir(&abs) else {
            continue;
        };
        let mut children: Vec<(OsString, bool)> = Vec::new();
        for entry in entries {
            seen += 1;
            if seen > GREP_ENTRIES {
                st.truncated = true;
                break;
            }
            let Ok(entry) = entry else { continue };
            let Ok(ft) = entry.file_type() else { continue };
            let name = entry.file_name();
            if ft.is_dir() {
                if name != ".git" && name != "target" {
                    children.push((name, true));
                }
            } else if ft.is_file() {
                children.push((name, false));
            }
            // Symlinks, FIFOs, sockets and devices are skipped.
        }
        children.sort();
        for (name, child_is_dir) in children.into_iter().rev() {
            stack.push((abs.join(&name), shown.join(&name), child_is_dir));
        }
        if st.truncated {
            // The entry bound was hit: search what is already queued, read no more folders.
            stack.retain(|(_, _, d)| !d);
        }
    }
    Ok(())
}

fn write_file(i: WriteFileIn, cwd: &Path) -> ToolOutcome {
    if i.content.len() as u64 > FILE_BYTES {
        return ToolOutcome::fail("too large");
    }
    // Not O_TRUNC: nothing is cut before the target is known to be a regular file, and
    // O_NONBLOCK makes a FIFO without a reader fail (ENXIO) instead of hanging.
    let opened = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK)
        .open(cwd.join(&i.path));
    let mut file = match opened {
        Ok(f) => f,
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    };
    match file.metadata() {
        Ok(m) if m.is_file() => {}
        Ok(_) => return ToolOutcome::fail("not a file"),
        Err(e) => return ToolOutcome::fail(io_phrase(&e)),
    }
    if let Err(e) = file
        .set_len(0)
        .and_then(|()| file.write_all(i.content.as_bytes()))
    {
        return ToolOutcome::fail(io_phrase(&e));
    }
    let n = i.content.len();
    ToolOutcome::success(
        format!("wrote {n} bytes"),
        format!("wrote {n} bytes"),
        false,
    )
}

fn edit_file(i: EditFileIn, cwd: &Path) -> ToolOutcome {
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
    match replace_atomically(&real, &edited, mode) {
        Ok(()) => ToolOutcome::success("edited".to_owned(), "edited".to_owned(), false),
        Err(e) => ToolOutcome::fail(io_phrase(&e)),
    }
}

/// Temp file in the same folder, mode kept, fsync, rename over `path`, then a best-effort
/// fsync of the folder.
fn replace_atomically(path: &Path, data: &[u8], mode: u32) -> io::Result<()> {
    let dir = path.parent().ok_or(io::ErrorKind::InvalidInput)?;
    let tmp = dir.join(format!(".magi-edit-{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = file
        .write_all(data)
        .and_then(|()| file.set_permissions(Permissions::from_mode(mode)))
        .and_then(|()| file.sync_all())
        .and_then(|()| fs::rename(&tmp, path));
    drop(file);
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
        return written;
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Shell.

/// Output kept from both pipes, in arrival order, bounded.
#[derive(Default)]
struct Capture {
    kept: Vec<u8>,
    cut: bool,
}

fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads a pipe to its end so the child never blocks, keeping what fits.
fn drain(mut r: impl Read, cap: &Mutex<Capture>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                let mut c = lock(cap);
                let take = n.min(OUTPUT_BYTES.saturating_sub(c.kept.len()));
                c.kept.extend_from_slice(&chunk[..take]);
                if take < n {
                    c.cut = true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// SIGKILLs the process group that `process_group(0)` made for the child (pgid = its pid).
#[allow(unsafe_code)]
fn kill_group(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // Never 0 (own group) or 1 (kill(-1) signals every process).
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of this process; the negative
    // pid names only the child's own process group.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

fn shell(i: ShellIn, cwd: &Path, cancel: &Cancel) -> ToolOutcome {
    let timeout_ms = i.timeout_ms.unwrap_or(SHELL_TIMEOUT_DEFAULT_MS);
    if !(1..=SHELL_TIMEOUT_MAX_MS).contains(&timeout_ms) {
        return invalid("timeout_ms must be 1..=600000");
    }
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let spawned = Command::new("/bin/sh")
        .arg("-c")
        .arg(&i.command)
        .current_dir(cwd)
        // The backend's provider credentials and trace switch are not the command's business.
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("MAGI_CODE_TRACE")
        .env_remove("MAGI_CODE_TRACE_CHILD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn();
    let Ok(mut child) = spawned else {
        return ToolOutcome::fail("failed to start");
    };
    let pid = child.id();
    let cap = Arc::new(Mutex::new(Capture::default()));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let mut open = 0usize;
    let pipes: [Option<Box<dyn Read + Send>>; 2] = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    for pipe in pipes.into_iter().flatten() {
        let (cap, tx) = (Arc::clone(&cap), done_tx.clone());
        let started = std::thread::Builder::new()
            .name("tool-shell-pipe".to_owned())
            .spawn(move || {
                drain(pipe, &cap);
                let _ = tx.send(());
            });
        if started.is_err() {
            kill_group(pid);
            let _ = child.wait();
            return ToolOutcome::fail("failed to start");
        }
        open += 1;
    }
    drop(done_tx);

    let status = loop {
        if cancel.is_cancelled() {
            return stop(&mut child, pid, &done_rx, open, &cap, "cancelled");
        }
        if Instant::now() >= deadline {
            return stop(&mut child, pid, &done_rx, open, &cap, "timed out");
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(_) => return stop(&mut child, pid, &done_rx, open, &cap, "i/o error"),
        }
        let _ = cancel.sleep(POLL);
    };
    // The shell exited; a process it left behind may still hold the pipes, and the call
    // lasts until they close, within the same timeout and cancellation.
    while open > 0 {
        if cancel.is_cancelled() {
            return stop(&mut child, pid, &done_rx, open, &cap, "cancelled");
        }
        if Instant::now() >= deadline {
            return stop(&mut child, pid, &done_rx, open, &cap, "timed out");
        }
        match done_rx.recv_timeout(POLL) {
            Ok(()) => open -= 1,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    let (ok, summary) = exit_summary(status);
    let (output, cut) = captured(&cap);
    ToolOutcome {
        ok,
        summary: one_line(&summary),
        output: bound_output(output, cut),
    }
}

fn exit_summary(status: ExitStatus) -> (bool, String) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (code == 0, format!("exit {code}")),
        (None, Some(sig)) => (false, format!("killed by signal {sig}")),
        (None, None) => (false, "exited".to_owned()),
    }
}

fn captured(cap: &Mutex<Capture>) -> (String, bool) {
    let c = lock(cap);
    (String::from_utf8_lossy(&c.kept).into_owned(), c.cut)
}

/// Kills the group, reaps the shell, lets the pipes close for a moment, and reports `phrase`
/// with whatever output was captured.
fn stop(
    child: &mut Child,
    pid: u32,
    done: &mpsc::Receiver<()>,
    mut open: usize,
    cap: &Mutex<Capture>,
    phrase: &str,
) -> ToolOutcome {
    kill_group(pid);
    let _ = child.wait();
    let grace = Instant::now() + KILL_GRACE;
    while open > 0 {
        let left = grace.saturating_duration_since(Instant::now());
        if left.is_zero() || done.recv_timeout(left).is_err() {
            // A process that left the group still holds a pipe; its reader ends with it.
            break;
        }
        open -= 1;
    }
    let (output, cut) = captured(cap);
    ToolOutcome {
        ok: false,
        summary: one_line(phrase),
        output: bound_output(output, cut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::os::unix::fs::FileTypeExt;

    fn go(name: &str, input: Value, cwd: &Path) -> ToolOutcome {
        run(name, &input, cwd, &Cancel::default())
    }

    fn assert_invalid(name: &str, input: Value, cwd: &Path) {
        let o = go(name, input.clone(), cwd);
        assert!(!o.ok, "{name} {input}");
        assert_eq!(o.summary, "invalid input", "{name} {input}");
    }

    fn mkfifo(path: &Path) {
        let st = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(st.success());
        assert!(fs::metadata(path).unwrap().file_type().is_fifo());
    }

    /// Whether any live (non-zombie) process is in group `pgid`.
    fn group_alive(pgid: i64) -> bool {
        let Ok(rd) = fs::read_dir("/proc") else {
            return false;
        };
        rd.flatten().any(|e| {
            let Ok(stat) = fs::read_to_string(e.path().join("stat")) else {
                return false;
            };
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.len() > 2 && f[0] != "Z" && f[2].parse::<i64>().ok() == Some(pgid)
        })
    }

    #[test]
    fn group_check_sees_a_live_group() {
        let mut child = Command::new("sleep")
            .arg("5")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = i64::from(child.id());
        assert!(group_alive(pgid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!group_alive(pgid));
    }

    fn wait_group_gone(pgid: i64) {
        let end = Instant::now() + Duration::from_secs(2);
        while group_alive(pgid) {
            assert!(Instant::now() < end, "process group {pgid} still alive");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn classes() {
        assert_eq!(class("read_file"), Some(ToolClass::Read));
        assert_eq!(class("list_dir"), Some(ToolClass::Read));
        assert_eq!(class("grep"), Some(ToolClass::Read));
        assert_eq!(class("write_file"), Some(ToolClass::Write));
        assert_eq!(class("edit_file"), Some(ToolClass::Write));
        assert_eq!(class("shell"), Some(ToolClass::Shell));
        assert_eq!(class("bash"), None);
        assert_eq!(class(""), None);
        let d = tempfile::tempdir().unwrap();
        let o = go("bash", json!({"command": "true"}), d.path());
        assert!(!o.ok);
        assert_eq!(o.summary, "unknown tool");
    }

    #[test]
    fn read_file_success_offset_limit() {
        let d = tempfile::tempdir().unwrap();
        let body: String = (0..10).map(|k| format!("line {k}\n")).collect();
        fs::write(d.path().join("f.txt"), &body).unwrap();
        let o = go("read_file", json!({"path": "f.txt"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (true, "read 10 lines"));
        assert_eq!(o.output, body);
        let o = go(
            "read_file",
            json!({"path": "f.txt", "offset": 3, "limit": 2}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "read 2 lines"));
        assert_eq!(o.output, "line 3\nline 4\n");
        let o = go("read_file", json!({"path": "f.txt", "offset": 9}), d.path());
        assert_eq!(o.output, "line 9\n");
        let o = go(
            "read_file",
            json!({"path": "f.txt", "offset": 50}),
            d.path(),
        );
        assert_eq!(
            (o.ok, o.summary.as_str(), o.output.as_str()),
            (true, "read 0 lines", "")
        );
        // Absolute paths work; a last line without LF counts.
        let abs = d.path().join("g.txt");
        fs::write(&abs, "a\nb").unwrap();
        let o = go(
            "read_file",
            json!({"path": abs.to_str().unwrap()}),
            d.path(),
        );
        assert_eq!(
            (o.summary.as_str(), o.output.as_str()),
            ("read 2 lines", "a\nb")
        );
        // Default limit 2,000 lines.
        fs::write(d.path().join("many"), "x\n".repeat(3_000)).unwrap();
        let o = go("read_file", json!({"path": "many"}), d.path());
        assert_eq!(o.summary, "read 2000 lines");
        let o = go(
            "read_file",
            json!({"path": "many", "limit": 10000}),
            d.path(),
        );
        assert_eq!(o.summary, "read 3000 lines");
        // Lossy UTF-8.
        fs::write(d.path().join("bin"), b"ok\xff\n").unwrap();
        let o = go("read_file", json!({"path": "bin"}), d.path());
        assert_eq!(o.output, "ok\u{fffd}\n");
    }

    #[test]
    fn read_file_failures() {
        let d = tempfile::tempdir().unwrap();
        let o = go("read_file", json!({"path": "missing.txt"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
        assert!(!o.output.contains(d.path().to_str().unwrap()));
        let o = go("read_file", json!({"path": "."}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        fs::write(d.path().join("f"), "x").unwrap();
        let o = go("read_file", json!({"path": "f/g"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
    }

    #[test]
    fn fifo_never_hangs() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("pipe");
        mkfifo(&fifo);
        let start = Instant::now();
        let o = go("read_file", json!({"path": "pipe"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        let o = go(
            "write_file",
            json!({"path": "pipe", "content": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        let o = go(
            "edit_file",
            json!({"path": "pipe", "old": "a", "new": "b"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        fs::write(d.path().join("f.txt"), "needle\n").unwrap();
        let o = go("grep", json!({"pattern": "needle"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (true, "1 matches"));
        let o = go(
            "grep",
            json!({"pattern": "needle", "path": "pipe"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        assert!(start.elapsed() < Duration::from_secs(2));
    }

    #[test]
    fn output_truncation_at_char_boundary() {
        let limit = OUTPUT_BYTES - TRUNCATED.len() - 1;
        // "€" (3 bytes) straddles the cut point.
        let s = format!("{}€{}", "a".repeat(limit - 1), "b".repeat(100));
        assert!(s.len() > OUTPUT_BYTES);
        let out = bound_output(s, false);
        assert!(out.len() <= OUTPUT_BYTES);
        assert!(out == format!("{}\n{TRUNCATED}", "a".repeat(limit - 1)));
        // Exactly OUTPUT_BYTES fits untouched; flagged short output gets the marker.
        let s = "b".repeat(OUTPUT_BYTES);
        assert!(bound_output(s.clone(), false) == s);
        assert_eq!(
            bound_output("x\n".to_owned(), true),
            format!("x\n{TRUNCATED}")
        );
        assert_eq!(bound_output(String::new(), true), TRUNCATED);

        // End to end through read_file: lines of multi-byte characters.
        let d = tempfile::tempdir().unwrap();
        let line = format!("{}\n", "é€😀".repeat(33)); // 9 * 33 + 1 bytes
        fs::write(d.path().join("big"), line.repeat(1_000)).unwrap();
        let o = go("read_file", json!({"path": "big"}), d.path());
        assert!(o.ok);
        assert_eq!(o.summary, "read 1000 lines");
        assert!(o.output.len() <= OUTPUT_BYTES);
        assert!(o.output.len() > OUTPUT_BYTES - 16);
        assert!(o.output.ends_with(&format!("\n{TRUNCATED}")));
        assert!(line
            .repeat(1_000)
            .starts_with(o.output.trim_end_matches(TRUNCATED).trim_end()));
    }

    #[test]
    fn read_file_over_8_mib_is_marked() {
        let d = tempfile::tempdir().unwrap();
        let big = "y\n".repeat((FILE_BYTES as usize) / 2 + 10);
        fs::write(d.path().join("huge"), big).unwrap();
        let o = go("read_file", json!({"path": "huge", "limit": 5}), d.path());
        assert_eq!(
            (o.summary.as_str(), o.output.as_str()),
            ("read 5 lines", "y\n".repeat(5).as_str())
        );
        let offset = (FILE_BYTES as usize) / 2 - 2;
        let o = go(
            "read_file",
            json!({"path": "huge", "offset": offset}),
            d.path(),
        );
        assert_eq!(o.summary, "read 2 lines");
        assert_eq!(o.output, format!("y\ny\n{TRUNCATED}"));
    }

    #[test]
    fn list_dir_sorted_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("b.txt"), "").unwrap();
        fs::write(d.path().join("a.txt"), "").unwrap();
        fs::create_dir(d.path().join("c")).unwrap();
        fs::create_dir(d.path().join("a")).unwrap();
        let o = go("list_dir", json!({"path": "."}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (true, "4 entries"));
        assert_eq!(o.output, "a/\na.txt\nb.txt\nc/\n");
        let o = go("list_dir", json!({"path": "a.txt"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a folder"));
        let o = go("list_dir", json!({"path": "nope"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));

        let many = d.path().join("many");
        fs::create_dir(&many).unwrap();
        for k in (0..1_005).rev() {
            fs::write(many.join(format!("f{k:04}")), "").unwrap();
        }
        let o = go("list_dir", json!({"path": "many"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (true, "1005 entries"));
        let lines: Vec<&str> = o.output.lines().collect();
        assert_eq!(lines.len(), LIST_ENTRIES + 1);
        assert_eq!(lines[0], "f0000");
        assert_eq!(lines[999], "f0999");
        assert_eq!(lines[1000], TRUNCATED);
    }

    #[test]
    fn grep_walks_and_skips() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        fs::create_dir_all(p.join("src/deep")).unwrap();
        fs::create_dir_all(p.join(".git")).unwrap();
        fs::create_dir_all(p.join("target")).unwrap();
        fs::write(p.join("src/lib.rs"), "fn alpha() {}\nfn beta() {}\n").unwrap();
        fs::write(p.join("src/deep/x.rs"), "// nothing\nfn gamma_1() {}\r\n").unwrap();
        fs::write(p.join("a.txt"), "fn in text\n").unwrap();
        fs::write(p.join(".git/config"), "fn hidden\n").unwrap();
        fs::write(p.join("target/out.rs"), "fn built\n").unwrap();
        fs::write(p.join("bin.dat"), b"fn \0 binary\n").unwrap();
        let mut huge = "fn big\n".to_owned();
        huge.push_str(&"z".repeat(GREP_FILE_BYTES as usize));
        fs::write(p.join("huge.txt"), huge).unwrap();
        std::os::unix::fs::symlink(p.join("src"), p.join("link")).unwrap();

        let o = go("grep", json!({"pattern": r"^fn \w+"}), p);
        assert_eq!(
            (o.ok, o.summary.as_str()),
            (true, "4 matches"),
            "{}",
            o.output
        );
        assert_eq!(
            o.output,
            "a.txt:1:fn in text\nsrc/deep/x.rs:2:fn gamma_1() {}\nsrc/lib.rs:1:fn alpha() {}\nsrc/lib.rs:2:fn beta() {}\n"
        );
        let o = go("grep", json!({"pattern": "beta", "path": "./src"}), p);
        assert_eq!(o.output, "src/lib.rs:2:fn beta() {}\n");
        let o = go("grep", json!({"pattern": "alpha", "path": "src/lib.rs"}), p);
        assert_eq!(o.output, "src/lib.rs:1:fn alpha() {}\n");
        let abs = p.join("src");
        let o = go(
            "grep",
            json!({"pattern": "gamma", "path": abs.to_str().unwrap()}),
            p,
        );
        assert_eq!(
            o.output,
            format!("{}/deep/x.rs:2:fn gamma_1() {{}}\n", abs.display())
        );
        let o = go("grep", json!({"pattern": "(unclosed"}), p);
        assert_eq!((o.ok, o.summary.as_str()), (false, "invalid pattern"));
        let o = go("grep", json!({"pattern": "x", "path": "missing"}), p);
        assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
    }

    #[test]
    fn grep_match_bound() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("m"), "hit\n".repeat(GREP_MATCHES)).unwrap();
        let o = go("grep", json!({"pattern": "hit"}), d.path());
        assert_eq!(o.summary, "500 matches");
        assert!(!o.output.contains(TRUNCATED));
        fs::write(d.path().join("n"), "hit\n").unwrap();
        let o = go("grep", json!({"pattern": "hit"}), d.path());
        assert_eq!(o.summary, "500 matches");
        assert!(o.output.ends_with(&format!("m:500:hit\n{TRUNCATED}")));
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
        let o = go(
            "write_file",
            json!({"path": "no/such/f.txt", "content": "x"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "not found"));
        let o = go("write_file", json!({"path": ".", "content": "x"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "not a file"));
        let big = "z".repeat(FILE_BYTES as usize + 1);
        let o = go(
            "write_file",
            json!({"path": "big", "content": big}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "too large"));
        assert!(!d.path().join("big").exists());
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

    #[test]
    fn input_validation() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        fs::write(p.join("f"), "a\n").unwrap();
        let cases = [
            ("read_file", json!({"path": "f", "extra": 1})),
            ("read_file", json!({})),
            ("read_file", json!({"path": 3})),
            ("read_file", json!({"path": "f", "offset": -1})),
            ("read_file", json!({"path": "f", "offset": 1.5})),
            ("read_file", json!({"path": "f", "offset": "1"})),
            ("read_file", json!({"path": "f", "offset": null})),
            ("read_file", json!({"path": "f", "limit": 0})),
            ("read_file", json!({"path": "f", "limit": 10_001})),
            ("read_file", json!(["f"])),
            ("read_file", json!("f")),
            ("read_file", Value::Null),
            ("list_dir", json!({"path": ".", "recursive": true})),
            ("list_dir", json!({})),
            ("list_dir", json!({"path": ["."]})),
            ("grep", json!({"pattern": "x", "glob": "*.rs"})),
            ("grep", json!({"path": "."})),
            ("grep", json!({"pattern": 1})),
            ("grep", json!({"pattern": "x", "path": null})),
            (
                "write_file",
                json!({"path": "w", "content": "x", "mode": 420}),
            ),
            ("write_file", json!({"path": "w"})),
            ("write_file", json!({"path": "w", "content": ["x"]})),
            (
                "edit_file",
                json!({"path": "f", "old": "a", "new": "b", "all": true}),
            ),
            ("edit_file", json!({"path": "f", "old": "a"})),
            ("edit_file", json!({"path": "f", "old": "a", "new": false})),
            ("shell", json!({"command": "true", "env": {}})),
            ("shell", json!({})),
            ("shell", json!({"command": ["true"]})),
            ("shell", json!({"command": "true", "timeout_ms": 0})),
            ("shell", json!({"command": "true", "timeout_ms": 600_001})),
            ("shell", json!({"command": "true", "timeout_ms": "5"})),
        ];
        for (name, input) in cases {
            assert_invalid(name, input, p);
        }
        assert!(!p.join("w").exists());
        assert_eq!(fs::read_to_string(p.join("f")).unwrap(), "a\n");
        let o = go(
            "shell",
            json!({"command": "true", "timeout_ms": 600_000}),
            p,
        );
        assert!(o.ok);
        let o = go(
            "read_file",
            json!({"path": "f", "offset": 0, "limit": 10_000}),
            p,
        );
        assert!(o.ok);
    }

    #[test]
    fn shell_exit_codes_and_output() {
        let d = tempfile::tempdir().unwrap();
        let o = go(
            "shell",
            json!({"command": "echo out; echo err >&2"}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
        assert!(
            o.output.contains("out\n") && o.output.contains("err\n"),
            "{}",
            o.output
        );
        let o = go("shell", json!({"command": "exit 3"}), d.path());
        assert_eq!(
            (o.ok, o.summary.as_str(), o.output.as_str()),
            (false, "exit 3", "")
        );
        let o = go("shell", json!({"command": "kill -9 $$"}), d.path());
        assert_eq!((o.ok, o.summary.as_str()), (false, "killed by signal 9"));
        // Runs in cwd with stdin null.
        fs::write(d.path().join("here"), "").unwrap();
        let o = go("shell", json!({"command": "ls; cat"}), d.path());
        assert_eq!((o.ok, o.output.as_str()), (true, "here\n"));
        let o = go(
            "shell",
            json!({"command": "true"}),
            &d.path().join("missing"),
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "failed to start"));
    }

    #[test]
    fn shell_output_is_bounded_and_drained() {
        let d = tempfile::tempdir().unwrap();
        // Far more than a pipe buffer on both pipes: the child must not block.
        let cmd = "head -c 300000 /dev/zero | tr '\\0' a; head -c 300000 /dev/zero | tr '\\0' b >&2; echo done";
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": cmd, "timeout_ms": 20_000}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
        assert!(start.elapsed() < Duration::from_secs(10));
        assert!(o.output.len() <= OUTPUT_BYTES);
        assert!(o.output.ends_with(&format!("\n{TRUNCATED}")));
    }

    #[test]
    fn shell_timeout_kills_the_group() {
        let d = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 5 & sleep 5", "timeout_ms": 200}),
            d.path(),
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "timed out"));
        let pgid: i64 = o.output.trim().parse().unwrap();
        wait_group_gone(pgid);
    }

    #[test]
    fn shell_waits_for_held_pipes_within_the_timeout() {
        let d = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 5 &", "timeout_ms": 300}),
            d.path(),
        );
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!((o.ok, o.summary.as_str()), (false, "timed out"));
        wait_group_gone(o.output.trim().parse().unwrap());
        // A background process with its own output does not hold the call.
        let o = go(
            "shell",
            json!({"command": "echo $$; sleep 0.3 >/dev/null 2>&1 &", "timeout_ms": 5_000}),
            d.path(),
        );
        assert_eq!((o.ok, o.summary.as_str()), (true, "exit 0"));
    }

    #[test]
    fn shell_cancel_from_another_thread() {
        let d = tempfile::tempdir().unwrap();
        let cancel = Cancel::default();
        let start = Instant::now();
        let o = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(150));
                cancel.cancel();
            });
            run(
                "shell",
                &json!({"command": "echo $$; sleep 5"}),
                d.path(),
                &cancel,
            )
        });
        assert!(start.elapsed() < Duration::from_secs(2));
        assert_eq!((o.ok, o.summary.as_str()), (false, "cancelled"));
        wait_group_gone(o.output.trim().parse().unwrap());
        // Already cancelled: nothing runs.
        let o = run(
            "write_file",
            &json!({"path": "x", "content": ""}),
            d.path(),
            &cancel,
        );
        assert_eq!((o.ok, o.summary.as_str()), (false, "cancelled"));
        assert!(!d.path().join("x").exists());
    }

    #[test]
    fn describe_is_bounded_safe_and_one_line() {
        assert_eq!(
            describe("read_file", &json!({"path": "src/lib.rs"})),
            "read_file src/lib.rs"
        );
        assert_eq!(
            describe("shell", &json!({"command": "cargo test"})),
            "shell: cargo test"
        );
        assert_eq!(describe("list_dir", &json!({"path": "."})), "list_dir .");
        assert_eq!(
            describe("grep", &json!({"pattern": "fn main"})),
            "grep fn main in ."
        );
        assert_eq!(
            describe(
                "write_file",
                &json!({"path": "a", "content": "secret body"})
            ),
            "write_file a (11 bytes)"
        );
        assert_eq!(
            describe("edit_file", &json!({"path": "a", "old": "x", "new": "y"})),
            "edit_file a"
        );
        assert_eq!(
            describe("shell", &json!({"command": 1})),
            "shell (invalid input)"
        );
        assert_eq!(describe("nope\n", &json!({})), "unknown tool nope");
        let d = describe(
            "shell",
            &json!({"command": "curl -H x-api-key:sk-ant-secret123 u"}),
        );
        assert!(!d.contains("sk-ant") && !d.contains("secret123"), "{d}");
        assert!(d.contains("[redacted]"));
        let d = describe(
            "shell",
            &json!({"command": "a\nb\tc\r\u{1b}[31md\u{2028}e"}),
        );
        assert_eq!(d, "shell: a b c[31md e");
        let long = "€".repeat(1_000);
        let d = describe("shell", &json!({ "command": long }));
        assert!(d.len() <= SUMMARY_BYTES && d.len() > SUMMARY_BYTES - 4);
        assert!(d.starts_with("shell: €"));
        // Summaries never carry raw output.
        let tmp = tempfile::tempdir().unwrap();
        let o = go(
            "shell",
            json!({"command": "echo sk-ant-secret123"}),
            tmp.path(),
        );
        assert_eq!(o.summary, "exit 0");
    }
}
