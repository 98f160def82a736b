//! Skills in the Agent Skills format (`runner.md` 7): `MC_HOME/skills/<name>/SKILL.md` and
//! `<cwd>/.magi/skills/<name>/SKILL.md`, listed in the base prompt and read on demand.

use super::front_matter;
use super::profiles::{entries, is_name, read_regular};
use crate::util::text::bounded;
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Most skills listed; the rest (in name order) are left out.
pub const MAX_SKILLS: usize = 64;
/// Most bytes of a skill's description kept (cut at a character boundary).
pub const DESCRIPTION_BYTES: usize = 1024;
/// Most bytes of a `SKILL.md` read for its front matter; one whose front matter does not
/// close within them is left out.
pub const SKILL_HEAD_BYTES: usize = 32 * 1024;
/// The file each skill folder holds.
const SKILL_MD: &str = "SKILL.md";

/// One admitted skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// The name (equal to its folder's).
    pub name: String,
    /// Its description, at most 1 KiB.
    pub description: String,
    /// The absolute path of its `SKILL.md`.
    pub path: PathBuf,
}

/// Reads one skill from the first bytes of its `SKILL.md` (sans-IO): `None` unless the front
/// matter parses, its `name` equals `folder` and it has a description.
#[must_use]
pub fn parse(folder: &str, head: &[u8]) -> Option<(String, String)> {
    let doc = front_matter::parse(head).ok()?;
    let name = doc.text("name").ok()??;
    if name != folder || !is_name(name) {
        return None;
    }
    let description = doc.text("description").ok()??.trim();
    if description.is_empty() || description.chars().any(char::is_control) {
        return None;
    }
    Some((name.to_owned(), bounded(description, DESCRIPTION_BYTES)))
}

/// Reads the skill folder `dir` named `folder`; `None` when it does not parse.
fn read_skill(folder: &str, dir: &Path) -> Option<Skill> {
    let file = dir.join(SKILL_MD);
    let head = read_regular(&file, SKILL_HEAD_BYTES).ok()??;
    let head = &head[..head.len().min(SKILL_HEAD_BYTES)];
    let (name, description) = parse(folder, head)?;
    Some(Skill {
        name,
        description,
        path: fs::canonicalize(&file).ok()?,
    })
}

/// The skills of one `skills` folder by name (those that parse).
fn load_folder(dir: &Path, disabled: &[String]) -> BTreeMap<String, PathBuf> {
    // An unreadable folder is left out like a skill that does not parse.
    entries(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|(name, _)| is_name(name) && !disabled.contains(name))
        .collect()
}

/// Loads the skills of a child whose storage root is `root` and cwd `cwd`: the project's win
/// over global ones of the same name, `disabled` ones are left out, then the first 64 that
/// parse in name order. Never fails: a skill that does not parse is left out.
#[must_use]
pub fn load(root: &Path, cwd: &Path, disabled: &[String]) -> Vec<Skill> {
    let global = load_folder(&root.join("skills"), disabled);
    let project = load_folder(&cwd.join(".magi").join("skills"), disabled);
    let names: std::collections::BTreeSet<&String> = global.keys().chain(project.keys()).collect();
    let mut out = Vec::new();
    for name in names {
        if out.len() == MAX_SKILLS {
            break;
        }
        // The project's copy wins; one that does not parse is as if absent.
        let skill = project
            .get(name)
            .and_then(|d| read_skill(name, d))
            .or_else(|| global.get(name).and_then(|d| read_skill(name, d)));
        out.extend(skill);
    }
    out
}
