//! `code_mode` settings (`code-mode.md` 2): whether the `exec` tool is offered, the policy of
//! calls made from code, and the bounds of one cell. Strict like every settings key; the
//! project's keys replace the global ones key by key (`code_mode.tools` class by class) through
//! the settings' deep merge.

use super::invalid::Invalid;
use super::policy::{self, Policy};
use serde_json::{Map, Value};

/// `timeout_ms`: default, smallest and largest wall clock of one cell.
pub const DEFAULT_TIMEOUT_MS: u64 = 300_000;
/// Smallest `timeout_ms`.
pub const MIN_TIMEOUT_MS: u64 = 1_000;
/// Largest `timeout_ms` (one hour).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;
/// `cpu_ms`: default engine CPU time of one cell.
pub const DEFAULT_CPU_MS: u64 = 10_000;
/// Smallest `cpu_ms`.
pub const MIN_CPU_MS: u64 = 100;
/// Largest `cpu_ms`.
pub const MAX_CPU_MS: u64 = 600_000;
/// `memory_mib`: default engine heap.
pub const DEFAULT_MEMORY_MIB: u32 = 64;
/// Smallest `memory_mib`.
pub const MIN_MEMORY_MIB: u32 = 16;
/// Largest `memory_mib`.
pub const MAX_MEMORY_MIB: u32 = 1_024;
/// `max_calls`: default tool calls per cell.
pub const DEFAULT_MAX_CALLS: u32 = 200;
/// Smallest `max_calls`.
pub const MIN_MAX_CALLS: u32 = 1;
/// Largest `max_calls`.
pub const MAX_MAX_CALLS: u32 = 1_000;

/// The policy of calls made from code, per class; never read from the direct `tools`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodePolicies {
    /// `read_file`, `list_dir`, `grep` (default allow).
    pub read: Policy,
    /// `write_file`, `edit_file` (default ask).
    pub write: Policy,
    /// `shell` (default ask).
    pub shell: Policy,
    /// MCP servers' tools (default ask).
    pub mcp: Policy,
    /// `task` (default deny: a subagent per loop iteration is rarely meant).
    pub task: Policy,
    /// `client.tools` tools (default deny).
    pub client: Policy,
}

impl Default for CodePolicies {
    fn default() -> Self {
        Self {
            read: Policy::Allow,
            write: Policy::Ask,
            shell: Policy::Ask,
            mcp: Policy::Ask,
            task: Policy::Deny,
            client: Policy::Deny,
        }
    }
}

/// The merged `code_mode` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodeMode {
    /// Offer the `exec` tool.
    pub enabled: bool,
    /// Offer `exec` (and `task`) only; every other tool is reachable only from code.
    pub only: bool,
    /// Policies of nested calls.
    pub tools: CodePolicies,
    /// Wall clock of one cell, approval waits not counted.
    pub timeout_ms: u64,
    /// Engine CPU time of one cell, paused while it awaits a tool.
    pub cpu_ms: u64,
    /// Engine heap in MiB.
    pub memory_mib: u32,
    /// Tool calls per cell.
    pub max_calls: u32,
}

impl Default for CodeMode {
    fn default() -> Self {
        Self {
            enabled: false,
            only: false,
            tools: CodePolicies::default(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            cpu_ms: DEFAULT_CPU_MS,
            memory_mib: DEFAULT_MEMORY_MIB,
            max_calls: DEFAULT_MAX_CALLS,
        }
    }
}

const KEYS: [&str; 7] = [
    "enabled",
    "only",
    "tools",
    "timeout_ms",
    "cpu_ms",
    "memory_mib",
    "max_calls",
];

const CLASSES: [&str; 6] = ["read", "write", "shell", "mcp", "task", "client"];

impl CodeMode {
    /// Reads a `code_mode` value over the defaults. `whole` = the merged result, where `only`
    /// needs `enabled`: one file may set `only` while the other sets `enabled`.
    pub fn parse(v: &Value, whole: bool) -> Result<Self, Invalid> {
        let m = keys(v, &KEYS, "code_mode")?;
        let mut c = Self::default();
        if let Some(v) = m.get("enabled") {
            c.enabled = v.as_bool().ok_or(Invalid("code_mode.enabled"))?;
        }
        if let Some(v) = m.get("only") {
            c.only = v.as_bool().ok_or(Invalid("code_mode.only"))?;
        }
        if let Some(v) = m.get("tools") {
            let t = keys(v, &CLASSES, "code_mode.tools")?;
            let slots = [
                ("read", &mut c.tools.read),
                ("write", &mut c.tools.write),
                ("shell", &mut c.tools.shell),
                ("mcp", &mut c.tools.mcp),
                ("task", &mut c.tools.task),
                ("client", &mut c.tools.client),
            ];
            for (class, slot) in slots {
                if let Some(p) = t.get(class) {
                    *slot = policy::parse(p)?;
                }
            }
        }
        if let Some(v) = m.get("timeout_ms") {
            c.timeout_ms = int(v, MIN_TIMEOUT_MS, MAX_TIMEOUT_MS, "code_mode.timeout_ms")?;
        }
        if let Some(v) = m.get("cpu_ms") {
            c.cpu_ms = int(v, MIN_CPU_MS, MAX_CPU_MS, "code_mode.cpu_ms")?;
        }
        if let Some(v) = m.get("memory_mib") {
            c.memory_mib = int32(v, MIN_MEMORY_MIB, MAX_MEMORY_MIB, "code_mode.memory_mib")?;
        }
        if let Some(v) = m.get("max_calls") {
            c.max_calls = int32(v, MIN_MAX_CALLS, MAX_MAX_CALLS, "code_mode.max_calls")?;
        }
        if whole && c.only && !c.enabled {
            return Err(Invalid("code_mode.only without enabled"));
        }
        Ok(c)
    }
}

fn keys<'a>(
    v: &'a Value,
    allowed: &[&str],
    what: &'static str,
) -> Result<&'a Map<String, Value>, Invalid> {
    let m = v.as_object().ok_or(Invalid(what))?;
    if m.keys().all(|k| allowed.contains(&k.as_str())) {
        Ok(m)
    } else {
        Err(Invalid("unknown key"))
    }
}

/// A JSON integer in `lo..=hi` (`5.0`, `-1` and `"5"` are rejected).
fn int(v: &Value, lo: u64, hi: u64, what: &'static str) -> Result<u64, Invalid> {
    v.as_u64()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or(Invalid(what))
}

fn int32(v: &Value, lo: u32, hi: u32, what: &'static str) -> Result<u32, Invalid> {
    let n = int(v, u64::from(lo), u64::from(hi), what)?;
    u32::try_from(n).map_err(|_| Invalid(what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::settings::{load, Settings};
    use serde_json::json;

    fn m(v: Value) -> Option<Map<String, Value>> {
        v.as_object().cloned()
    }

    fn global(v: Value) -> Result<Settings, Invalid> {
        load(m(json!({ "code_mode": v })), None)
    }

    fn project(v: Value) -> Result<Settings, Invalid> {
        load(None, m(json!({ "code_mode": v })))
    }

    #[test]
    fn defaults_follow_section_2() {
        let c = load(None, None).unwrap().code_mode;
        assert_eq!(c, CodeMode::default());
        assert!(!c.enabled && !c.only);
        assert_eq!(
            (c.timeout_ms, c.cpu_ms, c.memory_mib, c.max_calls),
            (300_000, 10_000, 64, 200)
        );
        let t = c.tools;
        assert_eq!(
            [t.read, t.write, t.shell, t.mcp, t.task, t.client],
            [
                Policy::Allow,
                Policy::Ask,
                Policy::Ask,
                Policy::Ask,
                Policy::Deny,
                Policy::Deny
            ]
        );
        assert_eq!(global(json!({})).unwrap().code_mode, CodeMode::default());
    }

    #[test]
    fn every_numeric_key_accepts_its_bounds_and_rejects_one_past() {
        let cases: [(&str, u64, u64); 4] = [
            ("timeout_ms", 1_000, 3_600_000),
            ("cpu_ms", 100, 600_000),
            ("memory_mib", 16, 1_024),
            ("max_calls", 1, 1_000),
        ];
        let read = |c: &CodeMode, key: &str| match key {
            "timeout_ms" => c.timeout_ms,
            "cpu_ms" => c.cpu_ms,
            "memory_mib" => u64::from(c.memory_mib),
            _ => u64::from(c.max_calls),
        };
        for (key, lo, hi) in cases {
            for ok in [lo, hi] {
                for s in [global(json!({ key: ok })), project(json!({ key: ok }))] {
                    assert_eq!(read(&s.unwrap().code_mode, key), ok, "{key} {ok}");
                }
            }
            for bad in [
                json!(lo - 1),
                json!(hi + 1),
                json!(-1),
                json!(lo as f64),
                json!(lo.to_string()),
                json!(null),
            ] {
                assert!(global(json!({ key: bad })).is_err(), "global {key} {bad}");
                assert!(project(json!({ key: bad })).is_err(), "project {key} {bad}");
            }
        }
    }

    #[test]
    fn unknown_keys_classes_and_bad_values_are_invalid() {
        let bad = [
            json!(true),
            json!([]),
            json!({"enable": true}),
            json!({"enabled": "yes"}),
            json!({"enabled": 1}),
            json!({"only": null}),
            json!({"tools": {"code": "allow"}}),
            json!({"tools": {"exec": "allow"}}),
            json!({"tools": {"read": "maybe"}}),
            json!({"tools": {"read": true}}),
            json!({"tools": ["read"]}),
        ];
        for v in bad {
            assert!(global(v.clone()).is_err(), "global {v}");
            assert!(project(v.clone()).is_err(), "project {v}");
        }
    }

    #[test]
    fn only_needs_enabled_in_the_merged_result() {
        assert!(global(json!({"only": true})).is_err());
        assert!(global(json!({"only": true, "enabled": false})).is_err());
        let c = global(json!({"only": true, "enabled": true}))
            .unwrap()
            .code_mode;
        assert!(c.only && c.enabled);
        // One file may bring `enabled`, the other `only`.
        let s = load(
            m(json!({"code_mode": {"enabled": true}})),
            m(json!({"code_mode": {"only": true}})),
        );
        assert!(s.unwrap().code_mode.only);
        // A project that turns Code Mode off while the global file keeps `only` is invalid.
        let s = load(
            m(json!({"code_mode": {"enabled": true, "only": true}})),
            m(json!({"code_mode": {"enabled": false}})),
        );
        assert_eq!(s, Err(Invalid("code_mode.only without enabled")));
    }

    #[test]
    fn project_keys_replace_global_ones_key_by_key_and_class_by_class() {
        let g = json!({"code_mode": {
            "enabled": true, "timeout_ms": 5_000, "cpu_ms": 200, "max_calls": 7,
            "tools": {"write": "allow", "shell": "deny", "task": "ask"}}});
        let p = json!({"code_mode": {
            "cpu_ms": 300, "memory_mib": 32, "tools": {"shell": "ask", "client": "allow"}}});
        let c = load(m(g), m(p)).unwrap().code_mode;
        assert!(c.enabled && !c.only);
        assert_eq!(
            (c.timeout_ms, c.cpu_ms, c.memory_mib, c.max_calls),
            (5_000, 300, 32, 7)
        );
        let t = c.tools;
        assert_eq!(
            [t.read, t.write, t.shell, t.mcp, t.task, t.client],
            [
                Policy::Allow,
                Policy::Allow,
                Policy::Ask,
                Policy::Ask,
                Policy::Ask,
                Policy::Allow
            ]
        );
    }

    #[test]
    fn code_mode_tools_never_read_the_direct_tools_and_tools_code_is_execs_policy() {
        let s = load(
            m(json!({"tools": {"read": "deny", "task": "allow", "code": "ask"}})),
            None,
        )
        .unwrap();
        assert_eq!(s.code_mode.tools, CodePolicies::default());
        assert_eq!(s.tool_code, Policy::Ask);
        assert_eq!(Settings::default().tool_code, Policy::Allow);
        let s = load(
            m(json!({"tools": {"code": "ask"}})),
            m(json!({"tools": {"code": "deny"}})),
        );
        assert_eq!(s.unwrap().tool_code, Policy::Deny);
        assert!(load(m(json!({"tools": {"code": "sometimes"}})), None).is_err());
        // `code_mode.tools` has no `code` class and `tools` no `exec` one.
        assert!(load(m(json!({"tools": {"exec": "allow"}})), None).is_err());
    }
}
