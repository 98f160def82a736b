//! The launch environment and what initialization derives from it: the storage root, the
//! runtime folders and the context identity.

use crate::util::ids::hex;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What the process environment says, captured at launch so tests can inject it.
#[derive(Debug, Clone, Default)]
pub struct LaunchEnv {
    /// `MC_HOME`.
    pub mc_home: Option<OsString>,
    /// `HOME`.
    pub home: Option<OsString>,
    /// The working directory the client chose.
    pub cwd: Option<PathBuf>,
}

impl LaunchEnv {
    /// Reads the real environment.
    #[must_use]
    pub fn from_process() -> Self {
        Self {
            mc_home: std::env::var_os("MC_HOME").filter(|v| !v.is_empty()),
            home: std::env::var_os("HOME").filter(|v| !v.is_empty()),
            cwd: std::env::current_dir().ok(),
        }
    }
}

/// Resolves `MC_HOME` (default `$HOME/.magi-code`), relative to the cwd if relative.
pub fn storage_root(env: &LaunchEnv, cwd: &Path) -> Option<PathBuf> {
    let p = match (&env.mc_home, &env.home) {
        (Some(m), _) => PathBuf::from(m),
        (None, Some(h)) => PathBuf::from(h).join(".magi-code"),
        (None, None) => return None,
    };
    Some(if p.is_absolute() { p } else { cwd.join(p) })
}

/// Creates the runtime folders that are missing, owner-only.
pub fn create_dirs(root: &Path) -> std::io::Result<()> {
    let mut b = fs::DirBuilder::new();
    b.recursive(true).mode(0o700);
    for d in [
        root.to_path_buf(),
        root.join("sessions"),
        root.join("cache").join("models"),
    ] {
        let existed = d.is_dir();
        b.create(&d)?;
        if !existed {
            fs::set_permissions(&d, fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// SHA-256 of the canonical cwd and canonical storage root, as 64 lowercase hex characters.
#[must_use]
pub fn context_id(cwd: &Path, root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut h = Sha256::new();
    h.update(b"magi-code.context.v1\0");
    h.update(cwd.as_os_str().as_bytes());
    h.update(b"\0");
    h.update(root.as_os_str().as_bytes());
    hex(&h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_id_is_hex_and_alias_stable() {
        let a = context_id(Path::new("/w"), Path::new("/h"));
        assert_eq!(a.len(), 64);
        assert!(a
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_ne!(a, context_id(Path::new("/w2"), Path::new("/h")));
        assert_ne!(a, context_id(Path::new("/w"), Path::new("/h2")));
    }
}
