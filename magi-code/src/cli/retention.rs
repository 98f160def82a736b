//! The retention sweep `magi-code chat` runs when it starts (`backend.md` `retention_days`,
//! default 30, 0 disables): settings read as the server reads them; when they cannot be read
//! nothing is pruned (the server then reports them).

use crate::config::settings;
use crate::session::retention;
use crate::startup::{storage_root, LaunchEnv};

/// Prunes the expired histories of this process's storage root but `keep` (the session the
/// chat opens); silent, best effort.
pub fn sweep(keep: Option<&str>) {
    let env = LaunchEnv::from_process();
    let Some(cwd) = env.cwd.as_ref().and_then(|c| std::fs::canonicalize(c).ok()) else {
        return;
    };
    let Some(root) = storage_root(&env, &cwd).and_then(|r| std::fs::canonicalize(r).ok()) else {
        return;
    };
    let (Ok(global), Ok(project)) = (
        settings::read_file(&root.join("settings.json")),
        settings::read_file(&cwd.join(".magi").join("settings.json")),
    ) else {
        return;
    };
    let Ok(s) = settings::load(global, project) else {
        return;
    };
    let _ = retention::prune(&root, s.retention_days, crate::util::time::now_ms(), keep);
}
