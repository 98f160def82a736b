//! Agent profiles (`runner.md` 7): `MC_HOME/agents/*.md` and `<cwd>/.magi/agents/*.md`, each a
//! YAML front matter (`name`, `description`, optional `tools` and `model`) and a body.

use super::front_matter::{self, Doc};
use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Largest profile file read; a larger one is invalid.
pub const PROFILE_FILE_BYTES: usize = 32 * 1024;
/// Most profile files in one folder; more are invalid.
pub const MAX_PROFILES_PER_FOLDER: usize = 64;
/// Longest profile description (it is named in the `task` tool's description).
pub const DESCRIPTION_BYTES: usize = 1024;
/// Longest tool name in a profile's `tools`.
pub const TOOL_NAME_BYTES: usize = 128;

/// One admitted profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name (ID grammar), from the front matter.
    pub name: String,
    /// What it is for (named in the `task` tool's description).
    pub description: String,
    /// The tools it may use, when given (names as offered to the model).
    pub tools: Option<Vec<String>>,
    /// `provider/model` it runs on, when given.
    pub model: Option<String>,
    /// Its instructions (the Markdown after the front matter).
    pub body: String,
}

/// A profile problem; startup reports it as `profile_invalid` without detail on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileInvalid(pub &'static str);

/// Whether `s` may name a profile (or a skill): the ID grammar.
#[must_use]
pub fn is_name(s: &str) -> bool {
    protocol_core::ids::is_id_grammar(s)
}

/// Whether `s` is `provider/model`, both parts non-empty and free of control characters.
fn is_model(s: &str) -> bool {
    s.len() <= 2 * protocol_core::limits::NAME_BYTES
        && !s.chars().any(char::is_control)
        && s.split_once('/')
            .is_some_and(|(p, m)| is_name(p) && !m.trim().is_empty())
}

fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= TOOL_NAME_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Reads one profile from a file's bytes (sans-IO).
pub fn parse(bytes: &[u8]) -> Result<Profile, ProfileInvalid> {
    if bytes.len() > PROFILE_FILE_BYTES {
        return Err(ProfileInvalid("file too large"));
    }
    let doc = front_matter::parse(bytes).map_err(|e| ProfileInvalid(e.0))?;
    from_doc(&doc)
}

fn from_doc(doc: &Doc) -> Result<Profile, ProfileInvalid> {
    let bad = |e: front_matter::Bad| ProfileInvalid(e.0);
    let name = doc
        .text("name")
        .map_err(bad)?
        .ok_or(ProfileInvalid("no name"))?;
    if !is_name(name) {
        return Err(ProfileInvalid("bad name"));
    }
    let description = doc
        .text("description")
        .map_err(bad)?
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .ok_or(ProfileInvalid("no description"))?;
    if description.len() > DESCRIPTION_BYTES || description.chars().any(char::is_control) {
        return Err(ProfileInvalid("bad description"));
    }
    let tools = doc.list("tools").map_err(bad)?.map(<[String]>::to_vec);
    if tools
        .as_ref()
        .is_some_and(|t| !t.iter().all(|n| is_tool_name(n)))
    {
        return Err(ProfileInvalid("bad tool name"));
    }
    let model = doc.text("model").map_err(bad)?.map(str::to_owned);
    if model.as_deref().is_some_and(|m| !is_model(m)) {
        return Err(ProfileInvalid("bad model"));
    }
    Ok(Profile {
        name: name.to_owned(),
        description: description.to_owned(),
        tools,
        model,
        body: doc.body.trim().to_owned(),
    })
}

/// Reads at most `bound + 1` bytes of `path` if it is a regular file (`None` if it is anything
/// else); never blocks on a FIFO.
pub(crate) fn read_regular(path: &Path, bound: usize) -> io::Result<Option<Vec<u8>>> {
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
pub(crate) fn entries(dir: &Path) -> io::Result<Vec<(String, std::path::PathBuf)>> {
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

/// The profiles of one `agents` folder by name.
fn load_folder(dir: &Path) -> Result<BTreeMap<String, Profile>, ProfileInvalid> {
    let mut out = BTreeMap::new();
    let mut files = 0usize;
    for (file, path) in entries(dir).map_err(|_| ProfileInvalid("folder unreadable"))? {
        if !file.ends_with(".md") {
            continue;
        }
        let bytes = match read_regular(&path, PROFILE_FILE_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(_) => return Err(ProfileInvalid("file unreadable")),
        };
        files += 1;
        if files > MAX_PROFILES_PER_FOLDER {
            return Err(ProfileInvalid("too many profiles"));
        }
        let p = parse(&bytes)?;
        if out.contains_key(&p.name) {
            return Err(ProfileInvalid("duplicate name"));
        }
        out.insert(p.name.clone(), p);
    }
    Ok(out)
}

/// Loads the profiles of a child whose storage root is `root` and cwd `cwd`: the project's win
/// over global ones of the same name; the result is in name order. `agent` (settings) must
/// name one of them.
pub fn load(root: &Path, cwd: &Path, agent: Option<&str>) -> Result<Vec<Profile>, ProfileInvalid> {
    let mut all = load_folder(&root.join("agents"))?;
    all.extend(load_folder(&cwd.join(".magi").join("agents"))?);
    if agent.is_some_and(|a| !all.contains_key(a)) {
        return Err(ProfileInvalid("unknown agent"));
    }
    Ok(all.into_values().collect())
}

/// The primary profile (settings `agent`), if any.
#[must_use]
pub fn primary<'a>(profiles: &'a [Profile], agent: Option<&str>) -> Option<&'a Profile> {
    agent.and_then(|a| profiles.iter().find(|p| p.name == a))
}
