//! The environment of the backend's children under `backend.md`'s secrets rule: the shell
//! tool, hooks, MCP servers and the Code Mode helper lose the provider key variables and every
//! name that looks like a secret, except the names of `shell_env.keep`.

use std::ffi::{OsStr, OsString};
use std::sync::RwLock;

/// The built-in providers' key variables (configured providers add their `api_key_env`).
pub const BUILTIN_KEY_VARS: [&str; 2] = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];

/// Name parts that mark a variable as a secret, matched in any case.
const SECRET_PARTS: [&str; 4] = ["KEY", "SECRET", "TOKEN", "PASSWORD"];

/// Whether a child loses `name`: a provider key variable of `key_vars` or a name containing
/// `KEY`, `SECRET`, `TOKEN` or `PASSWORD` in any case, unless `keep` lists it exactly.
#[must_use]
pub fn is_withheld(name: &OsStr, key_vars: &[&str], keep: &[String]) -> bool {
    if keep.iter().any(|k| OsStr::new(k) == name) {
        return false;
    }
    if key_vars.iter().any(|k| OsStr::new(k) == name) {
        return true;
    }
    // A name that is not UTF-8 is judged by its UTF-8 parts, so it cannot hide a marker.
    let upper = name.to_string_lossy().to_uppercase();
    SECRET_PARTS.iter().any(|p| upper.contains(p))
}

/// Registers every value of the backend's own environment under a secret-looking name
/// (`KEY`, `SECRET`, `TOKEN`, `PASSWORD`, any case) as a loaded value for redaction
/// (`decisions.md` 54), so a tool that reads its own or its parent's environment gets it back
/// `[redacted]`. Values under 8 bytes are not (see `register_secret`).
pub fn register_secret_values() {
    for (k, v) in std::env::vars_os() {
        let upper = k.to_string_lossy().to_uppercase();
        if SECRET_PARTS.iter().any(|p| upper.contains(p)) {
            crate::util::redact::register_secret(&v.to_string_lossy());
        }
    }
}

/// The configured providers' key variables and `shell_env.keep`, set at startup.
static RULE: RwLock<(Vec<String>, Vec<String>)> = RwLock::new((Vec::new(), Vec::new()));

/// Sets the rule's configured parts for every later child: the configured providers' key
/// variables (`api_key_env`; the built-ins' always count) and the names `shell_env.keep`
/// passes on.
pub fn set_rule(key_vars: Vec<String>, keep: Vec<String>) {
    let mut rule = RULE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    *rule = (key_vars, keep);
}

/// The backend's own environment less what the rule withholds: what `shell`, hooks and the
/// Code Mode helper get (after `env_clear`).
#[must_use]
pub fn children_env() -> Vec<(OsString, OsString)> {
    let rule = RULE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut keys: Vec<&str> = BUILTIN_KEY_VARS.to_vec();
    keys.extend(rule.0.iter().map(String::as_str));
    child_env(std::env::vars_os(), &keys, &rule.1)
}

/// The names of the backend's environment the rule withholds (an MCP server's command
/// removes each).
#[must_use]
pub fn withheld_names() -> Vec<String> {
    let rule = RULE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut keys: Vec<&str> = BUILTIN_KEY_VARS.to_vec();
    keys.extend(rule.0.iter().map(String::as_str));
    let mut names: Vec<String> = std::env::vars_os()
        .filter(|(k, _)| is_withheld(k, &keys, &rule.1))
        .map(|(k, _)| k.to_string_lossy().into_owned())
        .collect();
    // A configured key variable that is unset now still goes: it may be set later.
    names.extend(keys.iter().map(|k| (*k).to_owned()));
    names.sort();
    names.dedup();
    names
}

/// `vars` (the backend's environment, `std::env::vars_os()`) less what [`is_withheld`]
/// withholds: what a child's `Command` gets after `env_clear`.
#[must_use]
pub fn child_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
    key_vars: &[&str],
    keep: &[String],
) -> Vec<(OsString, OsString)> {
    vars.into_iter()
        .filter(|(k, _)| !is_withheld(k, key_vars, keep))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn keys_and_secret_looking_names_are_withheld_unless_kept() {
        let vars = env(&[
            ("PATH", "/bin"),
            ("HOME", "/root"),
            ("OPENAI_API_KEY", "sk-1"),
            ("ANTHROPIC_API_KEY", "sk-2"),
            ("MY_LLM", "configured key var"),
            ("GITHUB_TOKEN", "t"),
            ("db_password", "p"),
            ("Aws_Secret_Access", "s"),
            ("monkey", "lowercase key inside"),
            ("SSH_AUTH_SOCK", "/tmp/s"),
            ("KEEP_TOKEN", "kept"),
        ]);
        let mut keys = BUILTIN_KEY_VARS.to_vec();
        keys.push("MY_LLM");
        let got = child_env(vars, &keys, &["KEEP_TOKEN".to_owned()]);
        assert_eq!(
            got,
            env(&[
                ("PATH", "/bin"),
                ("HOME", "/root"),
                ("SSH_AUTH_SOCK", "/tmp/s"),
                ("KEEP_TOKEN", "kept"),
            ])
        );
    }

    #[test]
    fn keep_matches_whole_names_only() {
        let keep = ["GITHUB".to_owned()];
        assert!(is_withheld(OsStr::new("GITHUB_TOKEN"), &[], &keep));
        assert!(!is_withheld(OsStr::new("GITHUB"), &[], &keep));
    }
}
