//! Agent profiles (`runner.md` 7): `MC_HOME/agents/*.md` and `<cwd>/.magi/agents/*.md`, each a
//! YAML front matter (`name`, `description`, optional `tools` and `model`) and a body.

use super::files::{entries, read_regular};
use super::front_matter::{self, Doc};
use super::invalid::Invalid;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::path::Path;

/// Largest profile file read; a larger one is invalid.
pub const PROFILE_FILE_BYTES: usize = 32 * 1024;
/// Most profile files in one folder; more are invalid.
pub const MAX_PROFILES_PER_FOLDER: usize = 64;
/// Longest profile description (it is named in the `task` tool's description).
pub const DESCRIPTION_BYTES: usize = 1024;
/// Longest tool name in a profile's `tools`.
pub const TOOL_NAME_BYTES: usize = 128;
/// Most names in `agents.disabled` or `skills.disabled`.
pub const MAX_DISABLED_NAMES: usize = 256;

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

/// A profile or skill name: the ID grammar (at most 64 bytes).
pub(super) fn id_name(v: &Value) -> Result<String, Invalid> {
    match v.as_str() {
        Some(n) if protocol_core::ids::is_id_grammar(n) => Ok(n.to_owned()),
        _ => Err(Invalid("bad name")),
    }
}

/// `{"disabled": [name, ...]}` of `agents` or `skills`.
pub(super) fn disabled(v: &Value) -> Result<Vec<String>, Invalid> {
    let o = v.as_object().ok_or(Invalid("not an object"))?;
    if o.keys().any(|k| k != "disabled") {
        return Err(Invalid("unknown key"));
    }
    let Some(list) = o.get("disabled") else {
        return Ok(Vec::new());
    };
    let list = list.as_array().ok_or(Invalid("not an array"))?;
    if list.len() > MAX_DISABLED_NAMES {
        return Err(Invalid("too many disabled names"));
    }
    list.iter().map(id_name).collect()
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::path::PathBuf;

    /// A storage root and a cwd, canonical, in one temporary folder.
    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(d.path()).unwrap();
        let (root, cwd) = (base.join("home"), base.join("cwd"));
        fs::create_dir_all(root.join("agents")).unwrap();
        fs::create_dir_all(cwd.join(".magi").join("agents")).unwrap();
        (d, root, cwd)
    }

    fn md(name: &str, extra: &str, body: &str) -> String {
        format!("---\nname: {name}\ndescription: The {name} profile.\n{extra}---\n{body}")
    }

    fn put(dir: &Path, file: &str, text: impl AsRef<[u8]>) {
        fs::write(dir.join(file), text).unwrap();
    }

    #[test]
    fn a_profile_parses_with_tools_model_and_body() {
        let p = parse(
            md(
                "rev",
                "tools: [read_file, mcp__fs__read]\nmodel: anthropic/claude-x\n",
                "\nReview.\n",
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            p,
            Profile {
                name: "rev".into(),
                description: "The rev profile.".into(),
                tools: Some(vec!["read_file".into(), "mcp__fs__read".into()]),
                model: Some("anthropic/claude-x".into()),
                body: "Review.".into(),
            }
        );
        let p = parse(md("plain", "tools:\n  - grep\n", "").as_bytes()).unwrap();
        assert_eq!(
            (p.tools, p.model, p.body.as_str()),
            (Some(vec!["grep".into()]), None, "")
        );
        let p = parse(md("none", "color: blue\n", "x").as_bytes()).unwrap();
        assert_eq!(p.tools, None, "unknown keys are ignored");
    }

    #[test]
    fn every_invalid_profile_cause() {
        let long_desc = format!(
            "---\nname: a\ndescription: {}\n---\n",
            "d".repeat(DESCRIPTION_BYTES + 1)
        );
        let bad = [
            "no front matter at all".to_owned(),
            "---\nname: a\ndescription: b\n".to_owned(),
            "---\ndescription: b\n---\n".to_owned(),
            "---\nname: a\n---\n".to_owned(),
            "---\nname: a\ndescription:\n---\n".to_owned(),
            md("has space", "", ""),
            md("a/b", "", ""),
            md(&"n".repeat(65), "", ""),
            md("a", "model: no-slash\n", ""),
            md("a", "model: /m\n", ""),
            md("a", "model: p/\n", ""),
            md("a", "model: [a/b]\n", ""),
            md("a", "tools: read_file\n", ""),
            md("a", "tools: [\"has space\"]\n", ""),
            md("a", "tools:\n  key: v\n", ""),
            "---\nname: [a]\ndescription: b\n---\n".to_owned(),
            long_desc,
        ];
        for b in &bad {
            assert!(parse(b.as_bytes()).is_err(), "{b:?}");
        }
        let ok = format!(
            "---\nname: a\ndescription: {}\n---\n",
            "d".repeat(DESCRIPTION_BYTES)
        );
        assert!(parse(ok.as_bytes()).is_ok());
        assert!(parse(md(&"n".repeat(64), "", "").as_bytes()).is_ok());
    }

    #[test]
    fn file_size_bound_edge() {
        let head = md("a", "", "");
        let fill = |n: usize| format!("{head}{}", "x".repeat(n - head.len()));
        assert!(parse(fill(PROFILE_FILE_BYTES).as_bytes()).is_ok());
        assert_eq!(
            parse(fill(PROFILE_FILE_BYTES + 1).as_bytes()),
            Err(ProfileInvalid("file too large"))
        );
        let (_d, root, cwd) = tree();
        put(&root.join("agents"), "a.md", fill(PROFILE_FILE_BYTES));
        assert_eq!(load(&root, &cwd, None).unwrap().len(), 1);
        put(&root.join("agents"), "a.md", fill(PROFILE_FILE_BYTES + 1));
        assert!(load(&root, &cwd, None).is_err());
    }

    #[test]
    fn project_wins_over_global_and_agent_must_exist() {
        let (_d, root, cwd) = tree();
        put(
            &root.join("agents"),
            "x.md",
            md("shared", "", "global body"),
        );
        put(&root.join("agents"), "g.md", md("only-global", "", ""));
        put(
            &cwd.join(".magi/agents"),
            "y.md",
            md("shared", "", "project body"),
        );
        put(&cwd.join(".magi/agents"), "notes.txt", "not a profile");
        fs::create_dir(cwd.join(".magi/agents/dir.md")).unwrap();
        let all = load(&root, &cwd, Some("only-global")).unwrap();
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["only-global", "shared"]);
        assert_eq!(all[1].body, "project body");
        assert_eq!(primary(&all, Some("shared")).unwrap().body, "project body");
        assert_eq!(
            load(&root, &cwd, Some("nobody")),
            Err(ProfileInvalid("unknown agent"))
        );
    }

    #[test]
    fn one_name_twice_in_a_folder_is_invalid() {
        let (_d, root, cwd) = tree();
        put(&cwd.join(".magi/agents"), "a.md", md("same", "", ""));
        put(&cwd.join(".magi/agents"), "b.md", md("same", "", ""));
        assert_eq!(
            load(&root, &cwd, None),
            Err(ProfileInvalid("duplicate name"))
        );
        let (_d, root, cwd) = tree();
        put(&root.join("agents"), "a.md", md("same", "", ""));
        put(&root.join("agents"), "b.md", md("same", "", ""));
        assert!(load(&root, &cwd, None).is_err());
    }

    #[test]
    fn a_bad_file_in_either_folder_is_invalid_missing_folders_are_none() {
        let (_d, root, cwd) = tree();
        put(&root.join("agents"), "bad.md", "no front matter");
        assert!(load(&root, &cwd, None).is_err());
        let d = tempfile::tempdir().unwrap();
        assert_eq!(
            load(&d.path().join("h"), &d.path().join("c"), None),
            Ok(Vec::new())
        );
        assert!(load(&d.path().join("h"), &d.path().join("c"), Some("a")).is_err());
    }

    #[test]
    fn profiles_per_folder_bound_edge() {
        let (_d, root, cwd) = tree();
        let dir = cwd.join(".magi/agents");
        for i in 0..MAX_PROFILES_PER_FOLDER {
            put(&dir, &format!("p{i}.md"), md(&format!("p{i}"), "", ""));
        }
        assert_eq!(
            load(&root, &cwd, None).unwrap().len(),
            MAX_PROFILES_PER_FOLDER
        );
        put(&dir, "z.md", md("z", "", ""));
        assert_eq!(
            load(&root, &cwd, None),
            Err(ProfileInvalid("too many profiles"))
        );
    }

    #[test]
    fn a_fifo_named_md_is_not_read() {
        let (_d, root, cwd) = tree();
        let p = root.join("agents").join("f.md");
        let ok = std::process::Command::new("mkfifo").arg(&p).status();
        assert!(ok.unwrap().success(), "mkfifo failed");
        assert_eq!(load(&root, &cwd, None), Ok(Vec::new()));
    }
}
