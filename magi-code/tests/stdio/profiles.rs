//! Profiles and skills over real pipes (`runner.md` 7): every way a profile makes `initialize`
//! fail with `profile_invalid`, the system prompt's skills list and primary profile body
//! before the instruction files, a primary profile's `tools` limiting what the model is
//! offered and may call, and a skill's `SKILL.md` read by its absolute path.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::{
    assert_error, canonical_cwd, chat_tool_names, init_params, last_tool_result, run_turn,
    start_session, system_prompt, Env, Server,
};
use serde_json::{json, Value};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

const WAIT: Duration = crate::common::STEP;

fn md(name: &str, extra: &str, body: &str) -> String {
    format!("---\nname: {name}\ndescription: The {name} profile.\n{extra}---\n{body}")
}

fn put(dir: &Path, file: &str, text: &str) -> PathBuf {
    fs::create_dir_all(dir).unwrap();
    fs::write(dir.join(file), text).unwrap();
    dir.join(file)
}

fn global_agents(env: &Env) -> PathBuf {
    env.home().join("agents")
}

fn project_agents(env: &Env) -> PathBuf {
    env.cwd.join(".magi").join("agents")
}

/// `initialize` fails with `code`, and a session operation answers the same code.
fn assert_init_fails(env: &Env, code: &str, what: &str) {
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status"]));
    assert_eq!(f["error"], json!({"code": code}), "{what}: {f}");
    let f = s.call("sc", "session.create", &json!({}));
    assert_error(&f, Some("sc"), code);
    s.shutdown_ok("bye");
}

/// Writes one wrong configuration into an environment.
type Setup = Box<dyn Fn(&Env)>;

#[test]
fn every_wrong_profile_is_profile_invalid_at_initialize() {
    let big = md("big", "", &"x".repeat(32 * 1024));
    let cases: Vec<(&str, Setup)> = vec![
        (
            "no front matter",
            Box::new(|e| drop(put(&global_agents(e), "a.md", "# just markdown\n"))),
        ),
        (
            "unclosed front matter",
            Box::new(|e| {
                drop(put(
                    &project_agents(e),
                    "a.md",
                    "---\nname: a\ndescription: d\n",
                ))
            }),
        ),
        (
            "no name",
            Box::new(|e| {
                drop(put(
                    &project_agents(e),
                    "a.md",
                    "---\ndescription: d\n---\n",
                ))
            }),
        ),
        (
            "no description",
            Box::new(|e| drop(put(&global_agents(e), "a.md", "---\nname: a\n---\n"))),
        ),
        (
            "bad name",
            Box::new(|e| drop(put(&project_agents(e), "a.md", &md("a b", "", "")))),
        ),
        (
            "bad model",
            Box::new(|e| {
                drop(put(
                    &project_agents(e),
                    "a.md",
                    &md("a", "model: gpt\n", ""),
                ))
            }),
        ),
        (
            "one name twice in a folder",
            Box::new(|e| {
                put(&project_agents(e), "a.md", &md("same", "", ""));
                put(&project_agents(e), "b.md", &md("same", "", ""));
            }),
        ),
        (
            "a file over 32 KiB",
            Box::new(move |e| drop(put(&global_agents(e), "a.md", &big))),
        ),
        (
            "65 profiles in a folder",
            Box::new(|e| {
                for i in 0..65 {
                    put(
                        &global_agents(e),
                        &format!("p{i}.md"),
                        &md(&format!("p{i}"), "", ""),
                    );
                }
            }),
        ),
        (
            "unknown agent",
            Box::new(|e| {
                put(&global_agents(e), "a.md", &md("a", "", ""));
                e.write_project_settings(&json!({"agent": "b"}));
            }),
        ),
    ];
    for (what, setup) in &cases {
        let env = Env::new();
        setup(&env);
        assert_init_fails(&env, "profile_invalid", what);
    }
}

#[test]
fn bad_settings_are_reported_before_bad_profiles_and_good_profiles_start() {
    let env = Env::new();
    put(&global_agents(&env), "a.md", "no front matter");
    env.write_project_settings(&json!({"agents": {"disabled": "a"}}));
    assert_init_fails(
        &env,
        "configuration_invalid",
        "bad settings and a bad profile",
    );

    let env = Env::new();
    put(&global_agents(&env), "a.md", &md("a", "", ""));
    put(
        &project_agents(&env),
        "a.md",
        &md("a", "", "the project's copy wins"),
    );
    put(&project_agents(&env), "README.txt", "not a profile");
    env.write_global_settings(
        &json!({"agent": "a", "agents": {"disabled": ["x"]}, "skills": {"disabled": ["y"]}}),
    );
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status"]));
    assert!(f.get("error").is_none(), "{f}");
    s.shutdown_ok("bye");
}

/// Runs one turn of `prompt` in a fresh session on the fake model with `extra` settings,
/// asserting it completed; the child stays up.
#[track_caller]
fn completed_turn(env: &Env, llm: &FakeLlm, extra: &Value, prompt: &str) -> Server {
    env.use_fake_llm(llm, extra);
    let (mut s, sid) = start_session(env, &[]);
    let frames = run_turn(&mut s, &sid, prompt);
    assert_eq!(
        frames.last().unwrap()["data"]["outcome"],
        "completed",
        "{frames:#?}"
    );
    s
}

#[test]
fn the_prompt_lists_skills_then_the_primary_body_before_agents_md_and_a_skill_is_readable() {
    let env = Env::new();
    let skill = put(
        &env.home().join("skills").join("pdf-forms"),
        "SKILL.md",
        "---\nname: pdf-forms\ndescription: Fill in PDF forms.\n---\nStep 1: SKILL BODY TEXT.\n",
    );
    put(
        &env.cwd.join(".magi/skills/off"),
        "SKILL.md",
        "---\nname: off\ndescription: Disabled one.\n---\n",
    );
    put(
        &env.cwd.join(".magi/skills/broken"),
        "SKILL.md",
        "no front matter",
    );
    put(
        &project_agents(&env),
        "rev.md",
        &md("rev", "", "PRIMARY PROFILE BODY"),
    );
    put(
        &project_agents(&env),
        "other.md",
        &md("other", "", "OTHER PROFILE BODY"),
    );
    fs::write(env.cwd.join("AGENTS.md"), "AGENTS MD TEXT\n").unwrap();
    let args = json!({"path": skill.display().to_string()}).to_string();
    let llm = FakeLlm::start(vec![
        chat_tool_call("r1", "read_file", &args),
        chat_text(&["done"]),
    ]);
    let mut s = completed_turn(
        &env,
        &llm,
        &json!({"agent": "rev", "skills": {"disabled": ["off"]}, "tools": {"read": "allow"}}),
        "fill the form",
    );

    let first = llm.next(WAIT);
    let prompt = system_prompt(&first.body);
    let at = |needle: &str| {
        prompt
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in {prompt:?}"))
    };
    let listed = format!("- pdf-forms: Fill in PDF forms. ({})", skill.display());
    assert!(at("You are magi-code") < at(&listed));
    assert!(at(&listed) < at("PRIMARY PROFILE BODY"));
    assert!(at("PRIMARY PROFILE BODY") < at("AGENTS MD TEXT"));
    assert!(prompt.contains("read_file"));
    assert!(!prompt.contains("Disabled one.") && !prompt.contains("broken"));
    assert!(
        !prompt.contains("OTHER PROFILE BODY"),
        "only the primary profile's body"
    );
    assert!(
        chat_tool_names(&first.body).contains(&"shell".to_owned()),
        "no `tools`: all offered"
    );

    let second = llm.next(WAIT);
    let (call, content) = last_tool_result(&second.body);
    assert_eq!(call, "r1");
    assert!(content.contains("SKILL BODY TEXT"), "{content}");
    s.shutdown_ok("bye");
}

#[test]
fn a_primary_profile_with_tools_offers_only_those_and_refuses_others() {
    let env = Env::new();
    put(
        &global_agents(&env),
        "reader.md",
        &md("reader", "tools: [read_file]\n", "Only read."),
    );
    fs::write(env.cwd.join("f.txt"), "x\n").unwrap();
    let llm = FakeLlm::start(vec![
        chat_tool_call("s1", "shell", r#"{"command":"touch made"}"#),
        chat_text(&["ok"]),
    ]);
    let mut s = completed_turn(
        &env,
        &llm,
        &json!({"agent": "reader", "tools": {"read": "allow", "shell": "allow"}}),
        "run something",
    );
    let first = llm.next(WAIT);
    assert_eq!(chat_tool_names(&first.body), ["read_file"]);
    let prompt = system_prompt(&first.body);
    assert!(prompt.contains("Your tools: read_file. "), "{prompt}");
    assert!(
        !prompt.contains("shell"),
        "only the offered tools are named"
    );
    let second = llm.next(WAIT);
    let (call, content) = last_tool_result(&second.body);
    assert_eq!(call, "s1");
    assert!(content.contains("unknown tool"), "{content}");
    assert!(!env.cwd.join("made").exists(), "the refused call never ran");
    s.shutdown_ok("bye");
}

#[test]
fn the_base_prompt_names_the_workspace_and_the_offered_tools_the_same_every_step() {
    // `runner.md` 3: the base prompt names the workspace folder and the tools.
    let env = Env::new();
    fs::write(env.cwd.join("f.txt"), "x\n").unwrap();
    let llm = FakeLlm::start(vec![
        chat_tool_call("r1", "read_file", r#"{"path":"f.txt"}"#),
        chat_text(&["done"]),
    ]);
    let mut s = completed_turn(&env, &llm, &json!({"tools": {"read": "allow"}}), "read f");
    let first = llm.next(WAIT);
    let prompt = system_prompt(&first.body);
    let names = chat_tool_names(&first.body);
    assert!(names.len() > 1 && names.contains(&"task".to_owned()));
    assert!(
        prompt.contains(&format!("Your tools: {}.", names.join(", "))),
        "every offered tool, in the request's order: {prompt}"
    );
    assert!(
        prompt.contains(&format!("in the folder {} ", canonical_cwd(&env))),
        "{prompt}"
    );
    let second = llm.next(WAIT);
    assert_eq!(
        system_prompt(&second.body),
        prompt,
        "byte-stable across steps"
    );
    s.shutdown_ok("bye");
}
