//! Hook definitions (`runner.md` 7): `hooks.pre_tool` and `hooks.post_tool` of the global
//! settings only, strictly validated.

use super::invalid::Invalid;
use serde_json::Value;

/// Most hooks per event.
pub const MAX_HOOKS_PER_EVENT: usize = 16;
/// Longest hook command in bytes.
pub const MAX_HOOK_COMMAND_BYTES: usize = 4096;
/// Most tool names in one hook's `tools`.
pub const MAX_HOOK_TOOLS: usize = 64;
/// Longest tool name in a hook's `tools`.
pub const MAX_HOOK_TOOL_NAME_BYTES: usize = protocol_core::limits::NAME_BYTES;

/// One configured hook command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hook {
    /// Run with `/bin/sh -c` in the cwd.
    pub command: String,
    /// The tools it applies to; `None` = every tool.
    pub tools: Option<Vec<String>>,
}

impl Hook {
    /// Whether the hook applies to a call of `tool`.
    #[must_use]
    pub fn matches(&self, tool: &str) -> bool {
        self.tools
            .as_ref()
            .is_none_or(|t| t.iter().any(|n| n == tool))
    }
}

/// The hooks of the global settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hooks {
    /// Run before a call that policy and approval let run.
    pub pre_tool: Vec<Hook>,
    /// Run after a call that ran.
    pub post_tool: Vec<Hook>,
}

impl Hooks {
    /// Parses the settings' `hooks` value: an object with optional `pre_tool` and `post_tool`
    /// arrays of `{command, tools?}`; anything else is invalid.
    pub fn parse(v: &Value) -> Result<Self, Invalid> {
        let m = v.as_object().ok_or(Invalid("hooks"))?;
        if m.keys().any(|k| k != "pre_tool" && k != "post_tool") {
            return Err(Invalid("unknown key"));
        }
        let list = |key: &str| -> Result<Vec<Hook>, Invalid> {
            let Some(v) = m.get(key) else {
                return Ok(Vec::new());
            };
            let a = v.as_array().ok_or(Invalid("hooks list"))?;
            if a.len() > MAX_HOOKS_PER_EVENT {
                return Err(Invalid("too many hooks"));
            }
            a.iter().map(hook).collect()
        };
        Ok(Self {
            pre_tool: list("pre_tool")?,
            post_tool: list("post_tool")?,
        })
    }
}

fn hook(v: &Value) -> Result<Hook, Invalid> {
    let m = v.as_object().ok_or(Invalid("hook"))?;
    if m.keys().any(|k| k != "command" && k != "tools") {
        return Err(Invalid("unknown key"));
    }
    // Multi-line scripts are fine for `sh -c`; only NUL cannot be passed to it.
    let command = match m.get("command").and_then(Value::as_str) {
        Some(c) if !c.is_empty() && c.len() <= MAX_HOOK_COMMAND_BYTES && !c.contains('\0') => {
            c.to_owned()
        }
        _ => return Err(Invalid("hook command")),
    };
    let tools = match m.get("tools") {
        None => None,
        Some(t) => {
            let a = t.as_array().ok_or(Invalid("hook tools"))?;
            // An empty list would match nothing: surely a mistake, so it is refused.
            if a.is_empty() || a.len() > MAX_HOOK_TOOLS {
                return Err(Invalid("hook tools"));
            }
            let names = a
                .iter()
                .map(|n| match n.as_str() {
                    Some(s)
                        if !s.is_empty()
                            && s.len() <= MAX_HOOK_TOOL_NAME_BYTES
                            && !s.chars().any(char::is_control) =>
                    {
                        Ok(s.to_owned())
                    }
                    _ => Err(Invalid("hook tool name")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            Some(names)
        }
    };
    Ok(Hook { command, tools })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cmd(n: usize) -> String {
        "x".repeat(n)
    }

    #[test]
    fn parses_both_events_and_matches_tools() {
        let h = Hooks::parse(&json!({
            "pre_tool": [{"command": "a"}, {"command": "b", "tools": ["shell", "write_file"]}],
            "post_tool": [{"command": "c\necho two lines"}],
        }))
        .unwrap();
        assert_eq!(h.pre_tool.len(), 2);
        assert!(h.pre_tool[0].matches("anything"));
        assert!(h.pre_tool[1].matches("shell") && !h.pre_tool[1].matches("read_file"));
        assert_eq!(h.post_tool[0].command, "c\necho two lines");
        assert_eq!(Hooks::parse(&json!({})).unwrap(), Hooks::default());
    }

    #[test]
    fn hooks_per_event_bound() {
        let n = |k: usize| json!({"pre_tool": vec![json!({"command": "true"}); k]});
        assert_eq!(
            Hooks::parse(&n(MAX_HOOKS_PER_EVENT))
                .unwrap()
                .pre_tool
                .len(),
            16
        );
        assert!(Hooks::parse(&n(MAX_HOOKS_PER_EVENT + 1)).is_err());
        let p = json!({"post_tool": vec![json!({"command": "true"}); MAX_HOOKS_PER_EVENT + 1]});
        assert!(Hooks::parse(&p).is_err());
    }

    #[test]
    fn command_bound() {
        let c = |s: String| Hooks::parse(&json!({"pre_tool": [{"command": s}]}));
        assert!(c(cmd(MAX_HOOK_COMMAND_BYTES)).is_ok());
        assert!(c(cmd(MAX_HOOK_COMMAND_BYTES + 1)).is_err());
        assert!(c(String::new()).is_err());
        assert!(c("a\0b".into()).is_err());
    }

    #[test]
    fn tools_bounds() {
        let t = |v: Value| Hooks::parse(&json!({"pre_tool": [{"command": "x", "tools": v}]}));
        assert!(t(json!(vec!["shell"; MAX_HOOK_TOOLS])).is_ok());
        assert!(t(json!(vec!["shell"; MAX_HOOK_TOOLS + 1])).is_err());
        assert!(t(json!([cmd(MAX_HOOK_TOOL_NAME_BYTES)])).is_ok());
        assert!(t(json!([cmd(MAX_HOOK_TOOL_NAME_BYTES + 1)])).is_err());
        assert!(t(json!([])).is_err());
        assert!(t(json!([""])).is_err());
        assert!(t(json!(["a\nb"])).is_err());
        assert!(t(json!("shell")).is_err());
        assert!(t(json!([5])).is_err());
    }

    #[test]
    fn strict_shape() {
        for bad in [
            json!([]),
            json!({"pre": []}),
            json!({"pre_tool": {"command": "x"}}),
            json!({"pre_tool": ["x"]}),
            json!({"pre_tool": [{"command": "x", "when": "always"}]}),
            json!({"pre_tool": [{"tools": ["shell"]}]}),
            json!({"post_tool": [{"command": 5}]}),
            json!({"post_tool": null}),
        ] {
            assert!(Hooks::parse(&bad).is_err(), "{bad} accepted");
        }
    }
}
