//! Agent profiles (`runner.md` 7): `MC_HOME/agents/*.md` and `<cwd>/.magi/agents/*.md`, each a
//! YAML front matter (`name`, `description`, optional `tools` and `model`) and a body.

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
