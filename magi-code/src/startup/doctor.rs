//! `magi-code doctor`: what `initialize` reads, checked the same way, every problem told with
//! its file, key path and fix (the protocol's errors are code-only; these words are for
//! people). It writes nothing and creates no folder; it starts each approved enabled MCP
//! server as `initialize` would (bounded, then stopped) to say why one cannot start; it
//! prints no secret (names of variables and files, never their values).

use super::env::{storage_root, LaunchEnv};
use crate::config::settings::TOP_KEYS;
use crate::config::{instructions, profiles, settings, skills, Settings};
use crate::mcp;
use serde::Serialize;
use serde_json::{Map, Value};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// `initialize` would fail on it.
    Error,
    /// `initialize` passes over it (a skill left out); doctor's exit code ignores it.
    Note,
}

/// One problem: where (the file and the key, when it has them), what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Whether `initialize` would fail on it.
    pub severity: Severity,
    /// The file it is about, as a path, when it is about one.
    pub file: Option<String>,
    /// The setting (a dotted key path such as `mcp.servers.fs`) or variable it is about.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
    /// What to do, when there is one thing to do.
    pub fix: Option<String>,
    /// How the line for people names it (`settings.json`, `provider anthropic`).
    #[serde(skip)]
    pub place: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.place, self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " ({fix})")?;
        }
        Ok(())
    }
}

fn finding(place: impl Into<String>, what: impl Into<String>, fix: Option<String>) -> Finding {
    Finding {
        severity: Severity::Error,
        file: None,
        key: None,
        message: what.into(),
        fix,
        place: place.into(),
    }
}

impl Finding {
    /// The finding about file `path`.
    fn in_file(mut self, path: &Path) -> Self {
        self.file = Some(path.display().to_string());
        self
    }

    /// The finding about key (or variable) `key`.
    fn at(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

/// Every problem `initialize` would meet in `env`, in the order it meets them; empty when it
/// would answer `ready`.
#[must_use]
pub fn check(env: &LaunchEnv) -> Vec<Finding> {
    let Some(cwd) = env.cwd.clone().and_then(|c| c.canonicalize().ok()) else {
        return vec![finding("working directory", "cannot be read", None)];
    };
    let Some(root) = storage_root(env, &cwd) else {
        let fix = Some("set MC_HOME, or HOME for the default ~/.magi-code".to_owned());
        return vec![finding("MC_HOME", "neither MC_HOME nor HOME is set", fix).at("MC_HOME")];
    };
    if let Some(f) = root_problem(&root) {
        return vec![f];
    }
    let global_path = root.join("settings.json");
    let project_path = cwd.join(".magi").join("settings.json");
    let mut out = Vec::new();
    let global = read_settings(&global_path, &mut out);
    let project = read_settings(&project_path, &mut out);
    let files = [
        (global, &global_path, false),
        (project, &project_path, true),
    ];
    let Some((s, bad)) = load_settings(files, &mut out) else {
        return out;
    };
    // A check that reads a key found bad says nothing: that key's finding is the news.
    let ok = |keys: &[&str]| !keys.iter().any(|k| bad.iter().any(|b| b == k));
    if ok(&["provider", "model", "providers"]) {
        out.extend(provider(&s, &root));
    }
    if ok(&["instructions"]) {
        if let Err(e) = instructions::load(&root, &cwd, &s.instructions) {
            let fix = Some("check the files `instructions` lists and AGENTS.md".to_owned());
            out.push(finding("instructions", e.0, fix).at("instructions"));
        }
    }
    if ok(&["agent", "agents"]) {
        out.extend(profile_files(&root, &cwd, s.agent.as_deref()));
    }
    if ok(&["mcp"]) {
        out.extend(mcp_servers(&s));
        out.extend(probe_servers(&s, &root, &cwd));
    }
    out
}

/// What `initialize` passes over without failing: skills it leaves out, with why. Printed
/// after the findings; they do not change `doctor`'s exit code.
#[must_use]
pub fn notes(env: &LaunchEnv) -> Vec<Finding> {
    let Some(cwd) = env.cwd.clone().and_then(|c| c.canonicalize().ok()) else {
        return Vec::new();
    };
    let Some(root) = storage_root(env, &cwd) else {
        return Vec::new();
    };
    let read = |p: &Path| settings::read_file(p).ok().flatten();
    let (global, project) = (
        read(&root.join("settings.json")),
        read(&cwd.join(".magi").join("settings.json")),
    );
    let disabled = settings::load(global, project)
        .map(|s| s.skills_disabled)
        .unwrap_or_default();
    skills::left_out(&root, &cwd, &disabled)
        .into_iter()
        .map(|(file, why)| {
            let place = format!("skill {}", file.display());
            Finding {
                severity: Severity::Note,
                ..finding(place, format!("left out: {why}"), None).in_file(&file)
            }
        })
        .collect()
}

/// A storage root that exists but is not a folder, or cannot be made.
fn root_problem(root: &Path) -> Option<Finding> {
    let shown = root.display().to_string();
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => None,
        Ok(_) => Some(
            finding(
                format!("MC_HOME {shown}"),
                "is not a folder",
                Some("point MC_HOME at a folder".into()),
            )
            .in_file(root)
            .at("MC_HOME"),
        ),
        // Missing is fine when its nearest existing ancestor is a folder: initialize creates
        // the folders down to it.
        Err(_)
            if root
                .ancestors()
                .skip(1)
                .find(|a| a.exists())
                .is_some_and(Path::is_dir) =>
        {
            None
        }
        Err(_) => Some(
            finding(
                format!("MC_HOME {shown}"),
                "cannot be created: a file stands in its path",
                Some("point MC_HOME at a folder".into()),
            )
            .in_file(root)
            .at("MC_HOME"),
        ),
    }
}

/// Reads one settings file; a file that cannot be read as settings JSON is a finding.
fn read_settings(path: &Path, out: &mut Vec<Finding>) -> Option<Map<String, Value>> {
    match settings::read_file(path) {
        Ok(m) => m,
        Err(e) => {
            out.push(finding(path.display().to_string(), e.0, None).in_file(path));
            None
        }
    }
}

/// The settings `initialize` would run on, less any key found bad, with those keys; or
/// `None` when the files cannot be read. Every unknown key (with the nearest known one) and
/// every key that is invalid on its own is a finding; when each is fine alone but the
/// merge is not, the loader's reason is.
/// One settings file as read: its keys (if it could be read), its path, whether it is the
/// project's.
type File<'p> = (Option<Map<String, Value>>, &'p PathBuf, bool);

fn load_settings(files: [File<'_>; 2], out: &mut Vec<Finding>) -> Option<(Settings, Vec<String>)> {
    // A file that cannot be read leaves nothing to run on; the other's keys are still told.
    let unreadable = !out.is_empty();
    let mut bad = Vec::new();
    let mut kept: [Option<Map<String, Value>>; 2] = [None, None];
    for (i, (m, path, project)) in files.iter().enumerate() {
        let Some(m) = m else { continue };
        out.extend(unknown_keys(m, path));
        let mut good = Map::new();
        for (k, v) in m.iter().filter(|(k, _)| TOP_KEYS.contains(&k.as_str())) {
            match settings::check_key(k, v, *project) {
                Ok(()) => drop(good.insert(k.clone(), v.clone())),
                Err(e) => {
                    let fix = Some(format!(
                        "fix or remove \"{k}\" (docs/runner.md lists the keys)"
                    ));
                    let f = finding(
                        path.display().to_string(),
                        format!("key \"{k}\": {}", e.0),
                        fix,
                    );
                    out.push(f.in_file(path).at(k.as_str()));
                    bad.push(k.clone());
                }
            }
        }
        kept[i] = Some(good);
    }
    if unreadable {
        return None;
    }
    let [global, project] = kept;
    let both = project.is_some();
    match settings::load(global, project) {
        Ok(s) => Some((s, bad)),
        Err(e) => {
            let place = if both {
                format!("{} with {}", files[0].1.display(), files[1].1.display())
            } else {
                files[0].1.display().to_string()
            };
            let f = finding(place, e.0, None);
            // Each file is sound alone: the project file is the one that made it fail.
            let file = files[usize::from(both)].1;
            out.push(f.in_file(file));
            None
        }
    }
}

/// The top-level keys of `m` that are not settings keys, each with the nearest known one.
fn unknown_keys(m: &Map<String, Value>, path: &Path) -> Vec<Finding> {
    m.keys()
        .filter(|k| !TOP_KEYS.contains(&k.as_str()))
        .map(|k| {
            let near = nearest(k, TOP_KEYS).map(|n| format!("did you mean \"{n}\"?"));
            finding(
                path.display().to_string(),
                format!("unknown key \"{}\"", printable(k)),
                near,
            )
            .in_file(path)
            .at(printable(k))
        })
        .collect()
}

/// A key as it may be printed: control characters dropped, at most 64 characters.
fn printable(k: &str) -> String {
    k.chars().filter(|c| !c.is_control()).take(64).collect()
}

/// The known name within edit distance 2 of `k`, the closest first.
fn nearest<'a>(k: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|n| (distance(k, n), *n))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, n)| n)
}

/// Levenshtein distance (keys are short).
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Why the selected provider is not locally ready, if it is not.
fn provider(s: &Settings, root: &Path) -> Option<Finding> {
    use crate::config::providers::{self, Api, Kind};
    let p = s.provider.as_str();
    let place = format!("provider {p}");
    if let Some(Kind::AgentCli { command, .. }) = providers::builtin(p).map(|r| r.kind) {
        return cli(s, p, command, place);
    }
    if crate::providers::target::keyed(s, root, p) {
        return None;
    }
    match providers::builtin(p).map(|r| r.kind) {
        Some(Kind::Offline { .. }) => scripted(s, &place),
        Some(Kind::Http {
            key_env: Some(var), ..
        }) => {
            let what = format!("{var} is not set and credentials.json has no key");
            let fix = format!(
                "export {var}=… or add {{\"{p}\": {{\"api_key\": …}}}} to credentials.json"
            );
            Some(finding(place, what, Some(fix)).at(var.to_owned()))
        }
        Some(Kind::Http {
            api: Api::Codex, ..
        }) => {
            let path = crate::providers::codex::auth_path();
            let file = path.as_ref().map_or_else(
                || "$CODEX_HOME/auth.json".into(),
                |f| f.display().to_string(),
            );
            let what = format!("{file} holds no usable ChatGPT sign-in");
            let f = finding(place, what, Some("run codex login".into())).at("provider");
            Some(match &path {
                Some(p) => f.in_file(p),
                None => f,
            })
        }
        Some(Kind::Http { .. }) => None,
        Some(Kind::AgentCli { .. }) => None,
        None => match s.compat.get(p) {
            Some(c) => c.api_key_env.as_ref().map(|v| {
                let fix = format!("export {v}=…");
                finding(place, format!("{v} is not set"), Some(fix)).at(v.clone())
            }),
            None => {
                let builtin: Vec<&str> = providers::names().collect();
                let what = format!(
                    "is neither built in ({}) nor configured under providers",
                    builtin.join(", ")
                );
                Some(
                    finding(
                        place,
                        what,
                        Some(format!("add providers.{p} or pick a built-in provider")),
                    )
                    .at("provider"),
                )
            }
        },
    }
}

/// Why an agent CLI provider is not ready: what its own `auth status --json` said.
fn cli(s: &Settings, p: &str, command: &str, place: String) -> Option<Finding> {
    use crate::providers::cli_auth::Status;
    let status =
        crate::providers::target::cli_status(s, p, &crate::util::cancel::Cancel::default());
    let command = s.cli_commands.get(p).map_or(command, String::as_str);
    let (what, fix) = match status {
        Status::Ready | Status::Cancelled => return None,
        Status::NotLoggedIn => (
            "is not signed in".to_owned(),
            "run claude auth login".to_owned(),
        ),
        Status::OtherMethod(m) => (
            format!(
                "is signed in with {} (an API key), not a Claude plan",
                printable(&m)
            ),
            "use the anthropic provider for a key, or run claude auth login".to_owned(),
        ),
        Status::Missing => (
            format!("command \"{}\" not found", printable(command)),
            format!("install Claude Code, or set providers.{p}.command"),
        ),
        Status::TimedOut => (
            "auth status did not answer within 10 s".to_owned(),
            "run claude auth status yourself to see why".to_owned(),
        ),
        Status::NoAnswer => (
            "auth status gave no answer".to_owned(),
            "run claude auth status yourself to see why".to_owned(),
        ),
    };
    Some(finding(place, what, Some(fix)).at("provider"))
}

fn scripted(s: &Settings, place: &str) -> Option<Finding> {
    use crate::config::providers::{ECHO, SCRIPT, SCRIPTED};
    let key = format!("providers.{}.script", SCRIPTED.name);
    match s.model.as_str() {
        ECHO => None,
        SCRIPT => match s.scripted_script.as_deref() {
            Some(path) if Path::new(path).is_file() => None,
            Some(path) => Some(finding(&key, format!("{path} is not a file"), None).at(&key)),
            None => Some(finding(&key, "is not set (model script needs it)", None).at(&key)),
        },
        other => Some(
            finding(
                place,
                format!("has no model \"{}\"", printable(other)),
                Some("use model echo or script".into()),
            )
            .at("model"),
        ),
    }
}

/// Each profile file that fails, by name; then an `agent` no profile names.
fn profile_files(root: &Path, cwd: &Path, agent: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut names = Vec::new();
    for dir in [root.join("agents"), cwd.join(".magi").join("agents")] {
        for path in md_files(&dir) {
            let parsed = std::fs::read(&path)
                .map_err(|_| profiles::ProfileInvalid("unreadable"))
                .and_then(|b| profiles::parse(&b));
            match parsed {
                Ok(p) => names.push(p.name),
                Err(e) => {
                    let f = finding(format!("profile {}", path.display()), e.0, None);
                    out.push(f.in_file(&path));
                }
            }
        }
    }
    if out.is_empty() && profiles::load(root, cwd, agent).is_err() {
        let what = match agent {
            Some(a) if !names.iter().any(|n| n == a) => {
                format!("agent \"{}\" names no profile", printable(a))
            }
            _ => "the profiles cannot be loaded (too many, or a name twice)".to_owned(),
        };
        out.push(finding("profiles", what, None).at("agent"));
    }
    out
}

fn md_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    v.sort();
    v
}

/// Each enabled server that is not approved.
fn mcp_servers(s: &Settings) -> Vec<Finding> {
    s.mcp_servers
        .iter()
        .filter(|(_, d)| d.enabled && !s.mcp_approved.contains(&mcp::digest(&d.canonical)))
        .map(|(name, _)| {
            let fix = format!("magi-code mcp approve {name}");
            finding(format!("mcp server \"{name}\""), "not approved", Some(fix))
                .at(format!("mcp.servers.{name}"))
        })
        .collect()
}

/// Each approved enabled server, started as `initialize` starts it (the secrets rule's
/// environment, the handshake and `tools/list` within the same bound, all at once) and then
/// stopped: one finding per server that cannot start, naming the cause.
fn probe_servers(s: &Settings, root: &Path, cwd: &Path) -> Vec<Finding> {
    let approved: Vec<(&str, mcp::Definition)> = super::servers::enabled_servers(s, root)
        .into_iter()
        .filter_map(|(name, d)| Some((name, d?)))
        .collect();
    if approved.is_empty() {
        return Vec::new();
    }
    super::servers::set_children_rule(s);
    let defs: Vec<mcp::Definition> = approved.iter().map(|(_, d)| d.clone()).collect();
    let deadline = Instant::now() + mcp::START_TIMEOUT;
    let hide = super::servers::hidden_vars();
    let probed = mcp::McpHub::probe(&defs, cwd, &hide, deadline);
    approved
        .iter()
        .zip(probed)
        .filter_map(|((name, def), r)| {
            let cause = r.err()?;
            let (what, fix) = told(name, def, &cause);
            Some(
                finding(format!("mcp server \"{name}\""), what, fix)
                    .at(format!("mcp.servers.{name}")),
            )
        })
        .collect()
}

/// What a server's cause of failure says, and its fix.
fn told(name: &str, def: &mcp::Definition, cause: &mcp::Cause) -> (String, Option<String>) {
    use mcp::Cause;
    let run_it = || Some("run its command yourself to see what it says".to_owned());
    let login = || Some(format!("magi-code mcp login {name}"));
    let secs = mcp::START_TIMEOUT.as_secs();
    match (cause, def) {
        (Cause::NotFound, mcp::Definition::Stdio(d)) => (
            format!("command \"{}\" not found", printable(&d.command)),
            Some(format!("install it, or fix mcp.servers.{name}.command")),
        ),
        (Cause::NotRunnable, _) => (
            "its command cannot be run".into(),
            Some("check that it is an executable".into()),
        ),
        (Cause::Exited, _) => ("exited before it answered initialize".into(), run_it()),
        (Cause::TimedOut, _) => (format!("the handshake timed out ({secs} s)"), run_it()),
        (Cause::Broke, _) => (
            "broke the MCP protocol during the handshake".into(),
            run_it(),
        ),
        (Cause::Refused(m), _) => (format!("refused the handshake: {}", printable(m)), run_it()),
        (Cause::NoToken, mcp::Definition::Http(d)) => match &d.bearer_token_env {
            Some(var) => (format!("{var} is not set"), Some(format!("export {var}=…"))),
            None => ("has no saved sign-in".into(), login()),
        },
        (Cause::Unauthorized, mcp::Definition::Http(d)) => {
            let fix = match &d.bearer_token_env {
                Some(var) => Some(format!("check the token in {var}")),
                None => login(),
            };
            ("refused the authorization (401)".into(), fix)
        }
        (Cause::Unreachable | Cause::NotFound | Cause::NoToken | Cause::Unauthorized, _) => (
            "could not be reached, or answered an error status".into(),
            Some("check its url and that it is running".into()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_key_is_within_two_edits() {
        assert_eq!(nearest("tols", TOP_KEYS), Some("tools"));
        assert_eq!(nearest("providr", TOP_KEYS), Some("provider"));
        assert_eq!(nearest("zzzzzz", TOP_KEYS), None);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
