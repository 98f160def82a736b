//! The `client.tools` extension's `initialize` param: the client's tool definitions and their
//! bounds (`extensions.md` "client.tools").

use crate::error::ErrorCode;
use crate::limits::{
    CLIENT_TOOLS, CLIENT_TOOL_DESCRIPTION_BYTES, CLIENT_TOOL_NAME_BYTES, CLIENT_TOOL_SCHEMA_BYTES,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;

/// Names a client tool may not take: the built-ins and `task`.
pub const RESERVED_NAMES: &[&str] = &[
    "read_file",
    "list_dir",
    "grep",
    "write_file",
    "edit_file",
    "shell",
    "task",
];

/// The prefix of MCP tool names, which a client tool may not start with.
pub const MCP_PREFIX: &str = "mcp__";

/// One client-provided tool, validated; immutable for the child's life.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientToolDef {
    /// The name offered to the model.
    pub name: String,
    /// What the model reads about it.
    pub description: String,
    /// The JSON schema of its input (an object schema).
    pub input_schema: Value,
}

const BAD: ErrorCode = ErrorCode::InvalidParams;

fn valid_name(name: &str) -> bool {
    (1..=CLIENT_TOOL_NAME_BYTES).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        && !RESERVED_NAMES.contains(&name)
        && !name.starts_with(MCP_PREFIX)
}

fn one(v: &Value) -> Result<ClientToolDef, ErrorCode> {
    let m = v.as_object().ok_or(BAD)?;
    if m.len() != 3 {
        return Err(BAD);
    }
    let name = m.get("name").and_then(Value::as_str).ok_or(BAD)?;
    let description = m.get("description").and_then(Value::as_str).ok_or(BAD)?;
    let schema = m.get("input_schema").ok_or(BAD)?;
    if !valid_name(name) || description.len() > CLIENT_TOOL_DESCRIPTION_BYTES {
        return Err(BAD);
    }
    let is_object_schema = schema
        .as_object()
        .is_some_and(|s| s.get("type").and_then(Value::as_str) == Some("object"));
    let size = serde_json::to_vec(schema).map_or(usize::MAX, |b| b.len());
    if !is_object_schema || size > CLIENT_TOOL_SCHEMA_BYTES {
        return Err(BAD);
    }
    Ok(ClientToolDef {
        name: name.to_owned(),
        description: description.to_owned(),
        input_schema: schema.clone(),
    })
}

/// Parses `initialize`'s `client_tools`: required exactly when `negotiated` (the client
/// required `client.tools`); any breach is `invalid_params`.
pub fn parse(params: &Value, negotiated: bool) -> Result<Vec<ClientToolDef>, ErrorCode> {
    let list = params.get("client_tools");
    let Some(list) = list else {
        return if negotiated { Err(BAD) } else { Ok(Vec::new()) };
    };
    if !negotiated {
        return Err(BAD);
    }
    let list = list.as_array().ok_or(BAD)?;
    if list.len() > CLIENT_TOOLS {
        return Err(BAD);
    }
    let mut seen = HashSet::new();
    let mut tools = Vec::with_capacity(list.len());
    for v in list {
        let t = one(v)?;
        if !seen.insert(t.name.clone()) {
            return Err(BAD);
        }
        tools.push(t);
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str) -> Value {
        json!({"name": name, "description": "d", "input_schema": {"type": "object"}})
    }

    fn with(tools: Vec<Value>) -> Result<Vec<ClientToolDef>, ErrorCode> {
        parse(&json!({ "client_tools": tools }), true)
    }

    #[test]
    fn presence_follows_the_capability() {
        assert_eq!(parse(&json!({}), false), Ok(Vec::new()));
        assert_eq!(parse(&json!({}), true), Err(BAD));
        assert_eq!(parse(&json!({"client_tools": []}), false), Err(BAD));
        assert_eq!(parse(&json!({"client_tools": null}), true), Err(BAD));
        assert_eq!(parse(&json!({"client_tools": {}}), true), Err(BAD));
        assert_eq!(with(vec![]), Ok(Vec::new()));
    }

    #[test]
    fn tool_count_at_its_edge() {
        let many = |n: usize| (0..n).map(|i| tool(&format!("t{i}"))).collect::<Vec<_>>();
        assert_eq!(with(many(CLIENT_TOOLS)).map(|t| t.len()), Ok(32));
        assert_eq!(with(many(CLIENT_TOOLS + 1)), Err(BAD));
    }

    #[test]
    fn names_at_their_edge() {
        assert!(with(vec![tool(&"a".repeat(64))]).is_ok());
        assert_eq!(with(vec![tool(&"a".repeat(65))]), Err(BAD));
        assert!(with(vec![tool("Az09_-")]).is_ok());
        for bad in ["", "a b", "a.b", "é", "a/b", "a\n", "a:b"] {
            assert_eq!(with(vec![tool(bad)]), Err(BAD), "{bad:?}");
        }
        for reserved in RESERVED_NAMES {
            assert_eq!(with(vec![tool(reserved)]), Err(BAD), "{reserved}");
        }
        assert_eq!(with(vec![tool("mcp__fs__read")]), Err(BAD));
        assert_eq!(with(vec![tool("mcp__")]), Err(BAD));
        // Only the exact prefix and exact names are reserved.
        assert!(with(vec![tool("mcp_x"), tool("Shell"), tool("tasks")]).is_ok());
        assert_eq!(with(vec![tool("x"), tool("x")]), Err(BAD));
    }

    #[test]
    fn description_and_schema_at_their_edge() {
        let d = |n: usize| json!({"name": "t", "description": "é".repeat(n / 2) + &"x".repeat(n % 2), "input_schema": {"type": "object"}});
        assert!(with(vec![d(1024)]).is_ok());
        assert_eq!(with(vec![d(1025)]), Err(BAD));
        // `{"type":"object","d":"…"}`: 24 bytes of frame around the padding.
        let s = |n: usize| json!({"name": "t", "description": "", "input_schema": {"type": "object", "d": "x".repeat(n - 24)}});
        assert_eq!(
            serde_json::to_vec(&s(CLIENT_TOOL_SCHEMA_BYTES)["input_schema"])
                .unwrap()
                .len(),
            16_384
        );
        assert!(with(vec![s(CLIENT_TOOL_SCHEMA_BYTES)]).is_ok());
        assert_eq!(with(vec![s(CLIENT_TOOL_SCHEMA_BYTES + 1)]), Err(BAD));
        for schema in [
            json!({"type": "string"}),
            json!({}),
            json!("object"),
            json!(null),
        ] {
            let t = json!({"name": "t", "description": "", "input_schema": schema});
            assert_eq!(with(vec![t]), Err(BAD));
        }
    }

    #[test]
    fn each_tool_has_exactly_three_fields() {
        let extra =
            json!({"name": "t", "description": "", "input_schema": {"type": "object"}, "x": 1});
        assert_eq!(with(vec![extra]), Err(BAD));
        assert_eq!(
            with(vec![
                json!({"name": "t", "input_schema": {"type": "object"}})
            ]),
            Err(BAD)
        );
        assert_eq!(
            with(vec![
                json!({"name": "t", "description": 1, "input_schema": {"type": "object"}})
            ]),
            Err(BAD)
        );
        assert_eq!(with(vec![json!("t")]), Err(BAD));
    }
}
