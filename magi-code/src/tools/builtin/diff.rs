//! Line counts of a line diff, for `file_edit` cards: common leading and trailing lines are
//! skipped, then Myers' greedy algorithm finds the edit distance of the middle within a work
//! budget.

/// Most comparison steps one diff may take; past it the whole changed middle counts as
/// removed and added (an upper bound, never an undercount).
const WORK: usize = 20_000_000;

/// `(added, removed)` lines between `before` and `after`. A line ends after its LF; a last
/// line without one is a line too, so `"x"` → `"x\n"` is one removed and one added.
#[must_use]
pub fn line_counts(before: &[u8], after: &[u8]) -> (u64, u64) {
    let a: Vec<&[u8]> = lines(before);
    let b: Vec<&[u8]> = lines(after);
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let (a, b) = (&a[head..], &b[head..]);
    let tail = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (a, b) = (&a[..a.len() - tail], &b[..b.len() - tail]);
    let (n, m) = (a.len(), b.len());
    let d = distance(a, b).unwrap_or(n + m);
    // d = added + removed and m - n = added - removed.
    let added = (d + m - n.min(d + m)) / 2;
    let removed = d - added;
    (added as u64, removed as u64)
}

fn lines(s: &[u8]) -> Vec<&[u8]> {
    s.split_inclusive(|b| *b == b'\n').collect()
}

/// The number of inserted plus deleted lines turning `a` into `b`, or `None` past [`WORK`].
fn distance(a: &[&[u8]], b: &[&[u8]]) -> Option<usize> {
    let (n, m) = (a.len(), b.len());
    if n == 0 || m == 0 {
        return Some(n + m);
    }
    let max = n + m;
    let off = max;
    let mut v = vec![0usize; 2 * max + 2];
    let mut work = 0usize;
    for d in 0..=max {
        let mut k = -(d as isize);
        while k <= d as isize {
            let i = (k + off as isize) as usize;
            let mut x = if k == -(d as isize) || (k != d as isize && v[i - 1] < v[i + 1]) {
                v[i + 1]
            } else {
                v[i - 1] + 1
            };
            let mut y = (x as isize - k) as usize;
            while x < n && y < m && a[x] == b[y] {
                x += 1;
                y += 1;
                work += 1;
            }
            v[i] = x;
            if x >= n && y >= m {
                return Some(d);
            }
            k += 2;
        }
        work += d + 1;
        if work > WORK {
            return None;
        }
    }
    Some(max)
}

#[cfg(test)]
mod tests {
    use super::line_counts;

    #[test]
    fn counts() {
        assert_eq!(line_counts(b"", b"a\nb\n"), (2, 0));
        assert_eq!(line_counts(b"a\nb\n", b""), (0, 2));
        assert_eq!(line_counts(b"a\nb\nc\n", b"a\nB\nc\n"), (1, 1));
        assert_eq!(line_counts(b"a\nb\nc\n", b"a\nc\n"), (0, 1));
        assert_eq!(line_counts(b"a\nc\n", b"a\nb\nb2\nc\n"), (2, 0));
        assert_eq!(line_counts(b"x", b"x\n"), (1, 1));
        assert_eq!(line_counts(b"same\n", b"same\n"), (0, 0));
        assert_eq!(line_counts(b"a\nb\nc\nd\n", b"b\na\nd\nc\n"), (2, 2));
        assert_eq!(line_counts(b"1\n2\n3\n", b"4\n5\n"), (2, 3));
    }

    #[test]
    fn a_diff_over_the_budget_counts_the_middle_wholly() {
        let a: String = (0..6000).map(|i| format!("a{i}\n")).collect();
        let b: String = (0..6000).map(|i| format!("b{i}\n")).collect();
        assert_eq!(line_counts(a.as_bytes(), b.as_bytes()), (6000, 6000));
    }
}
