//! Skills in the Agent Skills format (`runner.md` 7): `MC_HOME/skills/<name>/SKILL.md` and
//! `<cwd>/.magi/skills/<name>/SKILL.md`, listed in the base prompt and read on demand.

use super::files::{entries, read_regular};
use super::front_matter;
use super::profiles::is_name;
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
    checked(folder, head).ok()
}

/// As [`parse`], with why a skill is left out (words for `magi-code doctor`).
pub fn checked(folder: &str, head: &[u8]) -> Result<(String, String), &'static str> {
    let doc = front_matter::parse(head)
        .map_err(|_| "its front matter does not parse (or does not close in 32 KiB)")?;
    let name = doc
        .text("name")
        .ok()
        .flatten()
        .ok_or("its front matter has no name")?;
    if name != folder || !is_name(name) {
        return Err("its name differs from its folder's");
    }
    let description = doc
        .text("description")
        .ok()
        .flatten()
        .map(str::trim)
        .ok_or("its front matter has no description")?;
    if description.is_empty() || description.chars().any(char::is_control) {
        return Err("its description is empty or holds control characters");
    }
    Ok((name.to_owned(), bounded(description, DESCRIPTION_BYTES)))
}

/// Each `SKILL.md` under `root` and `cwd` that [`load`] leaves out, with why (for `doctor`).
#[must_use]
pub fn left_out(root: &Path, cwd: &Path, disabled: &[String]) -> Vec<(PathBuf, &'static str)> {
    let mut out = Vec::new();
    for dir in [root.join("skills"), cwd.join(".magi").join("skills")] {
        for (name, path) in load_folder(&dir, disabled) {
            let file = path.join(SKILL_MD);
            let why = match read_regular(&file, SKILL_HEAD_BYTES) {
                Ok(Some(head)) => checked(&name, &head[..head.len().min(SKILL_HEAD_BYTES)]).err(),
                Ok(None) => Some("it is not a regular file"),
                Err(_) => Some("it cannot be read"),
            };
            out.extend(why.map(|w| (file, w)));
        }
    }
    out
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let base = fs::canonicalize(d.path()).unwrap();
        (d, base.join("home"), base.join("cwd"))
    }

    fn skill(base: &Path, folder: &str, text: &str) -> PathBuf {
        let dir = base.join(folder);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(SKILL_MD), text).unwrap();
        dir.join(SKILL_MD)
    }

    fn md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\nlicense: MIT\n---\n# Steps\n")
    }

    fn names(s: &[Skill]) -> Vec<&str> {
        s.iter().map(|k| k.name.as_str()).collect()
    }

    #[test]
    fn project_wins_disabled_filters_bad_ones_left_out() {
        let (_d, root, cwd) = tree();
        let g = root.join("skills");
        let p = cwd.join(".magi").join("skills");
        skill(&g, "pdf", &md("pdf", "global pdf"));
        let project_pdf = skill(&p, "pdf", &md("pdf", "project pdf"));
        skill(&g, "off", &md("off", "disabled"));
        skill(&g, "mismatch", &md("other", "name differs from the folder"));
        skill(&p, "broken", "no front matter");
        skill(&p, "nodesc", "---\nname: nodesc\n---\n");
        fs::create_dir_all(p.join("empty")).unwrap();
        skill(&g, "zeta", &md("zeta", "last"));
        let s = load(&root, &cwd, &["off".to_owned()]);
        assert_eq!(names(&s), ["pdf", "zeta"]);
        assert_eq!(s[0].description, "project pdf");
        assert_eq!(s[0].path, project_pdf);
        assert!(s[1].path.is_absolute());
    }

    #[test]
    fn a_project_skill_that_does_not_parse_leaves_the_global_one() {
        let (_d, root, cwd) = tree();
        skill(&root.join("skills"), "a", &md("a", "global"));
        skill(&cwd.join(".magi/skills"), "a", "broken");
        assert_eq!(load(&root, &cwd, &[])[0].description, "global");
    }

    #[test]
    fn at_most_64_skills_in_name_order() {
        let (_d, root, cwd) = tree();
        for i in 0..=MAX_SKILLS {
            let n = format!("s{i:03}");
            skill(&root.join("skills"), &n, &md(&n, "d"));
        }
        let s = load(&root, &cwd, &[]);
        assert_eq!(s.len(), MAX_SKILLS);
        assert_eq!(s[0].name, "s000");
        assert_eq!(
            s[MAX_SKILLS - 1].name,
            "s063",
            "the 65th in name order is left out"
        );
        let s = load(&root, &cwd, &["s000".to_owned()]);
        assert_eq!(
            (s.len(), s[MAX_SKILLS - 1].name.as_str()),
            (MAX_SKILLS, "s064")
        );
    }

    #[test]
    fn description_cut_at_1_kib_on_a_char_boundary() {
        let exact = "d".repeat(DESCRIPTION_BYTES);
        assert_eq!(parse("a", md("a", &exact).as_bytes()).unwrap().1, exact);
        let over = "d".repeat(DESCRIPTION_BYTES + 1);
        assert_eq!(parse("a", md("a", &over).as_bytes()).unwrap().1, exact);
        // 1,023 ASCII bytes then a 2-byte character: the character does not fit whole.
        let split = format!("{}é", "d".repeat(DESCRIPTION_BYTES - 1));
        let got = parse("a", md("a", &split).as_bytes()).unwrap().1;
        assert_eq!(got, "d".repeat(DESCRIPTION_BYTES - 1));
    }

    #[test]
    fn front_matter_must_close_within_the_read_bound() {
        let (_d, root, cwd) = tree();
        let head = "---\nname: a\ndescription: d\n";
        let pad = |n: usize| format!("{head}{}---\nbody", "#".repeat(n - head.len() - 4) + "\n");
        // The closing `---` ends at byte n.
        skill(&root.join("skills"), "a", &pad(SKILL_HEAD_BYTES));
        assert_eq!(load(&root, &cwd, &[]).len(), 1);
        skill(&root.join("skills"), "a", &pad(SKILL_HEAD_BYTES + 1));
        assert!(load(&root, &cwd, &[]).is_empty());
    }
}
