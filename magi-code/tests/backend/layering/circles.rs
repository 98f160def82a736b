//! The import graph inside each folder under `src`, at every depth: a file names a module, and in
//! the deepest folder holding both, the child on the file's side (a file, a subfolder, or `mod`
//! for the folder's own `mod.rs`) depends on the child on the other side. A circle is a
//! strongly connected set of two or more such children.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The module path of a file under `src`: `a/b.rs` is `[a, b]`, `a/mod.rs` is `[a]`.
pub fn module_of(path: &str) -> Vec<String> {
    let mut segs: Vec<String> = path
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if segs.last().is_some_and(|s| s == "mod") {
        segs.pop();
    }
    segs
}

/// The path (absolute, from the crate root) that `head` + `segs` names from the module `me`;
/// `None` when it climbs above the crate root.
pub fn absolute(me: &[String], head: &super::scan::Head, segs: &[String]) -> Option<Vec<String>> {
    use super::scan::Head;
    let mut base: Vec<String> = match head {
        Head::Crate => Vec::new(),
        Head::SelfMod | Head::Super => me.to_vec(),
        Head::Child(c) => me.iter().chain([c]).cloned().collect(),
    };
    let mut rest = segs;
    if *head == Head::Super {
        base.pop()?;
        while let Some((first, tail)) = rest.split_first() {
            if first != "super" {
                break;
            }
            base.pop()?;
            rest = tail;
        }
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// Where an edge was seen first: the file and line.
pub type Seen = (String, usize);

/// The dependencies between the children of every folder below `src`.
#[derive(Debug, Default)]
pub struct Graph {
    edges: BTreeMap<String, BTreeMap<String, BTreeMap<String, Seen>>>,
}

/// One circle inside a folder.
#[derive(Debug)]
pub struct Circle {
    /// The folder, relative to `src`.
    pub folder: String,
    /// Its children on the circle, sorted.
    pub members: Vec<String>,
    /// One shortest way around it from its first member: each step with where it is named.
    pub walk: Vec<(String, String, Seen)>,
}

impl Graph {
    /// Notes that the file `file` (module `me`) names `target` (absolute) at `line`; `target`
    /// counts as the deepest module of `modules` it begins with.
    pub fn add(
        &mut self,
        modules: &BTreeSet<Vec<String>>,
        me: &[String],
        target: &[String],
        file: &str,
        line: usize,
    ) {
        let depth = (0..=target.len())
            .rev()
            .find(|&d| modules.contains(&target[..d]))
            .unwrap_or(0);
        let target = &target[..depth];
        if target.is_empty() || target == me {
            return;
        }
        let k = me.iter().zip(target).take_while(|(a, b)| a == b).count();
        // Between top-level modules the direction table already rules a circle out.
        if k == 0 {
            return;
        }
        let side = |m: &[String]| m.get(k).map_or_else(|| "mod".to_owned(), Clone::clone);
        let (from, to) = (side(me), side(target));
        if from != to {
            self.edges
                .entry(me[..k].join("/"))
                .or_default()
                .entry(from)
                .or_default()
                .entry(to)
                .or_insert_with(|| (file.to_owned(), line));
        }
    }

    /// Every circle, folder by folder.
    pub fn circles(&self) -> Vec<Circle> {
        let mut out = Vec::new();
        for (folder, edges) in &self.edges {
            for members in components(edges) {
                let walk = shortest_walk(edges, &members);
                out.push(Circle {
                    folder: folder.clone(),
                    members,
                    walk,
                });
            }
        }
        out
    }
}

type Edges = BTreeMap<String, BTreeMap<String, Seen>>;

/// The strongly connected components of two or more nodes (Tarjan), each sorted.
fn components(edges: &Edges) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct Tarjan<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut Tarjan<'a>, edges: &'a Edges, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in edges.get(v).into_iter().flat_map(BTreeMap::keys) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, edges, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = Tarjan::default();
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(a, bs)| std::iter::once(a.as_str()).chain(bs.keys().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            visit(&mut t, edges, v);
        }
    }
    t.out.sort();
    t.out
}

/// A shortest way from the first member back to it, inside the component (breadth first).
fn shortest_walk(edges: &Edges, members: &[String]) -> Vec<(String, String, Seen)> {
    let start = members[0].as_str();
    let mut came: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    let mut last = None;
    'search: while let Some(v) = queue.pop_front() {
        for w in edges.get(v).into_iter().flat_map(BTreeMap::keys) {
            if w == start {
                last = Some(v);
                break 'search;
            }
            if members.contains(w) && !came.contains_key(w.as_str()) {
                came.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    let mut walk = Vec::new();
    let mut to = start;
    let mut from = last.expect("a component of two or more has a way around");
    loop {
        walk.push((from.to_owned(), to.to_owned(), edges[from][to].clone()));
        if from == start {
            break;
        }
        to = from;
        from = came[from];
    }
    walk.reverse();
    walk
}
