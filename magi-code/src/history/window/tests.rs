//! The read window at its edges: the byte and line bounds, the first record beside them, a
//! torn tail, a newest record no window holds.

use super::*;

/// A file of `first` then lines of the given lengths (LF included), each filled with `x`.
fn file(first: usize, lines: &[usize]) -> Vec<u8> {
    let mut b = Vec::new();
    for n in std::iter::once(first).chain(lines.iter().copied()) {
        b.extend(std::iter::repeat_n(b'x', n - 1));
        b.push(b'\n');
    }
    b
}

const B: Bounds = Bounds {
    bytes: 1000,
    lines: 10,
};

#[test]
fn a_file_within_the_bound_plus_its_first_record_is_whole() {
    // Counted lines of exactly the bound, whatever the first record's length.
    let f = file(300, &[500, 500]);
    let w = scan_bytes(&f, B).unwrap();
    assert_eq!(
        w,
        Window {
            start: 0,
            end: f.len() as u64,
            whole: true,
            torn: false,
            lines: 2
        }
    );
    // One byte more leaves the oldest counted line out; the first record is read beside.
    let f = file(300, &[501, 500]);
    let w = scan_bytes(&f, B).unwrap();
    assert_eq!((w.start, w.whole, w.lines), (801, false, 1));
    assert_eq!(first_record_end(&f), Some(300));
}

#[test]
fn the_line_bound_holds_at_its_edge() {
    let f = file(10, &[10; 10]);
    let w = scan_bytes(&f, B).unwrap();
    assert!(w.whole);
    assert_eq!(w.lines, 10);
    let f = file(10, &[10; 11]);
    let w = scan_bytes(&f, B).unwrap();
    assert!(!w.whole);
    assert_eq!((w.start, w.lines), (20, 10));
}

#[test]
fn a_newest_record_over_the_bound_is_too_large() {
    assert_eq!(
        scan_bytes(&file(10, &[1001]), B),
        Err(HistoryError::TooLarge)
    );
    let w = scan_bytes(&file(10, &[1000]), B).unwrap();
    assert!(w.whole);
    // A single record of any length within the first-record allowance is the first record.
    let w = scan_bytes(&file(5000, &[]), B).unwrap();
    assert!(w.whole);
    let huge = usize::try_from(FIRST_RECORD_BYTES).unwrap() + 1001 + 2 * CHUNK;
    assert_eq!(scan_bytes(&file(huge, &[]), B), Err(HistoryError::TooLarge));
}

#[test]
fn a_torn_tail_is_outside_the_window() {
    let mut f = file(10, &[20, 30]);
    let end = f.len() as u64;
    f.extend_from_slice(b"{\"type\":");
    let w = scan_bytes(&f, B).unwrap();
    assert_eq!((w.end, w.torn, w.whole), (end, true, true));
    // No LF at all: the whole file is one torn fragment.
    let w = scan_bytes(b"{\"ty", B).unwrap();
    assert_eq!((w.start, w.end, w.torn), (0, 0, true));
    let w = scan_bytes(b"", B).unwrap();
    assert_eq!((w.end, w.torn, w.whole), (0, false, true));
    // A fragment longer than any record: no window.
    let mut f = file(10, &[20]);
    f.extend(std::iter::repeat_n(b'x', 1001));
    assert_eq!(scan_bytes(&f, B), Err(HistoryError::TooLarge));
}

#[test]
fn the_scan_reads_the_window_and_little_more() {
    // A long file: the scan stops within one chunk past the bound (and the first-record
    // allowance while the line it scans might still be the first record).
    let lines = vec![100; 100_000];
    let f = file(10, &lines);
    let big = Bounds {
        bytes: 64 << 10,
        lines: 100_000,
    };
    let mut s = TailScan::new(f.len() as u64, big);
    let mut read = 0u64;
    while let Some((at, n)) = s.want() {
        read += n as u64;
        let at = usize::try_from(at).unwrap();
        s.feed(&f[at..at + n]);
    }
    let w = s.outcome().unwrap().unwrap();
    assert!(!w.whole);
    assert!(w.end - w.start <= big.bytes);
    assert!(read <= big.bytes + 2 * CHUNK as u64, "{read}");
}

#[test]
fn a_tail_at_hand_gives_the_same_window_when_it_holds_it() {
    let f = file(10, &[200; 30]);
    let len = f.len() as u64;
    let small = Bounds {
        bytes: 1000,
        lines: 100,
    };
    let whole = scan_bytes(&f, small).unwrap();
    let at = len - 1200;
    let tail = scan_tail(&f[usize::try_from(at).unwrap()..], at, len, small).unwrap();
    assert_eq!(whole, tail);
}

proptest::proptest! {
    /// Any file: the window is a suffix of whole lines within the bound, maximal, and whole
    /// exactly when it reaches the start.
    #[test]
    fn windows_are_maximal_suffixes(lens in proptest::collection::vec(1usize..300, 1..40), torn in 0usize..5) {
        let mut f = file(lens[0], &lens[1..]);
        let end = f.len() as u64;
        f.extend(std::iter::repeat_n(b'y', torn));
        let b = Bounds { bytes: 700, lines: 6 };
        let Ok(w) = scan_bytes(&f, b) else {
            // Only a newest line over the bound refuses.
            proptest::prop_assert!(lens.len() > 1 && *lens.last().unwrap() as u64 > b.bytes);
            return Ok(());
        };
        proptest::prop_assert_eq!(w.end, end);
        proptest::prop_assert_eq!(w.torn, torn > 0);
        let counted: Vec<usize> = lens[1..].to_vec();
        // The longest suffix of counted lines within the bound.
        let (mut bytes, mut n) = (0usize, 0usize);
        for l in counted.iter().rev() {
            if bytes + l > 700 || n + 1 > 6 {
                break;
            }
            bytes += l;
            n += 1;
        }
        proptest::prop_assert_eq!(w.lines, n);
        proptest::prop_assert_eq!(w.whole, n == counted.len());
        if !w.whole {
            proptest::prop_assert_eq!(w.start, end - bytes as u64);
        }
    }
}
