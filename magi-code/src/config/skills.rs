//! Skills in the Agent Skills format (`runner.md` 7): `MC_HOME/skills/<name>/SKILL.md` and
//! `<cwd>/.magi/skills/<name>/SKILL.md`, listed in the base prompt and read on demand.

use std::path::PathBuf;

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
