//! The tools a run offers the model, by name: today the built-in ones; MCP tools
//! (`mcp__<server>__<tool>`) and client tools join through [`ToolRegistry::add`].

use super::builtin::{class, specs};
use super::outcome::ToolClass;
use crate::history::replay::ToolSpec;
use std::collections::HashMap;

/// Longest tool name: the grammar every provider accepts is `[A-Za-z0-9_-]{1,64}`.
pub const TOOL_NAME_BYTES: usize = 64;

/// What runs a tool's calls, and so which policy class applies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolKind {
    /// A built-in tool (`tools::run`) of this policy class.
    Builtin(ToolClass),
    /// A tool of the `client.tools` extension: the client runs it (class `client`).
    Client,
    /// A tool of an MCP server, called through the hub (policy class `mcp`).
    Mcp {
        /// The server's name.
        server: String,
        /// The server's name for the tool.
        tool: String,
    },
}

impl ToolKind {
    /// The policy class of `tools` settings that governs this tool.
    #[must_use]
    pub fn class(&self) -> ToolClass {
        match self {
            Self::Builtin(c) => *c,
            Self::Client => ToolClass::Client,
            Self::Mcp { .. } => ToolClass::Mcp,
        }
    }
}

/// Why [`ToolRegistry::add`] refused a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddError {
    /// The name is empty, longer than [`TOOL_NAME_BYTES`], or has a character outside
    /// `[A-Za-z0-9_-]`.
    InvalidName,
    /// A tool of that name is already offered.
    Duplicate,
}

/// The tools offered to the model, in offer order, each with its kind.
#[derive(Debug, Clone)]
pub struct ToolRegistry {
    specs: Vec<ToolSpec>,
    kinds: Vec<ToolKind>,
    by_name: HashMap<String, usize>,
}

impl ToolRegistry {
    /// No tools at all (for requests that offer none, such as a title or summary).
    #[must_use]
    pub fn empty() -> Self {
        Self {
            specs: Vec::new(),
            kinds: Vec::new(),
            by_name: HashMap::new(),
        }
    }

    /// The six built-in tools of decision 17; `task` joins per run (`agent::context::tools`),
    /// since its description names the profiles.
    #[must_use]
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        for spec in specs() {
            if let Some(c) = class(&spec.name) {
                // The built-in names are valid and distinct (a test holds them to it).
                let _ = r.add(spec, ToolKind::Builtin(c));
            }
        }
        r
    }

    /// Offers one more tool after the others.
    pub fn add(&mut self, spec: ToolSpec, kind: ToolKind) -> Result<(), AddError> {
        if !valid_name(&spec.name) {
            return Err(AddError::InvalidName);
        }
        if self.by_name.contains_key(&spec.name) {
            return Err(AddError::Duplicate);
        }
        self.by_name.insert(spec.name.clone(), self.specs.len());
        self.specs.push(spec);
        self.kinds.push(kind);
        Ok(())
    }

    /// Every tool's definition, in offer order: what a request's tool list holds.
    #[must_use]
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// The kind of the tool called `name`, None for a tool not offered.
    #[must_use]
    pub fn lookup(&self, name: &str) -> Option<ToolKind> {
        self.by_name.get(name).map(|&k| self.kinds[k].clone())
    }

    /// The policy class of the tool called `name`, None for a tool not offered.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<ToolClass> {
        self.lookup(name).map(|k| k.class())
    }
}

fn valid_name(name: &str) -> bool {
    (1..=TOOL_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: "d".to_owned(),
            input_schema: json!({"type": "object"}),
        }
    }

    #[test]
    fn builtin_registry_offers_the_six_tools_with_their_classes() {
        let r = ToolRegistry::builtin();
        let names: Vec<&str> = r.specs().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "list_dir",
                "grep",
                "write_file",
                "edit_file",
                "shell"
            ]
        );
        for name in names {
            assert_eq!(r.class(name), class(name), "{name}");
            assert_eq!(r.lookup(name).map(|k| k.class()), class(name));
        }
        assert_eq!(r.lookup("shell"), Some(ToolKind::Builtin(ToolClass::Shell)));
        assert_eq!(
            r.lookup("read_file"),
            Some(ToolKind::Builtin(ToolClass::Read))
        );
        assert_eq!(
            r.lookup("edit_file"),
            Some(ToolKind::Builtin(ToolClass::Write))
        );
        assert_eq!(r.lookup("task"), None);
        assert_eq!(r.lookup("Shell"), None);
        assert_eq!(r.lookup(""), None);
        assert!(ToolRegistry::empty().specs().is_empty());
    }

    #[test]
    fn added_tools_follow_in_order_with_valid_distinct_names() {
        let mut r = ToolRegistry::builtin();
        let kind = ToolKind::Builtin(ToolClass::Read);
        assert_eq!(r.add(spec("mcp__fs__read"), kind.clone()), Ok(()));
        assert_eq!(r.specs().last().unwrap().name, "mcp__fs__read");
        assert_eq!(r.lookup("mcp__fs__read"), Some(kind.clone()));
        let mcp = ToolKind::Mcp {
            server: "fs".into(),
            tool: "write".into(),
        };
        assert_eq!(r.add(spec("mcp__fs__write"), mcp), Ok(()));
        assert_eq!(r.class("mcp__fs__write"), Some(ToolClass::Mcp));
        assert_eq!(
            r.add(spec("mcp__fs__read"), kind.clone()),
            Err(AddError::Duplicate)
        );
        assert_eq!(r.add(spec("shell"), kind.clone()), Err(AddError::Duplicate));
        // The name bound at its edge.
        let longest = "a".repeat(TOOL_NAME_BYTES);
        assert_eq!(r.add(spec(&longest), kind.clone()), Ok(()));
        let over = "b".repeat(TOOL_NAME_BYTES + 1);
        assert_eq!(r.add(spec(&over), kind.clone()), Err(AddError::InvalidName));
        for bad in ["", "a b", "a.b", "é", "a/b", "a\n"] {
            assert_eq!(
                r.add(spec(bad), kind.clone()),
                Err(AddError::InvalidName),
                "{bad:?}"
            );
        }
        assert_eq!(r.add(spec("A-z_09"), kind.clone()), Ok(()));
        assert_eq!(r.add(spec("open_tab"), ToolKind::Client), Ok(()));
        assert_eq!(r.class("open_tab"), Some(ToolClass::Client));
        assert_eq!(r.specs().len(), 11);
        assert_eq!(r.lookup(&over), None);
    }
}
