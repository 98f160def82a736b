//! The Code Mode helper (`code-mode.md` 3, 4, 8) as the backend sees it: the real built
//! `magi-code code-host`, spoken to through `codemode::helper`.

use magi_code::codemode::helper::{CallRequest, CellEnd, Helper};
use magi_code::codemode::protocol::{
    CallAnswer, Cell, CellState, InterruptReason, ToolErrorCode, ToolInfo,
};
use magi_code::codemode::text::result_text;
use magi_code::util::env::{child_env, BUILTIN_KEY_VARS};
use serde_json::{json, Value};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_magi-code");

fn start() -> Helper {
    let env = child_env(std::env::vars_os(), &BUILTIN_KEY_VARS, &[]);
    Helper::start_exe(Path::new(EXE), &env).expect("helper starts")
}

fn tool(name: &str) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        description: format!("the {name} tool"),
        declaration: format!("{name}(input: {{path: string}}): Promise<string>"),
    }
}

fn cell(code: &str) -> Cell {
    Cell {
        id: "cell-1".into(),
        code: code.into(),
        tools: vec![tool("read_file"), tool("grep")],
        cpu_ms: 10_000,
        memory_mib: 64,
        max_calls: 200,
    }
}

/// Runs `c` answering no call (each one is a test failure) and never interrupting.
fn run(h: &mut Helper, c: &Cell) -> CellEnd {
    h.run_cell(c, &mut |r| panic!("unexpected call {r:?}"), &mut || None)
}

fn completed(h: &mut Helper, code: &str) -> String {
    let end = run(h, &cell(code));
    assert_eq!(end.state, CellState::Completed, "{}", end.output);
    end.output
}

#[test]
fn a_cell_returns_its_value_as_compact_json() {
    let mut h = start();
    assert_eq!(completed(&mut h, "return 1 + 1"), "2");
    assert_eq!(
        completed(&mut h, "return {a: [1, 'x'], b: null}"),
        r#"{"a":[1,"x"],"b":null}"#
    );
    assert_eq!(
        completed(&mut h, "const x = await Promise.resolve(3); return x"),
        "3"
    );
    // Returning undefined (or nothing) adds no line.
    assert_eq!(completed(&mut h, "let y = 1;"), "");
}

#[test]
fn console_and_text_lines_come_in_call_order_then_the_value() {
    let mut h = start();
    let end = run(
        &mut h,
        &cell("console.log('a', 1, {x: 2}); text('l1\\nl2'); console.error('e'); console.warn([1]); console.info(true); text(5); return {ok: true}"),
    );
    assert_eq!(end.state, CellState::Completed);
    assert_eq!(
        end.output,
        "a 1 {\"x\":2}\nl1\nl2\ne\n[1]\ntrue\n5\n{\"ok\":true}"
    );
    assert_eq!(end.calls, 0);
    assert_eq!(
        result_text(end.state, 40, u64::from(end.calls), std::slice::from_ref(&end.output)),
        "exec completed\nin 0.0 s, 0 tool calls\na 1 {\"x\":2}\nl1\nl2\ne\n[1]\ntrue\n5\n{\"ok\":true}"
    );
}

#[test]
fn nested_calls_round_trip_and_backend_errors_throw_tool_error() {
    let mut h = start();
    let code = r#"
        const a = await tools.read_file({path: "a.txt"});
        const [b, c] = await Promise.all([tools.grep({path: "b"}), tools["read_file"]({path: "c"})]);
        let denied;
        try { await tools.grep({path: "secret"}); } catch (e) {
            denied = [e instanceof ToolError, e.name, e.code, e.message];
        }
        return [a, b, c, denied];
    "#;
    let mut seen: Vec<CallRequest> = Vec::new();
    let end = h.run_cell(
        &cell(code),
        &mut |r| {
            seen.push(r.clone());
            if r.input == json!({"path": "secret"}) {
                return CallAnswer::Error {
                    code: ToolErrorCode::Denied,
                    message: "the user denied it".into(),
                };
            }
            CallAnswer::Output(format!("{}:{}", r.name, r.input["path"].as_str().unwrap()))
        },
        &mut || None,
    );
    assert_eq!(end.state, CellState::Completed, "{}", end.output);
    let got: Value = serde_json::from_str(&end.output).unwrap();
    assert_eq!(
        got,
        json!([
            "read_file:a.txt",
            "grep:b",
            "read_file:c",
            [true, "ToolError", "denied", "the user denied it"]
        ])
    );
    assert_eq!(end.calls, 4);
    let names: Vec<&str> = seen.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["read_file", "grep", "read_file", "grep"]);
    // Call numbers are unique over the helper's life, in issue order.
    let ids: Vec<u64> = seen.iter().map(|r| r.call).collect();
    assert_eq!(ids, [1, 2, 3, 4]);
}

#[test]
fn deferred_calls_run_together_and_answer_in_any_order() {
    let mut h = start();
    let answerer = h.answerer();
    let (tx, rx) = std::sync::mpsc::channel::<u64>();
    // Another thread answers once all three calls are in flight, last one first.
    let worker = std::thread::spawn(move || {
        let ids: Vec<u64> = rx.iter().take(3).collect();
        for id in ids.iter().rev() {
            answerer.answer(*id, CallAnswer::Output(format!("answer {id}")));
        }
        ids
    });
    let code = "return await Promise.all([1, 2, 3].map(n => tools.grep({path: String(n)})))";
    let end = h.run_cell_deferred(
        &cell(code),
        &mut |r| {
            tx.send(r.call).unwrap();
            None
        },
        &mut || None,
    );
    let ids = worker.join().unwrap();
    assert_eq!(ids, [1, 2, 3]);
    assert_eq!(end.state, CellState::Completed, "{}", end.output);
    assert_eq!(end.output, r#"["answer 1","answer 2","answer 3"]"#);
    // A late answer to a call of an ended cell is dropped, not sent.
    h.answerer().answer(2, CallAnswer::Output("late".into()));
    assert_eq!(completed(&mut h, "return 'next'"), "\"next\"");
}

/// Answers as the backend does: the helper's refusal, `unknown_tool` for a name not in
/// `c`'s list, else `ok`; each request is kept.
fn backend<'a>(
    c: &'a Cell,
    seen: &'a mut Vec<CallRequest>,
) -> impl FnMut(CallRequest) -> CallAnswer + 'a {
    move |r: CallRequest| {
        let answer = match (&r.refused, c.tools.iter().any(|t| t.name == r.name)) {
            (Some(f), _) => CallAnswer::Error {
                code: f.code,
                message: f.message.clone(),
            },
            (None, false) => CallAnswer::Error {
                code: ToolErrorCode::UnknownTool,
                message: "unknown tool".into(),
            },
            (None, true) => CallAnswer::Output("ok".into()),
        };
        seen.push(r);
        answer
    }
}

#[test]
fn unknown_tools_and_calls_past_max_calls_reach_the_backend_and_reject_with_tool_error() {
    let mut h = start();
    let code = r#"
        const out = [];
        for (const f of [() => tools.nope({}), () => tools.exec({code: "1"}), () => tools["mcp__x__y-z"]()]) {
            try { await f(); out.push("resolved"); } catch (e) { out.push([e instanceof ToolError, e.name, e.code, e.message.length > 0]); }
        }
        out.push(typeof tools.anything, "nope" in tools, "grep" in tools, Object.keys(tools));
        return out;
    "#;
    let c = cell(code);
    let mut seen = Vec::new();
    let end = h.run_cell(&c, &mut backend(&c, &mut seen), &mut || None);
    assert_eq!(end.state, CellState::Completed, "{}", end.output);
    let unknown = json!([true, "ToolError", "unknown_tool", true]);
    assert_eq!(
        serde_json::from_str::<Value>(&end.output).unwrap(),
        json!([
            unknown,
            unknown,
            unknown,
            "function",
            false,
            true,
            ["grep", "read_file"]
        ])
    );
    assert_eq!(end.calls, 3, "refused calls count");
    let names: Vec<_> = seen.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["nope", "exec", "mcp__x__y-z"], "every call is sent");
    let mut limited = cell(
        "const r = []; for (let i = 0; i < 3; i++) { try { r.push(await tools.grep({path: 'p'})); } catch (e) { r.push(e.code, e.message); } } return r",
    );
    limited.max_calls = 2;
    let mut seen = Vec::new();
    let end = h.run_cell(&limited, &mut backend(&limited, &mut seen), &mut || None);
    // Past `max_calls` (decisions.md 52): thrown here, never sent, said first in the body.
    assert_eq!(
        end.output,
        "1 calls refused past max_calls\n[\"ok\",\"ok\",\"limit\",\"limit: a cell makes at most 2 tool calls\"]"
    );
    assert_eq!(end.calls, 2, "the calls sent");
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.refused.is_none()));
}

#[test]
fn a_loop_that_ignores_limit_is_stopped_after_1000_more_calls() {
    let mut h = start();
    let mut c = cell(
        "for (;;) { try { await tools.grep({path: 'p'}); } catch (e) { if (e.code !== 'limit') throw e; } }",
    );
    c.max_calls = 3;
    let mut seen = Vec::new();
    let end = h.run_cell(&c, &mut backend(&c, &mut seen), &mut || None);
    assert_eq!(end.state, CellState::Failed, "{}", end.output);
    assert_eq!(
        end.output,
        "1000 calls refused past max_calls\nError: stopped: too many calls past max_calls"
    );
    assert_eq!(seen.len(), 3, "only the calls within max_calls are sent");
    assert_eq!(end.calls, 3);
    // The same without awaiting: the helper holds at most that many calls, and a stopped
    // cell sends none it still holds (none of them ran).
    let mut c = cell("for (;;) tools.grep({path: 'p'}).catch(() => {})");
    c.max_calls = 3;
    let mut seen = Vec::new();
    let end = h.run_cell(&c, &mut backend(&c, &mut seen), &mut || None);
    assert_eq!(end.state, CellState::Failed, "{}", end.output);
    assert!(seen.is_empty());
    assert_eq!(completed(&mut h, "return 3"), "3");
}

#[test]
fn calls_issued_together_are_sent_together() {
    let mut h = start();
    let c = cell(
        "const a = await Promise.all([tools.grep({path: 'a'}), tools.grep({path: 'b'}), tools.read_file({path: 'c'})]);\nreturn [a, await tools.grep({path: 'd'})]",
    );
    let mut seen = Vec::new();
    let end = h.run_cell(&c, &mut backend(&c, &mut seen), &mut || None);
    assert_eq!(end.output, r#"[["ok","ok","ok"],"ok"]"#);
    let more: Vec<bool> = seen.iter().map(|r| r.more).collect();
    assert_eq!(more, [true, true, false, false]);
}

#[test]
fn inputs_a_call_line_cannot_carry_are_sent_refused_invalid_input() {
    let mut h = start();
    let code = r#"
        let deep = 1; for (let i = 0; i < 100; i++) deep = [deep];
        const out = [];
        for (const input of [deep, {s: "x".repeat(2 * 1024 * 1024)}, {n: 10n}]) {
            try { await tools.grep(input); out.push("sent"); } catch (e) { out.push(e.code); }
        }
        return out;
    "#;
    let c = cell(code);
    let mut seen = Vec::new();
    let end = h.run_cell(&c, &mut backend(&c, &mut seen), &mut || None);
    assert_eq!(
        end.output,
        r#"["invalid_input","invalid_input","invalid_input"]"#
    );
    assert_eq!(end.calls, 3);
    assert!(seen.iter().all(|r| r.input == Value::Null
        && r.refused.as_ref().map(|f| f.code) == Some(ToolErrorCode::InvalidInput)));
}

#[test]
fn runaway_recursion_fails_the_cell_and_leaves_the_helper_usable() {
    let mut h = start();
    let end = run(
        &mut h,
        &cell("function r(n) { return r(n + 1) + 1; }\nreturn r(0)"),
    );
    assert_eq!(end.state, CellState::Failed, "{}", end.output);
    assert!(
        end.output.contains("stack") || end.output.contains("recursion"),
        "{}",
        end.output
    );
    assert_eq!(completed(&mut h, "return 3"), "3");
}

#[test]
fn the_sandbox_has_the_section_3_globals_and_nothing_ambient() {
    let mut h = start();
    let absent = [
        "require",
        "fetch",
        "process",
        "setTimeout",
        "setInterval",
        "Deno",
        "WebAssembly",
        "queueMicrotask",
        "performance",
        "Atomics",
        "SharedArrayBuffer",
        "std",
        "os",
        "print",
        "navigator",
        "atob",
    ];
    let code = format!(
        "return [{}].map(t => typeof t)",
        absent.map(|n| format!("globalThis.{n}")).join(", ")
    );
    let all_undefined = json!(vec!["undefined"; absent.len()]);
    assert_eq!(
        serde_json::from_str::<Value>(&completed(&mut h, &code)).unwrap(),
        all_undefined
    );
    let code = "return [typeof require, typeof fetch, typeof process, typeof setTimeout, typeof Deno, typeof WebAssembly]";
    assert_eq!(
        completed(&mut h, code),
        r#"["undefined","undefined","undefined","undefined","undefined","undefined"]"#
    );
    let present = "return [typeof tools, typeof ToolError, typeof text, typeof console.log, typeof describe, Array.isArray(ALL_TOOLS), typeof store, typeof load]";
    assert_eq!(
        completed(&mut h, present),
        r#"["object","function","function","function","function",true,"function","function"]"#
    );
    let mut c = cell("return [ALL_TOOLS, describe('grep'), describe('nope'), describe('exec'), new ToolError('failed', 'm').name]");
    c.tools = vec![tool("zeta"), tool("exec"), tool("grep"), tool("alpha")];
    let end = run(&mut h, &c);
    assert_eq!(
        serde_json::from_str::<Value>(&end.output).unwrap(),
        json!([
            [{"name": "alpha", "description": "the alpha tool"}, {"name": "grep", "description": "the grep tool"},
             {"name": "zeta", "description": "the zeta tool"}],
            "grep(input: {path: string}): Promise<string>", null, null, "ToolError"
        ])
    );
}

#[test]
fn a_busy_loop_is_stopped_by_its_cpu_budget() {
    let mut h = start();
    let mut c = cell("while (true) {}");
    c.cpu_ms = 200;
    let t = Instant::now();
    let end = run(&mut h, &c);
    eprintln!("cpu_ms 200 busy loop ended after {:?}", t.elapsed());
    assert_eq!(end.state, CellState::TimedOut);
    assert!(end.helper_alive, "the helper stopped the cell itself");
    // The CPU clock stops while a call is awaited: 300 ms of waiting on a 200 ms budget.
    let mut c = cell("const r = await tools.grep({path: 'p'}); return r");
    c.cpu_ms = 200;
    let end = h.run_cell(
        &c,
        &mut |_| {
            let (_tx, rx) = std::sync::mpsc::channel::<()>();
            // Blocks the answer (not the engine) for longer than the budget.
            assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
            CallAnswer::Output("late".into())
        },
        &mut || None,
    );
    assert_eq!(
        (end.state, end.output.as_str()),
        (CellState::Completed, "\"late\"")
    );
    assert_eq!(
        completed(&mut h, "return 'still usable'"),
        "\"still usable\""
    );
}

#[test]
fn an_allocation_bomb_runs_out_of_memory() {
    let mut h = start();
    let mut c = cell("const a = []; while (true) a.push('x'.repeat(100000) + a.length);");
    c.memory_mib = 16;
    let end = run(&mut h, &c);
    assert_eq!(end.state, CellState::OutOfMemory, "{}", end.output);
    let mut c = cell("const m = new Map(); for (let i = 0; ; i++) m.set(i, {i});");
    c.memory_mib = 16;
    assert_eq!(run(&mut h, &c).state, CellState::OutOfMemory);
    // Caught inside the code, it is not the cell's end.
    let mut c = cell("try { const a = []; while (true) a.push(new Array(100000).fill(1)); } catch (e) { } return 'survived'");
    c.memory_mib = 16;
    let end = run(&mut h, &c);
    assert_eq!(
        (end.state, end.output.as_str()),
        (CellState::Completed, "\"survived\"")
    );
    assert!(end.helper_alive);
    // An error thrown after a refused allocation was caught still counts as running out.
    let mut c = cell(
        "function bomb() { const a = []; while (true) a.push({}); }\ntry { bomb(); } catch (e) { }\nthrow new Error('after')",
    );
    c.memory_mib = 16;
    let end = run(&mut h, &c);
    assert_eq!(
        (end.state, end.output.lines().next()),
        (CellState::OutOfMemory, Some("Error: after"))
    );
    // A thrown null is an ordinary failure, not a refused allocation.
    assert_eq!(run(&mut h, &cell("throw null")).state, CellState::Failed);
}

#[test]
fn an_interrupt_stops_a_busy_cell_without_killing_the_helper() {
    for (reason, state) in [
        (InterruptReason::Cancel, CellState::Cancelled),
        (InterruptReason::Timeout, CellState::TimedOut),
    ] {
        let mut h = start();
        let mut polls = 0;
        let mut asked: Option<Instant> = None;
        let end = h.run_cell(
            &cell("console.log('before'); while (true) {}"),
            &mut |_| unreachable!(),
            &mut || {
                polls += 1;
                (polls == 10).then(|| {
                    asked = Some(Instant::now());
                    reason
                })
            },
        );
        eprintln!(
            "{reason:?}: ended {:?} after the interrupt",
            asked.unwrap().elapsed()
        );
        assert_eq!(end.state, state);
        // Alive means it stopped within the 100 ms grace, before any kill.
        assert!(end.helper_alive);
        assert_eq!(end.output, "before");
        assert_eq!(completed(&mut h, "return 2"), "2");
    }
}

#[test]
fn an_interrupt_while_a_call_is_awaited_ends_the_cell() {
    let mut h = start();
    let answered = std::cell::Cell::new(false);
    let end = h.run_cell(
        &cell("console.log('asked'); const r = await tools.grep({path: 'p'}); console.log('never', r);"),
        &mut |_| {
            answered.set(true);
            CallAnswer::Output("x".into())
        },
        // The cancel comes while the call runs, so the code never gets its answer.
        &mut || answered.get().then_some(InterruptReason::Cancel),
    );
    assert!(answered.get());
    assert_eq!(
        (end.state, end.output.as_str()),
        (CellState::Cancelled, "asked")
    );
    assert_eq!(end.calls, 1);
    assert!(end.helper_alive);
}

#[test]
fn a_promise_nothing_settles_fails_the_cell() {
    let mut h = start();
    let end = run(&mut h, &cell("await new Promise(() => {}); return 1"));
    assert_eq!(end.state, CellState::Failed);
    assert!(end.output.contains("nothing settles"), "{}", end.output);
}

#[test]
fn a_helper_killed_mid_cell_fails_the_cell() {
    let mut h = start();
    let pid = h.pid().to_string();
    let mut polls = 0;
    let end = h.run_cell(
        &cell("await tools.grep({path: 'p'}); while (true) {}"),
        &mut |_| CallAnswer::Output("x".into()),
        &mut || {
            polls += 1;
            if polls == 5 {
                let st = std::process::Command::new("kill")
                    .args(["-9", &pid])
                    .status()
                    .unwrap();
                assert!(st.success());
            }
            None
        },
    );
    assert_eq!(end.state, CellState::Failed);
    assert!(!end.helper_alive && !h.is_alive());
    assert!(end.output.contains("exited"), "{}", end.output);
    assert_eq!(end.calls, 1, "the calls it saw");
    // A dead helper refuses further cells at once.
    assert_eq!(run(&mut h, &cell("return 1")).state, CellState::Failed);
}

#[test]
fn fences_are_removed_and_errors_name_the_models_lines() {
    let mut h = start();
    assert_eq!(
        completed(&mut h, "```js\nreturn 'fenced'\n```\n"),
        "\"fenced\""
    );
    let end = run(&mut h, &cell("```javascript\nconst a = 1;\nfunction f() {\n  let q = null; return q.x;\n}\nf();\n```"));
    assert_eq!(end.state, CellState::Failed);
    let lines: Vec<&str> = end.output.lines().collect();
    assert_eq!(
        lines[0], "TypeError: cannot read property 'x' of null",
        "{}",
        end.output
    );
    assert!(lines[1].starts_with("    at f (code:3:"), "{}", end.output);
    assert!(
        lines[2].starts_with("    at <code> (code:5:"),
        "{}",
        end.output
    );
    assert_eq!(lines.len(), 3, "{}", end.output);
    let end = run(&mut h, &cell("```\nlet x = 1;\nx +* 2;\n```"));
    assert_eq!(end.state, CellState::Failed);
    assert!(end.output.starts_with("SyntaxError: "), "{}", end.output);
    assert!(end.output.contains("code:2:"), "{}", end.output);
    let end = run(
        &mut h,
        &cell("console.log('x');\nthrow new ToolError('failed', 'boom')"),
    );
    assert_eq!(
        end.output.lines().take(2).collect::<Vec<_>>(),
        ["x", "ToolError: boom"]
    );
    // An uncaught ToolError of a nested call names the line that made the call (code-mode.md
    // 5), whether the backend refused it or the cell did (past max_calls).
    let nested = "const a = 1;\n\nawait tools.nope({});";
    let end = h.run_cell(
        &cell(nested),
        &mut |_| CallAnswer::Error {
            code: ToolErrorCode::UnknownTool,
            message: "unknown tool".into(),
        },
        &mut || None,
    );
    let lines: Vec<&str> = end.output.lines().collect();
    assert_eq!(lines[0], "ToolError: unknown tool", "{}", end.output);
    assert!(
        lines[1].starts_with("    at <code> (code:3:"),
        "{}",
        end.output
    );
    assert_eq!(lines.len(), 2, "{}", end.output);
    let mut past = cell("await tools.grep({});\nawait tools.grep({});");
    past.max_calls = 1;
    let end = h.run_cell(&past, &mut |_| CallAnswer::Output("ok".into()), &mut || {
        None
    });
    let lines: Vec<&str> = end.output.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "1 calls refused past max_calls",
            "ToolError: limit: a cell makes at most 1 tool calls"
        ],
        "{}",
        end.output
    );
    assert!(
        lines[2].starts_with("    at <code> (code:2:"),
        "{}",
        end.output
    );
    // Lone surrogates reach the backend as U+FFFD, never as a failed conversion.
    let end = run(
        &mut h,
        &cell("console.log('x\\ud800y'); store('\\udc00', 1); throw new Error('\\ud800')"),
    );
    assert_eq!(
        (end.state, end.output.lines().take(2).collect::<Vec<_>>()),
        (CellState::Failed, vec!["x\u{fffd}y", "Error: \u{fffd}"])
    );
    let end = run(&mut h, &cell("throw 'plain'"));
    assert_eq!(
        (end.state, end.output.as_str()),
        (CellState::Failed, "Uncaught plain")
    );
}

#[test]
fn store_and_load_keep_json_between_cells_up_to_1_mib() {
    let mut h = start();
    completed(&mut h, "store('k', {a: [1, 2]}); store('n', 5)");
    assert_eq!(
        completed(
            &mut h,
            "return [load('k'), load('n'), load('never') === undefined]"
        ),
        r#"[{"a":[1,2]},5,true]"#
    );
    let code = "try { store('big', 'x'.repeat(1024 * 1024)); return 'stored'; } catch (e) { return [e.name, e.code, load('big') === undefined, load('n')]; }";
    assert_eq!(completed(&mut h, code), r#"["ToolError","limit",true,5]"#);
    // Just under the bound fits (keys and JSON values: 2 quotes around the string).
    let fits = "store('k', undefined); store('n', undefined); store('b', 'x'.repeat(1024 * 1024 - 3)); return load('b').length";
    assert_eq!(completed(&mut h, fits), "1048573");
    // Another helper (another attachment) starts empty.
    assert_eq!(
        completed(&mut start(), "return load('b') === undefined"),
        "true"
    );
}

#[test]
fn the_helper_gets_no_provider_key_and_no_descriptor_but_its_pipes() {
    let extra: Vec<(OsString, OsString)> = vec![
        ("OPENAI_API_KEY".into(), "sk-test-openai-0123456789".into()),
        ("MY_SERVICE_TOKEN".into(), "tok".into()),
        ("CODE_HOST_PLAIN".into(), "visible".into()),
    ];
    let env = child_env(std::env::vars_os().chain(extra), &BUILTIN_KEY_VARS, &[]);
    let leaked = leak_descriptor();
    let mut h = Helper::start_exe(Path::new(EXE), &env).unwrap();
    // After a first cell the helper has long passed its start.
    assert_eq!(completed(&mut h, "return 1"), "1");
    let environ = std::fs::read(format!("/proc/{}/environ", h.pid())).unwrap();
    let names: Vec<String> = environ
        .split(|b| *b == 0)
        .filter_map(|kv| kv.split(|b| *b == b'=').next())
        .map(|k| String::from_utf8_lossy(k).into_owned())
        .collect();
    assert!(names.contains(&"CODE_HOST_PLAIN".to_owned()), "{names:?}");
    for gone in ["OPENAI_API_KEY", "MY_SERVICE_TOKEN"] {
        assert!(!names.contains(&gone.to_owned()), "{gone} in {names:?}");
    }
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{}/fd", h.pid()))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    fds.sort();
    assert_eq!(fds, ["0", "1", "2"], "the test leaked fd {leaked} into it");
}

/// A descriptor of this process without close-on-exec, as a careless parent might leave one.
fn leak_descriptor() -> i32 {
    use std::os::fd::IntoRawFd;
    let fd = std::fs::File::open(EXE).unwrap().into_raw_fd();
    #[allow(unsafe_code)]
    // SAFETY: fd is open and owned by nobody else (into_raw_fd gave up ownership).
    let r = unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
    assert_eq!(r, 0);
    fd
}

/// A stand-in helper: `/usr/bin/env code-host` finds `script` as `code-host` on its PATH.
fn fake_helper(script: &str) -> (Helper, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("code-host");
    std::fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    let env = vec![(OsString::from("PATH"), dir.path().as_os_str().to_owned())];
    let h = Helper::start_exe(Path::new("/usr/bin/env"), &env).unwrap();
    (h, dir)
}

#[test]
fn a_helper_that_breaks_the_protocol_fails_the_cell_and_is_dropped() {
    let (mut h, _dir) = fake_helper("read line; echo '{\"type\":\"hello\"}'; exec /bin/sleep 30");
    let end = run(&mut h, &cell("return 1"));
    assert_eq!(end.state, CellState::Failed);
    assert!(end.output.contains("broke the protocol"), "{}", end.output);
    assert!(!end.helper_alive);
    // A done for another cell breaks it too.
    let (mut h, _dir) = fake_helper(
        "read line; echo '{\"type\":\"done\",\"id\":\"other\",\"state\":\"completed\",\"output\":\"\",\"calls\":0}'; exec /bin/sleep 30",
    );
    let end = run(&mut h, &cell("return 1"));
    assert_eq!((end.state, end.helper_alive), (CellState::Failed, false));
}

#[test]
fn a_helper_that_ignores_an_interrupt_is_killed_and_the_cell_keeps_the_interrupts_state() {
    let (mut h, _dir) = fake_helper("exec /bin/sleep 30");
    let mut polls = 0;
    let mut asked: Option<Instant> = None;
    let end = h.run_cell(&cell("return 1"), &mut |_| unreachable!(), &mut || {
        polls += 1;
        (polls == 2).then(|| {
            asked = Some(Instant::now());
            InterruptReason::Timeout
        })
    });
    eprintln!("killed {:?} after the interrupt", asked.unwrap().elapsed());
    assert_eq!(end.state, CellState::TimedOut);
    assert!(!end.helper_alive && !h.is_alive());
    assert!(
        end.output.contains("did not stop within 100 ms"),
        "{}",
        end.output
    );
}
