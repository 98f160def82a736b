use super::*;
use std::time::SystemTime;

/// Backdates `path`'s modification time by `by`, as a leftover of a write killed that long ago.
fn age(path: &Path, by: Duration) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - by).unwrap();
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

const H: &str = "0123456789abcdef0123456789abcdef";

#[test]
fn temp_names_embed_the_target_and_parse_back() {
    assert_eq!(
        temp_head(format!(".foo.rs.magi-{H}.tmp").as_bytes()),
        Some(&b".foo.rs"[..])
    );
    assert_eq!(
        temp_head(format!(".magi-{H}.tmp").as_bytes()),
        Some(&b""[..])
    );
    // Not ours: wrong digits, upper case, short, other suffix.
    assert_eq!(temp_head(b".foo.rs.magi-0123.tmp"), None);
    assert_eq!(
        temp_head(format!(".foo.magi-{}.tmp", H.to_uppercase()).as_bytes()),
        None
    );
    assert_eq!(temp_head(format!(".foo.magi-{H}.temp").as_bytes()), None);
    assert_eq!(temp_head(format!("foo.magi-{H}x.tmp").as_bytes()), None);
    let t = OsStr::new("foo.rs");
    assert!(swept(
        format!(".foo.rs.magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Beside
    ));
    assert!(!swept(
        format!(".foo.rs2.magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Beside
    ));
    assert!(!swept(
        format!(".bar.rs.magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Beside
    ));
    assert!(!swept(
        format!(".magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Beside
    ));
    assert!(!swept(
        format!("foo.rs.magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Folder
    ));
    assert!(swept(
        format!(".bar.rs.magi-{H}.tmp").as_bytes(),
        t,
        Sweep::Folder
    ));
    assert!(swept(format!(".magi-{H}.tmp").as_bytes(), t, Sweep::Folder));
    // A long name is cut so the temp name fits NAME_MAX, and still matches its own.
    let long = "n".repeat(255);
    let head = head_for(OsStr::new(&long));
    assert_eq!(head.len(), NAME_PREFIX_BYTES + 1);
    assert!(head.len() + TAG.len() + HEX + SUFFIX.len() <= 255);
}

#[test]
fn a_replacement_keeps_the_mode_and_leaves_no_temp_file() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("a.txt");
    fs::write(&f, "old").unwrap();
    assert!(replace_atomically(&f, b"new", Some(0o640), Sweep::Beside).unwrap());
    assert_eq!(fs::read(&f).unwrap(), b"new");
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
        0o640
    );
    assert_eq!(names(d.path()), ["a.txt"]);
    // A long name still gets a temp file it may create.
    let long = d.path().join("l".repeat(250));
    replace_atomically(&long, b"x", None, Sweep::Beside).unwrap();
    assert_eq!(fs::read(&long).unwrap(), b"x");
}

#[test]
fn only_stale_unlocked_leftovers_of_ours_are_swept() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    let f = p.join("foo.rs");
    fs::write(&f, "old").unwrap();
    let mine_old = p.join(format!(".foo.rs.magi-{H}.tmp"));
    let mine_edge = p.join(format!(".foo.rs.magi-{}.tmp", "1".repeat(32)));
    let mine_new = p.join(format!(".foo.rs.magi-{}.tmp", "2".repeat(32)));
    let mine_locked = p.join(format!(".foo.rs.magi-{}.tmp", "3".repeat(32)));
    let other = p.join(format!(".bar.rs.magi-{H}.tmp"));
    let user = p.join(".foo.rs.magi-mine.tmp");
    for x in [
        &mine_old,
        &mine_edge,
        &mine_new,
        &mine_locked,
        &other,
        &user,
    ] {
        fs::write(x, "partial").unwrap();
        age(x, STALE_AFTER + Duration::from_secs(60));
    }
    // Just past the bound is stale; a little under it is not.
    age(&mine_edge, STALE_AFTER + Duration::from_secs(1));
    age(&mine_new, STALE_AFTER - Duration::from_secs(2));
    // A live writer holds its temp file's lock.
    let held = File::open(&mine_locked).unwrap();
    assert!(try_lock(&held));
    replace_atomically(&f, b"new", Some(0o644), Sweep::Beside).unwrap();
    let left = names(p);
    assert!(!left.contains(&format!(".foo.rs.magi-{H}.tmp")), "{left:?}");
    assert!(!left.contains(&format!(".foo.rs.magi-{}.tmp", "1".repeat(32))));
    for kept in [&mine_new, &mine_locked, &other, &user] {
        assert!(kept.exists(), "{kept:?} kept");
    }
    // In a folder of ours, every stale leftover goes, the older unnamed form too.
    drop(held);
    let unnamed = p.join(format!(".magi-{H}.tmp"));
    fs::write(&unnamed, "x").unwrap();
    age(&unnamed, STALE_AFTER * 2);
    replace_atomically(&p.join("cache.json"), b"{}", Some(0o600), Sweep::Folder).unwrap();
    assert_eq!(
        names(p),
        [
            &format!(".foo.rs.magi-{}.tmp", "2".repeat(32)),
            ".foo.rs.magi-mine.tmp",
            "cache.json",
            "foo.rs"
        ]
    );
}

#[test]
fn a_create_never_replaces_and_leaves_only_the_whole_file() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("s.jsonl");
    create_atomically(&f, b"{\"m\":1}\n", 0o600, Sweep::Folder).unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"{\"m\":1}\n");
    assert_eq!(
        fs::metadata(&f).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    let e = create_atomically(&f, b"other\n", 0o600, Sweep::Folder).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert_eq!(fs::read(&f).unwrap(), b"{\"m\":1}\n");
    // A symlink at the name is not followed: the link stays, nothing is written through it.
    let l = d.path().join("l.jsonl");
    std::os::unix::fs::symlink(d.path().join("elsewhere"), &l).unwrap();
    assert!(create_atomically(&l, b"x\n", 0o600, Sweep::Folder).is_err());
    assert!(!d.path().join("elsewhere").exists());
    assert_eq!(names(d.path()), ["l.jsonl", "s.jsonl"]);
}

#[test]
fn without_hard_links_a_create_writes_in_place() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("s.jsonl");
    create_in_place(&f, b"{}\n", 0o600).unwrap();
    assert_eq!(fs::read(&f).unwrap(), b"{}\n");
    assert_eq!(
        create_in_place(&f, b"x\n", 0o600).unwrap_err().kind(),
        io::ErrorKind::AlreadyExists
    );
    assert_eq!(fs::read(&f).unwrap(), b"{}\n");
}

#[test]
fn a_complete_newer_leftover_is_adopted_and_nothing_else_is() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json");
    let tmp = |hex: char| {
        dir.path().join(format!(
            ".tokens.json.magi-{}.tmp",
            hex.to_string().repeat(32)
        ))
    };
    let ok = |b: &[u8]| b.starts_with(b"{") && b.ends_with(b"}");
    // Nothing beside: nothing to adopt.
    assert!(!adopt_leftover(&path, 64, ok).unwrap());
    fs::write(&path, "{old}").unwrap();
    age(&path, Duration::from_secs(60));
    // Torn, over the bound, another file's, or older than the file: left alone.
    fs::write(tmp('a'), "{torn").unwrap();
    fs::write(tmp('b'), format!("{{{}}}", "x".repeat(64))).unwrap();
    fs::write(
        dir.path().join(format!(".other.json.magi-{H}.tmp")),
        "{other}",
    )
    .unwrap();
    fs::write(tmp('c'), "{older}").unwrap();
    age(&tmp('c'), Duration::from_secs(120));
    assert!(!adopt_leftover(&path, 64, ok).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "{old}");
    // One a live writer still holds is not left over.
    fs::write(tmp('d'), "{held}").unwrap();
    let held = File::open(tmp('d')).unwrap();
    held.lock().unwrap();
    assert!(!adopt_leftover(&path, 64, ok).unwrap());
    drop(held);
    // Complete and newer: the newest such is renamed over the file.
    fs::write(tmp('e'), "{newer}").unwrap();
    age(&tmp('d'), Duration::from_secs(30));
    assert!(adopt_leftover(&path, 64, ok).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "{newer}");
    assert!(!tmp('e').exists());
    // The file is now newer than the one complete leftover still there.
    assert!(!adopt_leftover(&path, 64, ok).unwrap());
    // A missing file takes a complete leftover.
    fs::remove_file(&path).unwrap();
    assert!(adopt_leftover(&path, 64, ok).unwrap());
    assert_eq!(fs::read_to_string(&path).unwrap(), "{held}");
}
