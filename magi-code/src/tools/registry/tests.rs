use super::*;
use crate::util::schema::compile;
use serde_json::json;

fn spec(name: &str) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: "d".to_owned(),
        input_schema: json!({"type": "object"}),
    }
}

fn open() -> Result<Validator, SchemaError> {
    compile(&json!({"type": "object"}))
}

fn named(_: &str, _: &Value) -> String {
    "s".to_owned()
}

#[test]
fn builtin_registry_offers_the_eight_tools_with_their_classes() {
    let r = ToolRegistry::builtin();
    let names: Vec<&str> = r.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "read_file",
            "list_dir",
            "grep",
            "glob",
            "write_file",
            "edit_file",
            "apply_patch",
            "shell"
        ]
    );
    for name in names {
        assert_eq!(r.class(name), crate::tools::class(name), "{name}");
        assert_eq!(r.lookup(name).map(ToolKind::class), r.class(name));
    }
    assert_eq!(r.lookup("shell"), Some(ToolKind::Builtin(Builtin::Shell)));
    assert_eq!(r.class("read_file"), Some(ToolClass::Read));
    assert_eq!(r.class("edit_file"), Some(ToolClass::Write));
    assert_eq!(r.lookup("task"), None);
    assert_eq!(r.lookup("Shell"), None);
    assert_eq!(r.lookup(""), None);
    assert!(ToolRegistry::empty().specs().is_empty());
}

#[test]
fn added_tools_follow_in_order_with_valid_distinct_names() {
    let mut r = ToolRegistry::builtin();
    assert_eq!(
        r.add(spec("mcp__fs__read"), ToolKind::Mcp, open(), named),
        Ok(())
    );
    assert_eq!(r.specs().last().unwrap().name, "mcp__fs__read");
    assert_eq!(r.class("mcp__fs__read"), Some(ToolClass::Mcp));
    assert_eq!(
        r.add(spec("mcp__fs__read"), ToolKind::Mcp, open(), named),
        Err(AddError::Duplicate)
    );
    assert_eq!(
        r.add(spec("shell"), ToolKind::Client, open(), named),
        Err(AddError::Duplicate)
    );
    // The name bound at its edge.
    let longest = "a".repeat(TOOL_NAME_BYTES);
    assert_eq!(
        r.add(spec(&longest), ToolKind::Client, open(), named),
        Ok(())
    );
    let over = "b".repeat(TOOL_NAME_BYTES + 1);
    assert_eq!(
        r.add(spec(&over), ToolKind::Client, open(), named),
        Err(AddError::InvalidName)
    );
    for bad in ["", "a b", "a.b", "é", "a/b", "a\n"] {
        assert_eq!(
            r.add(spec(bad), ToolKind::Client, open(), named),
            Err(AddError::InvalidName),
            "{bad:?}"
        );
    }
    assert_eq!(r.add(spec("task"), ToolKind::Task, open(), named), Ok(()));
    assert_eq!(r.class("task"), Some(ToolClass::Task));
    assert_eq!(
        r.add(spec("open_tab"), ToolKind::Client, open(), named),
        Ok(())
    );
    assert_eq!(r.class("open_tab"), Some(ToolClass::Client));
    assert_eq!(r.specs().len(), 12);
    assert_eq!(r.lookup(&over), None);
    // `only` keeps the order and the rows, and drops the rest from lookups too.
    let kept = r.only(|s| s.name != "shell" && s.name != "task");
    let names: Vec<&str> = kept.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names[..6],
        [
            "read_file",
            "list_dir",
            "grep",
            "glob",
            "write_file",
            "edit_file"
        ]
    );
    assert_eq!(names[7..], ["mcp__fs__read", longest.as_str(), "open_tab"]);
    assert_eq!(kept.lookup("shell"), None);
    assert_eq!(kept.check("shell", &json!({})), Err("unknown tool".into()));
    assert_eq!(kept.summary("open_tab", &json!({})), "s");
    // A built-in not offered is still described as one; other names are unknown.
    assert_eq!(
        kept.summary("shell", &json!({"command": "ls"})),
        "shell: ls"
    );
    assert_eq!(kept.summary("task", &json!({})), "unknown tool task");
}

#[test]
fn every_call_is_checked_against_its_tools_schema() {
    let r = ToolRegistry::builtin();
    assert_eq!(r.check("shell", &json!({"command": "ls"})), Ok(()));
    assert_eq!(
        r.check("shell", &json!({"command": "ls", "timeout_ms": 600_000})),
        Ok(())
    );
    assert_eq!(
        r.check("shell", &json!({"command": "ls", "timeout_ms": 600_001})),
        Err("invalid input: timeout_ms: more than the maximum 600000".into())
    );
    assert_eq!(
        r.check("shell", &json!({})),
        Err("invalid input: the input: missing required property `command`".into())
    );
    assert_eq!(
        r.check("read_file", &json!({"path": "a", "limit": null})),
        Err("invalid input: limit: expected integer, got null".into())
    );
    assert_eq!(
        r.check("read_file", &json!([])),
        Err("invalid input: expected a JSON object".into())
    );
    assert_eq!(
        r.check(
            "write_file",
            &json!({"path": "a", "content": "x", "sk-secret": 1})
        ),
        Err("invalid input: the input: 1 property the schema does not allow".into())
    );
    assert_eq!(r.check("nope", &json!({})), Err("unknown tool".into()));
    // The largest offset the parser takes passes; 2^64, which only a float spells and the
    // schema's `maximum` (u64::MAX as a float) lets by, is caught by the exact parser.
    assert_eq!(
        r.check("read_file", &json!({"path": "a", "offset": u64::MAX})),
        Ok(())
    );
    assert_eq!(
        r.check(
            "read_file",
            &json!({"path": "a", "offset": 1.8446744073709552e19})
        ),
        Err("invalid input: a value does not fit the tool's input types".into())
    );
    // A tool whose schema did not compile stays in the table; its calls fail saying why.
    let mut r = ToolRegistry::empty();
    let bad = compile(&json!({"type": "nope"}));
    assert_eq!(r.add(spec("t"), ToolKind::Client, bad, named), Ok(()));
    assert_eq!(
        r.check("t", &json!({})),
        Err(
            "invalid input: the tool cannot be called: its input schema is not a valid JSON Schema"
                .into()
        )
    );
}

#[test]
fn summaries_come_from_each_kind() {
    let mut r = ToolRegistry::builtin();
    assert_eq!(r.summary("shell", &json!({"command": "ls"})), "shell: ls");
    assert_eq!(r.summary("nope\n", &json!({})), "unknown tool nope");
    let hub = HubTool {
        name: "mcp__fs__read".into(),
        server: "fs".into(),
        tool: "read".into(),
        description: "Reads".into(),
        input_schema: json!({"type": "object"}),
        validator: open().unwrap(),
    };
    assert_eq!(r.add_mcp(&hub), Ok(()));
    assert_eq!(
        r.summary(
            "mcp__fs__read",
            &json!({"path": "sk-ant-api03-secret1234567", "n": 1})
        ),
        "mcp__fs__read (n, path)",
        "argument names only, never their values"
    );
    let client = ClientToolDef {
        name: "open_tab".into(),
        description: "Opens".into(),
        input_schema: json!({"type": "object", "properties": {"url": {"type": "string"}}}),
    };
    assert_eq!(r.add_client(&client), Ok(()));
    assert_eq!(r.lookup("open_tab"), Some(ToolKind::Client));
    assert_eq!(r.summary("open_tab", &json!({"url": "x"})), "open_tab");
    assert_eq!(r.check("open_tab", &json!({"url": "x"})), Ok(()));
    assert_eq!(
        r.check("open_tab", &json!({"url": 3})),
        Err("invalid input: url: expected string, got number".into())
    );
}

#[test]
fn tools_offered_only_from_code_stay_in_the_table_but_leave_the_request() {
    let mut r = ToolRegistry::builtin();
    r.add(spec("task"), ToolKind::Task, open(), named).unwrap();
    r.add(spec("exec"), ToolKind::Code, open(), named).unwrap();
    let r = r.offer_only(|s| s.name == "exec" || s.name == "task");
    let offered: Vec<&str> = r.specs().iter().map(|s| s.name.as_str()).collect();
    assert_eq!(offered, ["task", "exec"], "table order, offered ones only");
    assert_eq!(r.all_specs().len(), 10, "the eight built-ins stay");
    assert!(r.is_direct("exec") && r.is_direct("task"));
    assert!(!r.is_direct("read_file") && !r.is_direct("nope"));
    assert_eq!(
        r.lookup("read_file"),
        Some(ToolKind::Builtin(Builtin::ReadFile))
    );
    assert!(r.check("read_file", &json!({"path": "a"})).is_ok());
    // Narrowing the table keeps who is offered.
    let kept = r.only(|s| s.name != "shell");
    assert_eq!(kept.all_specs().len(), 9);
    assert!(!kept.is_direct("read_file") && kept.is_direct("exec"));
    assert_eq!(kept.specs().len(), 2);
}
