//! The one tool table of a run: what the model is offered, and for each name its kind (what
//! runs it), policy class, definition, compiled input schema and activity summary. Built once
//! per run (and once per subagent) from the offered tools: the built-ins, `task`, the MCP
//! servers' `mcp__<server>__<tool>` tools and the client's `client.tools`. Every call's input
//! is checked against its tool's schema ([`ToolRegistry::check`]) before its policy and
//! approval (`runner.md` §2).

use super::builtin::{describe, parses, specs, Builtin};
use super::outcome::ToolClass;
use crate::history::replay::ToolSpec;
use crate::mcp::HubTool;
use crate::util::redact::sanitize_text;
use crate::util::schema::{self, SchemaError, Validator};
use protocol_core::ClientToolDef;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Longest tool name: the grammar every provider accepts is `[A-Za-z0-9_-]{1,64}`.
pub const TOOL_NAME_BYTES: usize = 64;

/// What runs a tool's calls, and so which policy class applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// A built-in tool (`tools::run`).
    Builtin(Builtin),
    /// `task`: a subagent runs it (class `task`).
    Task,
    /// A tool of the `client.tools` extension: the client runs it (class `client`).
    Client,
    /// A tool of an MCP server, called through the hub (policy class `mcp`).
    Mcp,
    /// `exec` (Code Mode): a cell runs its code, whose nested calls come back to the run
    /// machine (class `code`).
    Code,
}

impl ToolKind {
    /// The policy class of `tools` settings that governs this tool.
    #[must_use]
    pub const fn class(self) -> ToolClass {
        match self {
            Self::Builtin(b) => b.class(),
            Self::Task => ToolClass::Task,
            Self::Client => ToolClass::Client,
            Self::Mcp => ToolClass::Mcp,
            Self::Code => ToolClass::Code,
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

/// One row of the table besides its definition.
#[derive(Debug, Clone)]
struct Entry {
    kind: ToolKind,
    /// The compiled schema the input is checked against, or why it did not compile (the
    /// tool's calls then fail with that reason).
    schema: Result<Validator, SchemaError>,
    /// The one-line summary of a call, for activities and approvals.
    summary: fn(&str, &Value) -> String,
    /// Offered to the model; else reachable from code only (Code Mode's `only`).
    direct: bool,
}

/// The tools of a run in table order, each with its kind and schema; those offered to the
/// model, and with Code Mode's `only` those reachable from code only.
#[derive(Debug, Clone, Default)]
pub struct ToolRegistry {
    /// Every tool's definition, in table order.
    all: Vec<ToolSpec>,
    /// The offered ones', in the same order.
    specs: Vec<ToolSpec>,
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
}

/// The built-ins' schemas, compiled once per process.
fn builtin_schemas() -> &'static [Result<Validator, SchemaError>] {
    static SCHEMAS: OnceLock<Vec<Result<Validator, SchemaError>>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        specs()
            .iter()
            .map(|s| schema::compile(&s.input_schema))
            .collect()
    })
}

impl ToolRegistry {
    /// No tools at all (for requests that offer none, such as a title or summary).
    #[must_use]
    pub fn empty() -> Self {
        Self::default()
    }

    /// The six built-in tools of decision 17, their schemas compiled once per process;
    /// `task`, MCP and client tools join per run (`agent::context::table`).
    #[must_use]
    pub fn builtin() -> Self {
        let mut r = Self::empty();
        for ((spec, tool), schema) in specs().into_iter().zip(Builtin::ALL).zip(builtin_schemas()) {
            // The built-in names are valid and distinct (a test holds them to it).
            let _ = r.add(
                spec,
                ToolKind::Builtin(tool),
                schema.clone(),
                builtin_summary,
            );
        }
        r
    }

    /// Offers one more tool after the others, checked against `schema` and summarized by
    /// `summary`.
    pub fn add(
        &mut self,
        spec: ToolSpec,
        kind: ToolKind,
        schema: Result<Validator, SchemaError>,
        summary: fn(&str, &Value) -> String,
    ) -> Result<(), AddError> {
        if !valid_name(&spec.name) {
            return Err(AddError::InvalidName);
        }
        if self.by_name.contains_key(&spec.name) {
            return Err(AddError::Duplicate);
        }
        self.by_name.insert(spec.name.clone(), self.all.len());
        self.specs.push(spec.clone());
        self.all.push(spec);
        self.entries.push(Entry {
            kind,
            schema,
            summary,
            direct: true,
        });
        Ok(())
    }

    /// Offers an MCP server's tool, with the schema the hub compiled when it listed it.
    pub fn add_mcp(&mut self, tool: &HubTool) -> Result<(), AddError> {
        let spec = ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
        };
        self.add(spec, ToolKind::Mcp, Ok(tool.validator.clone()), mcp_summary)
    }

    /// Offers a client tool, compiling its schema (at most 16 KiB, `extensions.md`); one
    /// that does not compile stays offered and its calls fail saying so.
    pub fn add_client(&mut self, tool: &ClientToolDef) -> Result<(), AddError> {
        let spec = ToolSpec {
            name: tool.name.clone(),
            description: tool.description.clone(),
            input_schema: tool.input_schema.clone(),
        };
        let schema = schema::compile(&tool.input_schema);
        self.add(spec, ToolKind::Client, schema, |name, _| name.to_owned())
    }

    /// Keeps only the tools `keep` accepts, in their order.
    #[must_use]
    pub fn only(self, keep: impl Fn(&ToolSpec) -> bool) -> Self {
        let mut r = Self::empty();
        let mut hidden = std::collections::HashSet::new();
        for (spec, e) in self.all.into_iter().zip(self.entries) {
            if keep(&spec) {
                if !e.direct {
                    hidden.insert(spec.name.clone());
                }
                // Names stay valid and distinct: they came from a table.
                let _ = r.add(spec, e.kind, e.schema, e.summary);
            }
        }
        r.offer_only(|s| !hidden.contains(&s.name))
    }

    /// Offers only the tools `offer` accepts; the others stay in the table, reachable from
    /// code only (a direct call to one is refused as `unknown tool`).
    #[must_use]
    pub fn offer_only(mut self, offer: impl Fn(&ToolSpec) -> bool) -> Self {
        for (spec, e) in self.all.iter().zip(&mut self.entries) {
            e.direct = e.direct && offer(spec);
        }
        self.specs = self
            .all
            .iter()
            .zip(&self.entries)
            .filter(|(_, e)| e.direct)
            .map(|(s, _)| s.clone())
            .collect();
        self
    }

    /// The offered tools' definitions, in table order: what a request's tool list holds.
    #[must_use]
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    /// Every tool's definition, those reachable from code only included, in table order.
    #[must_use]
    pub fn all_specs(&self) -> &[ToolSpec] {
        &self.all
    }

    /// Whether the model may call `name` directly: a tool of the table that is offered.
    #[must_use]
    pub fn is_direct(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|e| e.direct)
    }

    /// The kind of the tool called `name`, None for a tool not offered.
    #[must_use]
    pub fn lookup(&self, name: &str) -> Option<ToolKind> {
        self.entry(name).map(|e| e.kind)
    }

    /// The policy class of the tool called `name`, None for a tool not offered.
    #[must_use]
    pub fn class(&self, name: &str) -> Option<ToolClass> {
        self.lookup(name).map(ToolKind::class)
    }

    /// The one-line summary of a call to `name`. A built-in this run does not offer is still
    /// described as one (what the user sees of the refused call); any other name not offered
    /// is `unknown tool <name>`.
    #[must_use]
    pub fn summary(&self, name: &str, input: &Value) -> String {
        match self.entry(name) {
            Some(e) => (e.summary)(name, input),
            None if Builtin::named(name).is_some() => builtin_summary(name, input),
            None => super::outcome::one_line(&format!("unknown tool {name}")),
        }
    }

    /// Checks a call's input against its tool's schema. Err is the error result the model
    /// gets: `invalid input: expected a JSON object`, `invalid input: <where>: <what>` (named
    /// from the schema, never from the input), or why the schema itself is refused; a tool
    /// not offered is `unknown tool`.
    pub fn check(&self, name: &str, input: &Value) -> Result<(), String> {
        let Some(e) = self.entry(name) else {
            return Err("unknown tool".to_owned());
        };
        if !input.is_object() {
            return Err("invalid input: expected a JSON object".to_owned());
        }
        match &e.schema {
            Ok(v) => v
                .check(input)
                .map_err(|why| format!("invalid input: {why}"))?,
            Err(why) => {
                return Err(format!(
                    "invalid input: the tool cannot be called: {}",
                    why.phrase()
                ))
            }
        }
        // A built-in's parser is exact where a schema cannot be (an integer past u64).
        match e.kind {
            ToolKind::Builtin(b) if !parses(b, input) => {
                Err("invalid input: a value does not fit the tool's input types".to_owned())
            }
            _ => Ok(()),
        }
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&k| &self.entries[k])
    }
}

fn builtin_summary(name: &str, input: &Value) -> String {
    Builtin::named(name).map_or_else(|| name.to_owned(), |b| describe(b, input))
}

/// An MCP call's summary: the tool and its argument names only (an activity carries no raw
/// params, protocol `activity`).
fn mcp_summary(name: &str, input: &Value) -> String {
    let keys = input.as_object().map_or_else(String::new, |o| {
        o.keys().map(String::as_str).collect::<Vec<_>>().join(", ")
    });
    let line = if keys.is_empty() {
        name.to_owned()
    } else {
        format!("{name} ({keys})")
    };
    sanitize_text(&line.replace(['\n', '\r'], " "))
}

fn valid_name(name: &str) -> bool {
    (1..=TOOL_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests;
