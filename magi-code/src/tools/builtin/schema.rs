//! The built-in tools as the model sees them: a name, a short description and a JSON Schema
//! that says exactly what the strict input parser (`input.rs`) accepts.

use super::input::{
    READ_LIMIT_DEFAULT, READ_LIMIT_MAX, SHELL_TIMEOUT_DEFAULT_MS, SHELL_TIMEOUT_MAX_MS,
};
use crate::history::replay::ToolSpec;
use serde_json::{json, Value};

/// Every path field says this, once per schema.
const PATH: &str = "Relative to the session's working folder; absolute paths are allowed.";

/// One spec per built-in tool, in the order `read_file`, `list_dir`, `grep`, `glob`,
/// `write_file`, `edit_file`, `apply_patch`, `shell`.
#[must_use]
pub fn specs() -> Vec<ToolSpec> {
    vec![
        spec(
            "read_file",
            "Read a text file's lines as they are (invalid UTF-8 shows as U+FFFD). Files are \
             read up to 8 MiB.",
            object(
                &[
                    ("path", json!({"type": "string", "description": PATH})),
                    (
                        "offset",
                        json!({"type": "integer", "minimum": 0, "maximum": u64::MAX,
                               "description": "Lines to skip (default 0); grep's line N is offset N-1."}),
                    ),
                    (
                        "limit",
                        json!({"type": "integer", "minimum": 1, "maximum": READ_LIMIT_MAX,
                               "description": format!("Most lines to return (default {READ_LIMIT_DEFAULT}).")}),
                    ),
                ],
                &["path"],
            ),
        ),
        spec(
            "list_dir",
            "List a folder: one name per line, sorted, folders ending in '/'; at most the first \
             1000 names.",
            object(
                &[("path", json!({"type": "string", "description": PATH}))],
                &["path"],
            ),
        ),
        spec(
            "grep",
            "Search file contents with a Rust regex, like ripgrep: folders recursively, \
             leaving out what .gitignore, .ignore and .rgignore exclude, hidden names and \
             binary files (a path you name is searched anyway). Prints path:line:text by path \
             and line, at most 500, then how many more. Prefer it to grep or rg in shell; \
             narrow it with glob.",
            object(
                &[
                    ("pattern", json!({"type": "string"})),
                    (
                        "path",
                        json!({"type": "string",
                               "description": format!("File or folder (default \".\"). {PATH}")}),
                    ),
                    (
                        "glob",
                        json!({"type": "string",
                               "description": "Only files matching this pattern: without '/' it \
                                matches file names at any depth (\"*.ts\"), with '/' the path \
                                from the searched folder (\"src/**/*.ts\")."}),
                    ),
                    (
                        "case_insensitive",
                        json!({"type": "boolean", "description": "Default false."}),
                    ),
                ],
                &["pattern"],
            ),
        ),
        spec(
            "glob",
            "Find files by name (\"*.rs\") or path pattern (\"src/**/*.py\"), newest \
             first, at most 1000, then how many more; the same rules as grep. Use it when you \
             know a file's name but not where it is; grep searches contents.",
            object(
                &[
                    (
                        "pattern",
                        json!({"type": "string",
                               "description": "Without '/' it matches file names at any depth, \
                                with '/' the path from the searched folder."}),
                    ),
                    (
                        "path",
                        json!({"type": "string",
                               "description": format!("Folder to search (default \".\"). {PATH}")}),
                    ),
                ],
                &["pattern"],
            ),
        ),
        spec(
            "write_file",
            "Create or overwrite a file with content (at most 8 MiB), creating missing parent \
             folders.",
            object(
                &[
                    ("path", json!({"type": "string", "description": PATH})),
                    ("content", json!({"type": "string"})),
                ],
                &["path", "content"],
            ),
        ),
        spec(
            "edit_file",
            "Replace the one occurrence of `old` in a file with `new`; fails when `old` is \
             missing or not unique (add surrounding text to make it unique).",
            object(
                &[
                    ("path", json!({"type": "string", "description": PATH})),
                    ("old", json!({"type": "string", "minLength": 1})),
                    ("new", json!({"type": "string"})),
                ],
                &["path", "old", "new"],
            ),
        ),
        spec(
            "apply_patch",
            "Change several files at once with a patch in Codex's format: '*** Begin Patch', \
             then '*** Add File: P' (+ lines), '*** Delete File: P' or '*** Update File: P' \
             (optional '*** Move to: Q') with '@@ <line to find>' hunks of ' ', '-', '+' \
             lines, then '*** End Patch'. All or nothing. Prefer it to several edit_file calls.",
            object(&[("patch", json!({"type": "string"}))], &["patch"]),
        ),
        spec(
            "shell",
            "Run a command with /bin/sh -c in the session's working folder, stdin empty. \
             Returns stdout and stderr together; a non-zero exit is an error. The whole process \
             group is killed at the timeout.",
            object(
                &[
                    ("command", json!({"type": "string"})),
                    (
                        "timeout_ms",
                        json!({"type": "integer", "minimum": 1, "maximum": SHELL_TIMEOUT_MAX_MS,
                               "description": format!("Default {SHELL_TIMEOUT_DEFAULT_MS}.")}),
                    ),
                ],
                &["command"],
            ),
        ),
    ]
}

fn spec(name: &str, description: &str, input_schema: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: format!("{description} Output over 64 KiB keeps its first and last 32 KiB."),
        input_schema,
    }
}

/// A closed object schema: exactly these properties, the `required` ones present.
fn object(props: &[(&str, Value)], required: &[&str]) -> Value {
    let properties: serde_json::Map<String, Value> = props
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use super::super::run_named as run;
    use super::*;
    use crate::util::cancel::Cancel;
    use std::path::Path;

    /// Most bytes the six definitions may take serialized (runner.md section 7 gives the base
    /// prompt and these 12 KiB together; half is theirs).
    const SPECS_BYTES: usize = 6 * 1024;

    fn summary(name: &str, input: &Value, cwd: &Path) -> String {
        run(name, input, cwd, &Cancel::default()).summary
    }

    /// Refused by the parser, and by the compiled schema the run checks first.
    fn refused(name: &str, input: &Value, cwd: &Path) {
        assert_eq!(summary(name, input, cwd), "invalid input", "{name} {input}");
        let checked = crate::tools::ToolRegistry::builtin().check(name, input);
        assert!(
            checked.is_err_and(|e| e.starts_with("invalid input: ")),
            "{name} {input}"
        );
    }

    /// Accepted by the parser, and by the compiled schema.
    fn accepted(name: &str, input: &Value, cwd: &Path) {
        assert_ne!(summary(name, input, cwd), "invalid input", "{name} {input}");
        let checked = crate::tools::ToolRegistry::builtin().check(name, input);
        assert_eq!(checked, Ok(()), "{name} {input}");
    }

    /// Values the property schema allows, its bounds included.
    fn allowed(prop: &Value) -> Vec<Value> {
        match prop["type"].as_str() {
            Some("string") if prop["minLength"] == 1 => vec![json!("f")],
            Some("string") => vec![json!("f"), json!("")],
            Some("integer") => vec![prop["minimum"].clone(), prop["maximum"].clone()],
            Some("boolean") => vec![json!(true), json!(false)],
            other => panic!("no generator for type {other:?}"),
        }
    }

    /// Values the property schema refuses: every other JSON type, and just past its bounds.
    fn refused_values(prop: &Value) -> Vec<Value> {
        let mut v = vec![Value::Null, json!([]), json!({})];
        if prop["type"] != "boolean" {
            v.push(json!(true));
        }
        match prop["type"].as_str() {
            Some("boolean") => v.extend([json!("true"), json!(1)]),
            Some("string") => {
                v.push(json!(1));
                if prop["minLength"] == 1 {
                    v.push(json!(""));
                }
            }
            Some("integer") => {
                v.extend([json!("1"), json!(1.5)]);
                let min = prop["minimum"].as_u64().unwrap();
                v.push(min.checked_sub(1).map_or_else(|| json!(-1), |m| json!(m)));
                let max = prop["maximum"].as_u64().unwrap();
                // u64::MAX + 1 is no u64: the float stands for it.
                v.push(
                    max.checked_add(1)
                        .map_or_else(|| json!(1.8446744073709552e19), |m| json!(m)),
                );
            }
            other => panic!("no generator for type {other:?}"),
        }
        v
    }

    #[test]
    fn each_schema_agrees_with_the_parser() {
        let d = tempfile::tempdir().unwrap();
        let cwd = d.path();
        std::fs::write(cwd.join("f"), "f\n").unwrap();
        for spec in specs() {
            let name = spec.name.as_str();
            let s = &spec.input_schema;
            assert_eq!(s["type"], "object", "{name}");
            assert_eq!(s["additionalProperties"], false, "{name}");
            let props = s["properties"].as_object().unwrap();
            let required: Vec<&str> = s["required"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r.as_str().unwrap())
                .collect();
            assert!(required.iter().all(|r| props.contains_key(*r)), "{name}");
            let minimal: serde_json::Map<String, Value> = required
                .iter()
                .map(|r| ((*r).to_owned(), allowed(&props[*r])[0].clone()))
                .collect();
            accepted(name, &Value::Object(minimal.clone()), cwd);
            // Every allowed value of every property, one at a time on the minimal input.
            for (key, prop) in props {
                for value in allowed(prop) {
                    let mut input = minimal.clone();
                    input.insert(key.clone(), value);
                    accepted(name, &Value::Object(input), cwd);
                }
                for value in refused_values(prop) {
                    let mut input = minimal.clone();
                    input.insert(key.clone(), value);
                    refused(name, &Value::Object(input), cwd);
                }
            }
            for r in &required {
                let mut input = minimal.clone();
                input.remove(*r);
                refused(name, &Value::Object(input), cwd);
            }
            let mut extra = minimal.clone();
            extra.insert("extra".to_owned(), json!("f"));
            refused(name, &Value::Object(extra), cwd);
            for not_object in [json!(["f"]), json!("f"), Value::Null, json!(1)] {
                refused(name, &not_object, cwd);
            }
        }
    }

    #[test]
    fn definitions_are_small_and_complete() {
        let all = specs();
        let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
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
        let wire: Vec<Value> = all
            .iter()
            .map(|s| json!({"name": s.name, "description": s.description, "input_schema": s.input_schema}))
            .collect();
        let bytes = serde_json::to_string(&wire).unwrap().len();
        assert!(bytes <= SPECS_BYTES, "{bytes} bytes");
        for s in &all {
            assert!(
                !s.description.is_empty() && s.description.len() <= 400,
                "{}",
                s.name
            );
            // Every path is explained.
            if let Some(p) = s.input_schema["properties"].get("path") {
                assert!(
                    p["description"].as_str().unwrap().contains("absolute"),
                    "{}",
                    s.name
                );
            }
        }
        // The parser's own bounds are the schema's.
        let read = &all[0].input_schema["properties"];
        assert_eq!(read["limit"]["maximum"], READ_LIMIT_MAX);
        let shell = &all[7].input_schema["properties"];
        assert_eq!(shell["timeout_ms"]["maximum"], SHELL_TIMEOUT_MAX_MS);
    }
}
