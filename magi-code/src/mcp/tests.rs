use super::*;
use crate::util::schema::SCHEMA_BYTES;
use serde_json::json;

#[test]
fn the_digest_is_lowercase_hex_sha256_of_the_canonical_bytes() {
    // sha256("abc"), the FIPS 180-2 example.
    assert_eq!(
        digest("abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

#[test]
fn offered_names_are_at_most_64_bytes_of_the_tool_name_grammar() {
    assert_eq!(
        offered_name("fs", "read_text_file").as_deref(),
        Some("mcp__fs__read_text_file")
    );
    // "mcp__" + "s" + "__" = 8 bytes, so a 56-byte tool name is the longest accepted.
    let longest = "t".repeat(56);
    assert_eq!(offered_name("s", &longest).map(|n| n.len()), Some(64));
    assert_eq!(offered_name("s", &"t".repeat(57)), None);
    assert_eq!(offered_name("s", "get.env"), None);
    assert_eq!(offered_name("s", "a b"), None);
    assert_eq!(
        offered_name("s", "get-env").as_deref(),
        Some("mcp__s__get-env")
    );
}

fn tool(name: &str) -> RemoteTool {
    RemoteTool {
        name: name.to_owned(),
        description: String::new(),
        input_schema: json!({"type": "object"}),
    }
}

#[test]
fn colliding_and_invalid_names_are_left_out() {
    let (offered, left_out) = offer(vec![
        ("a__b".into(), vec![tool("c"), tool("ok")]),
        (
            "a".into(),
            vec![tool("b__c"), tool("x.y"), tool("dup"), tool("dup")],
        ),
    ]);
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["mcp__a__b__ok"]);
    // Invalid names first, then the colliding ones, each as <server>/<tool>.
    assert_eq!(left_out, ["a/x.y", "a__b/c", "a/b__c", "a/dup", "a/dup"]);
    assert_eq!(offered[0].server, "a__b");
    assert_eq!(offered[0].tool, "ok");
}

#[test]
fn tools_whose_schema_does_not_compile_are_left_out_with_the_invalid_names() {
    let with = |name: &str, schema: Value| RemoteTool {
        input_schema: schema,
        ..tool(name)
    };
    let big = json!({"type": "object", "description": "x".repeat(SCHEMA_BYTES)});
    let (offered, left_out) = offer(vec![(
        "s".into(),
        vec![
            with("typo", json!({"type": "objekt"})),
            with("remote", json!({"$ref": "https://example.com/s.json"})),
            with("big", big),
            with("x.y", json!({"type": "object"})),
            with(
                "ok",
                json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            ),
        ],
    )]);
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["mcp__s__ok"]);
    assert_eq!(left_out, ["s/typo", "s/remote", "s/big", "s/x.y"]);
    // The compiled schema checks calls.
    assert!(offered[0].validator.check(&json!({"a": "x"})).is_ok());
    assert!(offered[0].validator.check(&json!({"a": 1})).is_err());
}

fn page(n: usize, next: Option<&str>) -> Value {
    let tools: Vec<Value> = (0..n).map(|i| json!({"name": format!("t{i}")})).collect();
    match next {
        Some(c) => json!({"tools": tools, "nextCursor": c}),
        None => json!({"tools": tools}),
    }
}

#[test]
fn paging_follows_next_cursor_and_stops_at_its_bounds() {
    let mut seen = Vec::new();
    let got = collect_pages(|c| {
        seen.push(c.map(str::to_owned));
        Ok(match c {
            None => page(2, Some("p2")),
            Some("p2") => page(3, None),
            _ => return Err(Malformed),
        })
    })
    .unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(seen, vec![None, Some("p2".to_owned())]);

    // Exactly MAX_TOOLS are kept; the page that would pass the bound is cut.
    let mut calls = 0;
    let got = collect_pages(|_| {
        calls += 1;
        Ok(page(300, Some("more")))
    })
    .unwrap();
    assert_eq!(got.len(), protocol::MAX_TOOLS);
    assert_eq!(calls, 4);

    // A server paging forever is followed MAX_PAGES times only.
    let mut calls = 0;
    let got = collect_pages(|_| {
        calls += 1;
        Ok(page(0, Some("again")))
    })
    .unwrap();
    assert!(got.is_empty());
    assert_eq!(calls, protocol::MAX_PAGES);

    assert!(collect_pages(|_| Err(Malformed)).is_err());
    assert!(collect_pages(|_| Ok(json!({"no": "tools"}))).is_err());
}

#[test]
fn an_unknown_tool_is_an_error_result_without_a_server() {
    let hub = McpHub {
        servers: HashMap::new(),
        tools: Vec::new(),
        left_out: Vec::new(),
        reported: std::sync::atomic::AtomicBool::new(false),
    };
    let out = hub.call("mcp__x__y", &json!({}), &Cancel::default());
    assert!(!out.result.ok);
    assert_eq!(out.lost, None);
    assert_eq!(
        hub.left_out_report(),
        None,
        "nothing left out, nothing said"
    );
}

#[test]
fn the_left_out_report_is_given_once_and_names_each_tool() {
    let long = "t".repeat(100);
    let (_, left_out) = offer(vec![("s".into(), vec![tool("get.env"), tool(&long)])]);
    assert_eq!(left_out[0], "s/get.env");
    assert_eq!(left_out[1], format!("s/{}…", "t".repeat(80)));
    let hub = McpHub {
        servers: HashMap::new(),
        tools: Vec::new(),
        left_out,
        reported: std::sync::atomic::AtomicBool::new(false),
    };
    let report = hub.left_out_report().unwrap();
    assert!(
        report.starts_with("2 MCP tools are not offered"),
        "{report}"
    );
    assert!(report.ends_with(&format!(": s/get.env, s/{}…", "t".repeat(80))));
    assert_eq!(hub.left_out_report(), None, "once per child");
}

#[test]
fn descriptions_are_cut_at_4096_bytes_on_a_character_boundary() {
    let page = |d: &str| json!({"tools": [{"name": "t", "description": d}]});
    let desc = |d: &str| {
        protocol::parse_tools_page(&page(d)).unwrap().0[0]
            .description
            .clone()
    };
    let at = "a".repeat(protocol::DESCRIPTION_BYTES);
    assert_eq!(desc(&at), at, "4,096 bytes: kept whole");
    let over = format!("{at}b");
    assert_eq!(desc(&over), at, "4,097 bytes: cut to 4,096");
    // A 2-byte character across the bound is dropped whole: 4,095 bytes remain.
    let straddle = format!("{}é", "a".repeat(protocol::DESCRIPTION_BYTES - 1));
    assert_eq!(straddle.len(), protocol::DESCRIPTION_BYTES + 1);
    assert_eq!(desc(&straddle), "a".repeat(protocol::DESCRIPTION_BYTES - 1));
    // Ending exactly at the bound with a multi-byte character: kept whole.
    let fits = format!("{}é", "a".repeat(protocol::DESCRIPTION_BYTES - 2));
    assert_eq!(desc(&fits), fits);
}

#[test]
fn no_servers_start_at_once_and_a_missing_program_is_unavailable() {
    let hub = McpHub::start_all(&[], Path::new("/"), &[], &Cancel::default()).unwrap();
    assert!(hub.tools().is_empty());
    let def = Definition::Stdio(server::StdioDef {
        name: "gone".into(),
        command: "/nonexistent/mcp".into(),
        args: Vec::new(),
        env: std::collections::BTreeMap::new(),
    });
    let r = McpHub::start_all(&[def], Path::new("/"), &[], &Cancel::default());
    assert_eq!(r.err(), Some(StartError::Unavailable));
}

/// The fake server of the stdio tests in `mode`, writing its pid to `pidfile`.
fn fake_server(mode: &str, pidfile: &Path) -> Definition {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp/fake_server.py");
    Definition::Stdio(server::StdioDef {
        name: mode.into(),
        command: "python3".into(),
        args: vec![
            script.display().to_string(),
            mode.into(),
            pidfile.display().to_string(),
        ],
        env: std::collections::BTreeMap::new(),
    })
}

#[test]
fn a_handshake_past_its_deadline_fails_startup_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    // A well-behaved server within its deadline starts.
    let ok = fake_server("ok", &dir.path().join("ok.pid"));
    let far = Instant::now() + START_TIMEOUT;
    let hub = McpHub::start_by(&[ok], dir.path(), &[], far, &Cancel::default()).unwrap();
    assert!(!hub.tools().is_empty());
    hub.shutdown(Instant::now() + Duration::from_secs(2));
    // A silent one whose deadline has come fails startup at once and is torn down: the
    // deadline decides, not a wait (the 10 s of `START_TIMEOUT` are not waited for).
    let pidfile = dir.path().join("hang.pid");
    let hang = fake_server("hang", &pidfile);
    let t0 = Instant::now();
    let r = McpHub::start_by(&[hang], dir.path(), &[], t0, &Cancel::default());
    assert_eq!(r.err(), Some(StartError::Unavailable));
    assert!(t0.elapsed() < START_TIMEOUT / 2, "{:?}", t0.elapsed());
    assert_eq!(START_TIMEOUT, Duration::from_secs(10), "backend.md");
    if let Ok(pid) = std::fs::read_to_string(&pidfile) {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        assert!(
            stat.map_or(true, |s| s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))),
            "the silent server was torn down"
        );
    }
}

#[test]
fn a_probe_names_why_each_server_cannot_start_and_stops_those_that_can() {
    let dir = tempfile::tempdir().unwrap();
    let stdio = |name: &str, command: &str, args: &[&str]| {
        Definition::Stdio(server::StdioDef {
            name: name.into(),
            command: command.into(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: std::collections::BTreeMap::new(),
        })
    };
    let defs = [
        fake_server("ok", &dir.path().join("ok.pid")),
        stdio("gone", "/nonexistent/mcp", &[]),
        stdio("exits", "sh", &["-c", "exit 3"]),
        fake_server("badversion", &dir.path().join("bad.pid")),
        stdio("plain", dir.path().to_str().unwrap(), &[]),
    ];
    let far = Instant::now() + START_TIMEOUT;
    let got = McpHub::probe(&defs, dir.path(), &[], far);
    assert!(matches!(got[0], Ok(n) if n > 0), "{got:?}");
    assert_eq!(
        got[1..],
        [
            Err(Cause::NotFound),
            Err(Cause::Exited),
            Err(Cause::Broke),
            Err(Cause::NotRunnable),
        ]
    );
    // A silent server at its deadline: timed out, and torn down.
    let pidfile = dir.path().join("hang.pid");
    let t0 = Instant::now();
    let got = McpHub::probe(&[fake_server("hang", &pidfile)], dir.path(), &[], t0);
    assert_eq!(got, [Err(Cause::TimedOut)]);
    assert!(t0.elapsed() < START_TIMEOUT / 2, "{:?}", t0.elapsed());
    // Every probed server was stopped: none of their pids is left running.
    for pid in ["ok.pid", "bad.pid", "hang.pid"] {
        let Ok(pid) = std::fs::read_to_string(dir.path().join(pid)) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
        assert!(
            stat.map_or(true, |s| s
                .rsplit(')')
                .next()
                .is_some_and(|r| r.trim_start().starts_with('Z'))),
            "{pid} outlived its probe"
        );
    }
}
