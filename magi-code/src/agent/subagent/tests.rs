use super::*;
use crate::agent::quiet::Quiet;
use crate::agent::task::{describe, spec};
use crate::config::{Policy, Settings};
use serde_json::json;
use std::os::unix::fs::symlink;
use std::path::Path;

fn runtime(root: &Path) -> Runtime {
    fs::create_dir_all(root.join("sessions")).unwrap();
    Runtime::for_tests(root, root)
}

fn profile(name: &str, tools: Option<&[&str]>) -> Profile {
    Profile {
        name: name.to_owned(),
        description: format!("the {name} agent\nover two lines"),
        tools: tools.map(|t| t.iter().map(|s| (*s).to_owned()).collect()),
        model: None,
        body: format!("Body of {name}."),
    }
}

fn lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn the_subagent_id_stays_inside_the_64_byte_grammar() {
    let parent = "p".repeat(62);
    let ninth = subagent_id(&parent, 9).expect("64 bytes: the largest accepted");
    assert_eq!(ninth.as_str().len(), 64);
    assert_eq!(
        subagent_id(&parent, 10),
        None,
        "65 bytes: the first rejected"
    );
    assert_eq!(subagent_id("abc", 1).unwrap().as_str(), "abc-1");
}

#[test]
fn histories_take_the_first_free_number_with_session_meta_first() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let (a, _) = create_history(&rt.root, "/w", "s").unwrap();
    assert_eq!(a.as_str(), "s-1");
    let path = rt.root.join("sessions/subagents/s-1.jsonl");
    let recs = lines(&path);
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0]["type"], "session_meta");
    assert_eq!(recs[0]["session_id"], "s-1");
    assert_eq!(recs[0]["cwd"], "/w");
    // Create-new: a file already there (say, another child's) is never reused.
    fs::write(rt.root.join("sessions/subagents/s-2.jsonl"), "x\n").unwrap();
    let (b, _) = create_history(&rt.root, "/w", "s").unwrap();
    assert_eq!(b.as_str(), "s-3");
    assert_eq!(
        fs::read(rt.root.join("sessions/subagents/s-2.jsonl")).unwrap(),
        b"x\n"
    );
    // Per session: another session starts at 1.
    assert_eq!(
        create_history(&rt.root, "/w", "t").unwrap().0.as_str(),
        "t-1"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(rt.root.join("sessions/subagents"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);
}

#[test]
fn a_parent_id_too_long_for_the_next_number_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let parent = "p".repeat(62);
    for n in 1..=9 {
        let (id, _) = create_history(&rt.root, "/w", &parent).unwrap();
        assert_eq!(id.as_str(), format!("{parent}-{n}"));
    }
    assert_eq!(
        create_history(&rt.root, "/w", &parent).err(),
        Some(HistoryError::IdTooLong)
    );
}

#[test]
fn a_symlinked_subagents_folder_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(&d.path().join("home"));
    let elsewhere = d.path().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    symlink(&elsewhere, rt.root.join("sessions/subagents")).unwrap();
    assert_eq!(
        create_history(&rt.root, "/w", "s").err(),
        Some(HistoryError::Store)
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn the_description_names_every_accepted_profile_and_no_disabled_one() {
    let d = tempfile::tempdir().unwrap();
    let mut rt = runtime(d.path());
    let plain = spec(&rt);
    assert_eq!(plain.name, "task");
    assert!(!plain.description.contains("Agents"));
    assert!(plain.input_schema["properties"]["agent"]
        .get("enum")
        .is_none());
    assert_eq!(
        plain.input_schema["required"],
        json!(["description", "prompt"])
    );
    rt.profiles = vec![profile("review", None), profile("hidden", None)];
    rt.settings.agents_disabled = vec!["hidden".into()];
    let s = spec(&rt);
    assert!(
        s.description
            .contains("\n- review: the review agent over two lines"),
        "{}",
        s.description
    );
    assert!(!s.description.contains("hidden"));
    assert_eq!(
        s.input_schema["properties"]["agent"]["enum"],
        json!(["review"])
    );
}

#[test]
fn profiles_are_found_by_name_and_disabled_ones_refused() {
    let d = tempfile::tempdir().unwrap();
    let mut rt = runtime(d.path());
    rt.profiles = vec![profile("review", None), profile("hidden", None)];
    rt.settings.agents_disabled = vec!["hidden".into()];
    assert_eq!(super::profile(&rt, None), Ok(None));
    assert_eq!(
        super::profile(&rt, Some("review")).unwrap().unwrap().name,
        "review"
    );
    assert_eq!(super::profile(&rt, Some("nobody")), Err("unknown agent"));
    assert_eq!(
        super::profile(&rt, Some("hidden")),
        Err("refused: that agent is disabled")
    );
    // Disabled even when no profile of that name exists: still refused, not "unknown".
    rt.settings.agents_disabled.push("ghost".into());
    assert_eq!(
        super::profile(&rt, Some("ghost")),
        Err("refused: that agent is disabled")
    );
}

#[test]
fn a_subagent_never_gets_task_and_a_profile_limits_its_tools() {
    let general: Vec<String> = table(None, None)
        .specs()
        .iter()
        .cloned()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        general,
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
    let p = profile("reader", Some(&["read_file", "grep", "task", "nope"]));
    let limited: Vec<String> = table(None, Some(&p))
        .specs()
        .iter()
        .cloned()
        .map(|s| s.name)
        .collect();
    assert_eq!(
        limited,
        ["read_file", "grep"],
        "never task, only offered tools"
    );
    let none = profile("none", Some(&[]));
    assert!(table(None, Some(&none)).specs().is_empty());
    let all = profile("all", None);
    assert_eq!(table(None, Some(&all)).specs().len(), 8);
}

#[test]
fn the_prompt_is_the_base_the_note_the_body_then_the_instruction_files() {
    let d = tempfile::tempdir().unwrap();
    let mut rt = runtime(d.path());
    rt.instructions = "FILES".into();
    let p = profile("review", None);
    let specs = table(None, Some(&p)).specs().to_vec();
    let text = instructions(&rt, Some(&p), &specs);
    let base = context::instructions(&runtime(d.path()), &specs);
    assert!(text.starts_with(&base), "{text}");
    let (note, body, files) = (
        text.find(SUBAGENT_NOTE).unwrap(),
        text.find("Body of review.").unwrap(),
        text.find("FILES").unwrap(),
    );
    assert!(note < body && body < files, "{text}");
    let general = instructions(&rt, None, &specs);
    assert!(!general.contains("Body of"));
    assert!(general.ends_with("\n\nFILES"));
}

#[test]
fn calls_show_the_profile_name_or_general() {
    assert_eq!(describe(&json!({"prompt": "p"})), "general");
    assert_eq!(describe(&json!({"agent": null})), "general");
    assert_eq!(describe(&json!({"agent": "review"})), "review");
    assert_eq!(describe(&json!({"agent": 3})), "agent");
    assert_eq!(describe(&json!({"agent": "a\nb"})), "a b");
}

#[test]
fn the_final_text_is_the_last_segment_after_the_last_tool_call() {
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let (id, appender) = create_history(&rt.root, "/w", "s").unwrap();
    let q = Quiet::new(id.as_str().to_owned(), appender);
    let msg = |text: &str, partial| {
        Record::now(
            q.id(),
            Body::AssistantMessage {
                run_id: "r".into(),
                message_id: "m".into(),
                text: Some(text.into()),
                partial,
            },
        )
    };
    let call = Record::now(
        q.id(),
        Body::ToolCall {
            run_id: "r".into(),
            call_id: "c".into(),
            name: "read_file".into(),
            input: json!({}),
        },
    );
    q.append(&[msg("looking", false), call]).unwrap();
    assert_eq!(
        q.final_text(),
        "",
        "text before a tool call is not the reply"
    );
    q.append(&[msg("the answer", false)]).unwrap();
    assert_eq!(q.final_text(), "the answer");
    q.append(&[msg("cut sho", true)]).unwrap();
    assert_eq!(
        q.final_text(),
        "the answer",
        "a partial segment is no reply"
    );
    assert_eq!(
        lines(&rt.root.join("sessions/subagents/s-1.jsonl")).len(),
        5
    );
}

#[test]
fn tools_task_is_a_policy_defaulting_to_allow() {
    use crate::config::settings::load;
    assert_eq!(Settings::default().tool_task, Policy::Allow);
    let m = |v: Value| v.as_object().cloned();
    let deny = load(m(json!({"tools": {"task": "deny"}})), None).unwrap();
    assert_eq!(deny.tool_task, Policy::Deny);
    let ask = load(None, m(json!({"tools": {"task": "ask"}}))).unwrap();
    assert_eq!(ask.tool_task, Policy::Ask);
    assert!(load(m(json!({"tools": {"task": "sometimes"}})), None).is_err());
}

#[test]
fn task_keeps_the_base_prompt_and_built_in_tools_within_12_kib() {
    // `runner.md` 7: without skills, profiles or instruction files, at most 12 KiB together.
    let d = tempfile::tempdir().unwrap();
    let rt = runtime(d.path());
    let specs = context::table(&rt, None).specs().to_vec();
    assert_eq!(specs.last().unwrap().name, "task");
    let size = context::instructions(&rt, &specs).len()
        + specs
            .iter()
            .map(|s| s.name.len() + s.description.len() + s.input_schema.to_string().len())
            .sum::<usize>();
    assert!(size <= 12 * 1024, "{size} bytes");
}
