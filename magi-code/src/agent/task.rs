//! The `task` tool's definition (`runner.md` 7): its name, description, input schema and
//! shape, and how a call is described; `subagent` runs a call.

use crate::config::Profile;
use crate::history::ToolSpec;
use crate::runtime::Runtime;
use crate::tools::outcome::one_line;
use crate::tools::{AddError, ToolKind, ToolRegistry};
use crate::util::redact::safe_name;
use crate::util::schema::{self, SchemaError, Validator};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::OnceLock;

/// The tool's name as offered to the model.
pub const TOOL: &str = "task";

/// What the model reads about `task`, before the list of agents.
const DESCRIPTION: &str = "Run a subagent: a separate agent with its own conversation that works \
     on one self-contained task with the tools it is allowed (it cannot start subagents) and \
     ends with a final reply, which is this tool's result. It sees nothing of this \
     conversation, so the prompt must say everything it needs. Without `agent` a general \
     subagent with every tool runs.";

/// The profiles `task` accepts: every admitted one not in `agents.disabled`.
pub fn accepted(rt: &Runtime) -> impl Iterator<Item = &Profile> {
    rt.profiles
        .iter()
        .filter(|p| !rt.settings.agents_disabled.contains(&p.name))
}

/// The `task` tool's definition: its description names every accepted profile with its
/// description.
#[must_use]
pub fn spec(rt: &Runtime) -> ToolSpec {
    let mut description = DESCRIPTION.to_owned();
    let mut names = Vec::new();
    for p in accepted(rt) {
        if names.is_empty() {
            description.push_str("\n\nAgents (`agent`):");
        }
        description.push_str(&format!("\n- {}: {}", p.name, one_line(&p.description)));
        names.push(p.name.clone());
    }
    let mut agent = json!({"type": "string", "description": "The agent to run; omit it for a general subagent."});
    if !names.is_empty() {
        agent["enum"] = json!(names);
    }
    ToolSpec {
        name: TOOL.to_owned(),
        description,
        input_schema: input_schema(agent),
    }
}

/// `task`'s input schema with this `agent` property.
fn input_schema(agent: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A few words saying what the task is."},
            "prompt": {"type": "string", "description": "The whole task: everything the subagent needs to know."},
            "agent": agent,
        },
        "required": ["description", "prompt"],
        "additionalProperties": false,
    })
}

/// The input of a call, exactly (decision 17's strictness).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskIn {
    // Required, but never shown: activities name the profile, not the model's words.
    #[allow(dead_code)]
    pub description: String,
    /// The whole task.
    pub prompt: String,
    /// The profile, if any.
    #[serde(default)]
    pub agent: Option<String>,
}

/// The name a call shows in its activity and approval: its profile's, else `general`.
#[must_use]
pub fn describe(input: &Value) -> String {
    match input.get("agent") {
        None | Some(Value::Null) => "general".to_owned(),
        Some(Value::String(a)) => safe_name(&one_line(a)).unwrap_or_else(|| "agent".into()),
        Some(_) => "agent".to_owned(),
    }
}

/// Offers `task` in `table`. Its input is checked against its fixed shape (`description` and
/// `prompt` strings, `agent` an optional string, nothing else), not the offered `enum` of
/// agents: a name outside it keeps its own refusal (`unknown agent`, `refused: that agent is
/// disabled`), as `runner.md` 7 says.
pub fn add_task(table: &mut ToolRegistry, rt: &Runtime) -> Result<(), AddError> {
    static SHAPE: OnceLock<Result<Validator, SchemaError>> = OnceLock::new();
    let shape = SHAPE.get_or_init(|| schema::compile(&input_schema(json!({"type": "string"}))));
    table.add(spec(rt), ToolKind::Task, shape.clone(), |_, input| {
        describe(input)
    })
}
