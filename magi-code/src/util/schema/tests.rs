use super::*;
use serde_json::json;

fn shell() -> Validator {
    compile(&json!({
        "type": "object",
        "properties": {
            "command": {"type": "string"},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600_000},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string", "maxLength": 4}},
        },
        "required": ["command"],
        "additionalProperties": false,
    }))
    .unwrap()
}

#[test]
fn valid_input_passes_and_reasons_name_the_schema_field_and_rule() {
    let v = shell();
    assert_eq!(v.check(&json!({"command": "ls"})), Ok(()));
    assert_eq!(
        v.check(&json!({"command": "ls", "timeout_ms": 600_000, "env": {"A": "b"}})),
        Ok(())
    );
    let why = |input: Value| v.check(&input).unwrap_err();
    assert_eq!(
        why(json!({})),
        "the input: missing required property `command`"
    );
    assert_eq!(
        why(json!({"command": 1})),
        "command: expected string, got number"
    );
    assert_eq!(
        why(json!({"command": "ls", "timeout_ms": 600_001})),
        "timeout_ms: more than the maximum 600000"
    );
    assert_eq!(
        why(json!({"command": "ls", "env": {"K": 1}})),
        "env.*: expected string, got number"
    );
    assert_eq!(
        why(json!({"command": "ls", "tags": ["abcde"]})),
        "tags[]: longer than 4 characters"
    );
    assert_eq!(
        why(json!({"command": "ls", "extra": 1})),
        "the input: 1 property the schema does not allow"
    );
    assert_eq!(why(json!([1])), "the input: expected object, got array");
}

#[test]
fn a_reason_never_echoes_the_input() {
    let v = compile(&json!({
        "type": "object",
        "properties": {
            "k": {"type": "string", "pattern": "^[a-z]+$", "enum": ["abc"]},
            "n": {"const": 3},
        },
        "additionalProperties": {"type": "integer"},
    }))
    .unwrap();
    let secret = "sk-ant-SECRETSECRETSECRET0123456789";
    for input in [
        json!({"k": secret}),
        json!({"n": secret}),
        json!({secret: "x"}),
        json!({"k": {secret: secret}}),
    ] {
        let why = v.check(&input).unwrap_err();
        assert!(!why.contains("SECRET"), "{why}");
        assert!(why.len() <= REASON_BYTES);
    }
}

#[test]
fn bad_and_oversized_schemas_are_refused_never_loaded_from_outside() {
    assert_eq!(
        compile(&json!({"type": "nope"})).err(),
        Some(SchemaError::Invalid)
    );
    assert_eq!(
        compile(&json!({"type": "string", "pattern": "("})).err(),
        Some(SchemaError::Invalid)
    );
    // A `$ref` outside the schema is never fetched or read.
    for r in [
        "file:///etc/passwd",
        "https://example.com/s.json",
        "#/$defs/missing",
    ] {
        assert_eq!(
            compile(&json!({"$ref": r})).err(),
            Some(SchemaError::Invalid),
            "{r}"
        );
    }
    // A known meta-schema and a local `$ref` compile.
    let local = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"s": {"type": "string"}},
        "type": "object",
        "properties": {"a": {"$ref": "#/definitions/s"}},
    });
    let v = compile(&local).unwrap();
    assert_eq!(v.check(&json!({"a": "x"})), Ok(()));
    assert_eq!(
        v.check(&json!({"a": 1})).unwrap_err(),
        "a: expected string, got number"
    );
    // The size bound at its edge: the largest schema accepted, the first refused.
    let with = |n: usize| json!({"type": "object", "description": "x".repeat(n)});
    let base = serde_json::to_vec(&with(0)).unwrap().len();
    assert!(compile(&with(SCHEMA_BYTES - base)).is_ok());
    assert_eq!(
        compile(&with(SCHEMA_BYTES - base + 1)).err(),
        Some(SchemaError::TooLarge)
    );
}

#[test]
fn validators_are_shared_across_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    let v = shell();
    send_sync(&v);
    let w = v.clone();
    assert_eq!(v, w);
    assert_ne!(v, shell());
    std::thread::scope(|s| {
        s.spawn(|| assert!(w.check(&json!({"command": "x"})).is_ok()));
    });
}
