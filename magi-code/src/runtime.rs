//! The admitted runtime of one child: one snapshot of configuration, taken at readiness.

use crate::config::{Profile, Settings, Skill};
use protocol_core::ClientToolDef;
use std::path::{Path, PathBuf};

/// The admitted runtime of one child: one snapshot of configuration.
#[derive(Debug, Clone)]
pub struct Runtime {
    /// Canonical storage root.
    pub root: PathBuf,
    /// Canonical working directory.
    pub cwd: PathBuf,
    /// Merged settings.
    pub settings: Settings,
    /// Context identity (64 lowercase hex).
    pub context_id: String,
    /// The instructions text (runner.md §3), read at `initialize`; never sent to the client
    /// and never projected.
    pub instructions: String,
    /// The `client.tools` tools registered at `initialize` (empty unless negotiated).
    pub client_tools: Vec<ClientToolDef>,
    /// Whether the client negotiated `tool.cards`: live `tool.card` events and projected
    /// `tool_card` entries (cards are stored either way).
    pub tool_cards: bool,
    /// `tool.output` and `tool.diff` events (`tool.details` negotiated).
    pub tool_details: bool,
    /// Every admitted profile by name (project over global), read at `initialize`.
    pub profiles: Vec<Profile>,
    /// The admitted skills in name order (at most 64), read at `initialize`.
    pub skills: Vec<Skill>,
}

impl Runtime {
    /// Whether every recorded cwd is absolute and canonicalizes to this child's cwd.
    #[must_use]
    pub fn is_workspace(&self, cwds: &[String]) -> bool {
        cwds.iter().all(|c| {
            let p = Path::new(c);
            p.is_absolute() && std::fs::canonicalize(p).is_ok_and(|real| real == self.cwd)
        })
    }

    /// A runtime for unit tests: `root` and `cwd` as given, default settings, no
    /// instructions, client tools, cards, profiles or skills.
    #[cfg(test)]
    #[must_use]
    pub fn for_tests(root: &Path, cwd: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            cwd: cwd.to_path_buf(),
            settings: Settings::default(),
            context_id: "0".repeat(64),
            instructions: String::new(),
            client_tools: Vec::new(),
            tool_cards: false,
            tool_details: false,
            profiles: Vec::new(),
            skills: Vec::new(),
        }
    }
}
