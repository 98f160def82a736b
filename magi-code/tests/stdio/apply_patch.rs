//! `apply_patch` through the binary: a write-class call whose approval names every file with
//! its line counts, applied whole once allowed, with a `file_edit` card counting all files;
//! denied, no file changes.

use crate::common::{events, start_session, start_turn, until_finished, write_script, Env};
use serde_json::json;

const PATCH: &str = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+ONE\n\
                     *** Add File: b.txt\n+new\n*** End Patch\n";

#[test]
fn the_approval_names_each_file_and_the_patch_applies_whole_once_allowed() {
    for allow in [true, false] {
        let env = Env::new();
        std::fs::write(env.cwd.join("a.txt"), "one\ntwo\n").unwrap();
        write_script(
            &env,
            json!([{"steps": [{"tool": {"name": "apply_patch", "input": {"patch": PATCH}}},
                {"text": "done"}]}]),
            Some(json!({"write": "ask"})),
        );
        let (mut s, sid) = start_session(&env, &["approval.answer", "tool.cards"]);
        let run_id = start_turn(&mut s, &sid, "patch it");
        let seen = crate::common::answer_next_approval(&mut s, &sid, &run_id, allow);
        let asked = seen.last().unwrap();
        assert_eq!(
            asked["data"]["summary"],
            "apply_patch a.txt +1 -1, b.txt (new, +1)"
        );
        let frames = until_finished(&mut s);
        assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
        let a = std::fs::read_to_string(env.cwd.join("a.txt")).unwrap();
        if allow {
            assert_eq!(a, "ONE\ntwo\n");
            assert_eq!(
                std::fs::read_to_string(env.cwd.join("b.txt")).unwrap(),
                "new\n"
            );
            let cards = events(&frames, "tool.card");
            let card = &cards.last().unwrap()["data"]["card"];
            assert_eq!(
                (
                    &card["kind"],
                    &card["title"],
                    &card["added"],
                    &card["removed"]
                ),
                (&json!("file_edit"), &json!("2 files"), &json!(2), &json!(1)),
                "{card}"
            );
        } else {
            assert_eq!(a, "one\ntwo\n");
            assert!(!env.cwd.join("b.txt").exists());
        }
        s.shutdown_ok("bye");
    }
}
