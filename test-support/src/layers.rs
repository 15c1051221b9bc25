//! Keeps a crate's import graph honest, from its source files:
//!
//! - **Ranks.** Every top-level module has a rank and may use only modules
//!   of a lower rank. A reference to a module of the same or a higher rank
//!   is a problem naming the file, the line and the way out.
//! - **No circles between files.** Every file (`src/pod/cluster.rs`, the
//!   `mod.rs` of a folder, the crate root) is a node; a reference from one
//!   file to an item of another is an edge. Any circle of edges is a
//!   problem, nested modules included: ranks only order the top level.
//!
//! What counts as a reference: a path that starts with `crate::`, `super::`
//! or `self::`, in a `use` (groups `{…}` included, over several lines) or
//! anywhere in code (`crate::state::random_id(12)`). Comments, string and
//! character literals are not code; `$crate::` (in a macro) names the
//! crate that expands it, not this one. A path names the deepest module it
//! passes through (an inline `mod tests { … }` belongs to its file).
//!
//! # Known limitations
//!
//! - A path relative to the current module without `self::` (a `mod.rs`
//!   that says `pub use session::Pod;`) is not seen: a parent that names
//!   its own children that way draws no edge to them.
//! - `main.rs` and `src/bin/` are the roots of other crates (binaries that
//!   use this one by name): their `crate::` is not this crate's and they are
//!   not checked.
//! - An item the crate root re-exports (`crate::Cx`) is an edge to the root
//!   file, not to the module that defines it; the rank table's `reexports`
//!   still ranks it by its owner, so a circle through it at the top level is
//!   an upward reference.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

/// Each top-level module of a crate with its rank, and the crate root's
/// re-exports with the rank of the module that owns them.
pub struct Layers<'a> {
    /// `(module, rank)`: lower ranks know nothing of higher ones.
    pub ranks: &'a [(&'a str, u32)],
    /// `(item, rank)`: what `crate::item` names when it is not a module.
    pub reexports: &'a [(&'a str, u32)],
}

impl Layers<'_> {
    fn rank(&self, module: &str) -> Option<u32> {
        self.ranks
            .iter()
            .find(|(m, _)| *m == module)
            .map(|(_, r)| *r)
    }

    /// [`Layers::check`] on the `src` of the crate whose manifest is in
    /// `manifest_dir` (its `env!("CARGO_MANIFEST_DIR")`).
    pub fn check_crate(&self, manifest_dir: &str) {
        self.check(&Path::new(manifest_dir).join("src"));
    }

    /// Panics with every upward reference and every import circle under
    /// `src` (see [`Layers::check_ranks`] and [`check_circles`]).
    pub fn check(&self, src: &Path) {
        let graph = Graph::read(src);
        let mut problems = self.rank_problems(&graph, src);
        problems.extend(graph.circles());
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    /// Panics with every upward reference under `src`, every module of
    /// `src` without a rank, and every ranked module that does not exist.
    pub fn check_ranks(&self, src: &Path) {
        let problems = self.rank_problems(&Graph::read(src), src);
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    fn rank_problems(&self, graph: &Graph, src: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        let mut seen = BTreeSet::new();
        for file in &graph.files {
            let module = file.top();
            seen.insert(module.to_owned());
            let Some(own) = self.rank(module) else {
                problems.push(format!(
                    "{}: module `{module}` has no rank: add it to the crate's layer table",
                    file.shown
                ));
                continue;
            };
            if module == "layers" {
                continue;
            }
            // One problem per line and module named, however many items.
            let mut told = BTreeSet::new();
            for r in &file.refs {
                let Some(target) = r.path.first().map(String::as_str) else {
                    continue;
                };
                if target == module || !told.insert((r.line, target)) {
                    continue;
                }
                let target_rank = match self.rank(target).or_else(|| {
                    self.reexports
                        .iter()
                        .find(|(item, _)| *item == target)
                        .map(|(_, r)| *r)
                }) {
                    Some(r) => r,
                    None => {
                        problems.push(format!(
                            "{}:{}: `crate::{target}` is neither a ranked module nor a known re-export",
                            file.shown, r.line
                        ));
                        continue;
                    }
                };
                if target_rank >= own {
                    problems.push(format!(
                        "{}:{}: `{module}` (rank {own}) uses `{target}` (rank {target_rank}): \
                         imports must point down; pass what is needed as an argument, or move \
                         the item to a lower module",
                        file.shown, r.line
                    ));
                }
            }
        }
        // Every ranked module exists, so the table cannot rot.
        for (module, _) in self.ranks {
            if !seen.contains(*module) {
                problems.push(format!(
                    "the layer table names `{module}`, which is not a module of {}",
                    src.display()
                ));
            }
        }
        problems
    }
}

/// Panics with every circle of imports between the files under `src`,
/// each shown as the chain of `file:line` that closes it.
pub fn check_circles(src: &Path) {
    let problems = Graph::read(src).circles();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// One source file: its module path and what it refers to.
struct File {
    /// `pod/cluster.rs`, as problems name it.
    shown: String,
    /// `["pod", "cluster"]`; empty for the crate root.
    module: Vec<String>,
    /// Inline modules (`mod tests { … }`), as full module paths.
    inline: Vec<Vec<String>>,
    refs: Vec<Ref>,
}

impl File {
    /// The top-level module the file belongs to; `lib` for the root.
    fn top(&self) -> &str {
        self.module.first().map_or("lib", String::as_str)
    }
}

/// A path the file names, made absolute (from the crate root).
struct Ref {
    line: usize,
    path: Vec<String>,
}

/// The files of a crate and the references between them.
struct Graph {
    files: Vec<File>,
}

impl Graph {
    fn read(src: &Path) -> Self {
        let mut paths = Vec::new();
        rust_files(src, &mut paths);
        paths.sort();
        let files = paths
            .iter()
            .filter_map(|p| {
                let rel = p.strip_prefix(src).unwrap();
                let module = module_path(rel)?;
                let text = std::fs::read_to_string(p)
                    .unwrap_or_else(|e| panic!("failed to read {}: {e}", p.display()));
                let (refs, inline) = references(&strip(&text), &module);
                Some(File {
                    shown: rel.display().to_string(),
                    module,
                    inline,
                    refs,
                })
            })
            .collect();
        Graph { files }
    }

    /// The file that holds the deepest module `path` passes through.
    fn owner(&self, path: &[String]) -> usize {
        let mut best = (0, None);
        for (i, f) in self.files.iter().enumerate() {
            for m in std::iter::once(&f.module).chain(&f.inline) {
                if path.starts_with(m) && (best.1.is_none() || m.len() > best.0) {
                    best = (m.len(), Some(i));
                }
            }
        }
        best.1.expect("the crate root owns every path")
    }

    /// Edges `from → to` with the first line of `from` that draws each.
    fn edges(&self) -> BTreeMap<usize, BTreeMap<usize, usize>> {
        let mut edges: BTreeMap<usize, BTreeMap<usize, usize>> = BTreeMap::new();
        for (i, f) in self.files.iter().enumerate() {
            let out = edges.entry(i).or_default();
            for r in &f.refs {
                let to = self.owner(&r.path);
                if to != i {
                    out.entry(to).or_insert(r.line);
                }
            }
        }
        edges
    }

    /// One problem per strongly connected group of files, showing a
    /// shortest circle through its first file.
    fn circles(&self) -> Vec<String> {
        let edges = self.edges();
        let mut problems = Vec::new();
        for group in strongly_connected(self.files.len(), &edges) {
            if group.len() < 2 {
                continue;
            }
            let start = group[0];
            let circle = shortest_circle(start, &group, &edges);
            let mut shown = String::new();
            for pair in circle.windows(2) {
                let line = edges[&pair[0]][&pair[1]];
                shown.push_str(&format!("{}:{line} → ", self.files[pair[0]].shown));
            }
            shown.push_str(&self.files[start].shown);
            let mut text = format!(
                "import circle: {shown}: imports must point one way; move what both \
                 sides need into a module below them, or pass it as an argument"
            );
            if group.len() > circle.len() - 1 {
                let all: Vec<&str> = group
                    .iter()
                    .map(|&i| self.files[i].shown.as_str())
                    .collect();
                text.push_str(&format!(" (the circle's files: {})", all.join(", ")));
            }
            problems.push(text);
        }
        problems
    }
}

/// Tarjan's strongly connected components, each sorted.
fn strongly_connected(
    n: usize,
    edges: &BTreeMap<usize, BTreeMap<usize, usize>>,
) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, BTreeMap<usize, usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        groups: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let targets: Vec<usize> = s
            .edges
            .get(&v)
            .into_iter()
            .flat_map(|m| m.keys().copied())
            .collect();
        for w in targets {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut group = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                group.push(w);
                if w == v {
                    break;
                }
            }
            group.sort_unstable();
            s.groups.push(group);
        }
    }
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        groups: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.groups.sort();
    s.groups
}

/// `start → … → start` by the fewest edges within `group`.
fn shortest_circle(
    start: usize,
    group: &[usize],
    edges: &BTreeMap<usize, BTreeMap<usize, usize>>,
) -> Vec<usize> {
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in edges.get(&v).into_iter().flat_map(|m| m.keys()) {
            if !group.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![start, v];
                let mut at = v;
                while at != start {
                    at = came_from[&at];
                    path.push(at);
                }
                path.reverse();
                return path;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = came_from.entry(w) {
                e.insert(v);
                queue.push_back(w);
            }
        }
    }
    unreachable!("a strongly connected group has a circle through each of its files")
}

/// `lib.rs` → `[]`; `cx.rs` → `["cx"]`; `pod/mod.rs` → `["pod"]`;
/// `pod/cluster.rs` → `["pod", "cluster"]`. `None` for the roots of other
/// crates: `main.rs` and `bin/`.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts == ["main.rs"] || parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && stem == "lib")) {
        parts.push(stem.to_owned());
    }
    Some(parts)
}

/// The text with comments, string and character literals blanked out
/// (newlines kept, so lines still count).
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == Some('r')))
            && !(i > 0 && ident(chars[i - 1]))
            && {
                let mut j = i + if c == 'b' { 2 } else { 1 };
                while chars.get(j) == Some(&'#') {
                    j += 1;
                }
                chars.get(j) == Some(&'"')
            }
        {
            // A raw string: r"…", r#"…"#, br"…".
            let mut j = i + if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while chars[j] == '#' {
                hashes += 1;
                j += 1;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &chars[i..j.min(chars.len())] {
                blank(&mut out, ch);
            }
            i = j;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A character literal, not a lifetime.
            blank(&mut out, c);
            i += 1;
            if chars.get(i) == Some(&'\\') {
                blank(&mut out, chars[i]);
                i += 1;
            }
            while i < chars.len() && chars[i] != '\'' {
                blank(&mut out, chars[i]);
                i += 1;
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

fn tokens(code: &str) -> Vec<(usize, Tok)> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push((line, Tok::Ident(chars[start..i].iter().collect())));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((line, Tok::PathSep));
            i += 2;
        } else {
            out.push((line, Tok::Punct(c)));
            i += 1;
        }
    }
    out
}

/// The absolute paths `code` (already stripped) names, for the file of
/// module `module`, and the inline modules it declares.
fn references(code: &str, module: &[String]) -> (Vec<Ref>, Vec<Vec<String>>) {
    let toks = tokens(code);
    let mut refs = Vec::new();
    let mut inline = Vec::new();
    // Inline modules open at brace depth `.1`.
    let mut open: Vec<(String, usize)> = Vec::new();
    let mut depth = 0;
    let mut i = 0;
    let is = |i: usize, t: &Tok| toks.get(i).map(|(_, x)| x) == Some(t);
    while i < toks.len() {
        match &toks[i].1 {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if open.last().is_some_and(|(_, d)| *d > depth) {
                    open.pop();
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some((_, Tok::Ident(name))), true) =
                    (toks.get(i + 1), is(i + 2, &Tok::Punct('{')))
                {
                    open.push((name.clone(), depth + 1));
                    let mut path = module.to_vec();
                    path.extend(open.iter().map(|(n, _)| n.clone()));
                    inline.push(path);
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(kw)
                if (kw == "crate" || kw == "super" || kw == "self")
                    && is(i + 1, &Tok::PathSep)
                    && !(i > 0 && is(i - 1, &Tok::Punct('$')))
                    && !(i > 0 && is(i - 1, &Tok::PathSep)) =>
            {
                let mut base: Vec<String> = module.to_vec();
                base.extend(open.iter().map(|(n, _)| n.clone()));
                let mut j = i;
                match kw.as_str() {
                    "crate" => {
                        base.clear();
                        j += 2;
                    }
                    "self" => j += 2,
                    _ => {
                        while is(j, &Tok::Ident("super".into())) && is(j + 1, &Tok::PathSep) {
                            base.pop();
                            j += 2;
                        }
                    }
                }
                let mut leaves = Vec::new();
                j = use_tree(&toks, j, base, &mut leaves);
                refs.extend(leaves.into_iter().map(|(line, path)| Ref { line, path }));
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    (refs, inline)
}

/// Reads a use tree (or a plain path) at `i` under `prefix`; pushes each
/// leaf's line and path, and answers where it ended.
fn use_tree(
    toks: &[(usize, Tok)],
    mut i: usize,
    mut prefix: Vec<String>,
    leaves: &mut Vec<(usize, Vec<String>)>,
) -> usize {
    // The line of the token before `i`: where a path that ends at `i` is.
    let line_before = |i: usize| toks[i.saturating_sub(1).min(toks.len() - 1)].0;
    loop {
        match toks.get(i).map(|(_, t)| t) {
            Some(Tok::Punct('{')) => {
                i += 1;
                loop {
                    match toks.get(i).map(|(_, t)| t) {
                        Some(Tok::Punct('}')) => return i + 1,
                        Some(Tok::Punct(',')) => i += 1,
                        None => return i,
                        Some(Tok::Ident(s)) if s == "self" => {
                            leaves.push((toks[i].0, prefix.clone()));
                            i += 1;
                        }
                        Some(_) => {
                            let before = i;
                            i = use_tree(toks, i, prefix.clone(), leaves);
                            // `as name` and the like: skip to the next item.
                            while !matches!(
                                toks.get(i).map(|(_, t)| t),
                                None | Some(Tok::Punct(',' | '}'))
                            ) {
                                i += 1;
                            }
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                i += 1;
                if matches!(toks.get(i).map(|(_, t)| t), Some(Tok::PathSep)) {
                    i += 1;
                    continue;
                }
                leaves.push((line_before(i), prefix));
                return i;
            }
            // `*`, or a path that ends before a `<…>`: the prefix is named.
            Some(Tok::Punct('*')) => {
                leaves.push((toks[i].0, prefix));
                return i + 1;
            }
            _ => {
                leaves.push((line_before(i), prefix));
                return i;
            }
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(code: &str, module: &[&str]) -> Vec<String> {
        let module: Vec<String> = module.iter().map(|s| s.to_string()).collect();
        references(&strip(code), &module)
            .0
            .into_iter()
            .map(|r| format!("{}:{}", r.line, r.path.join("::")))
            .collect()
    }

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        dir
    }

    fn panic_text(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let problem = std::panic::catch_unwind(f).unwrap_err();
        problem.downcast_ref::<String>().unwrap().clone()
    }

    #[test]
    fn paths_from_crate_super_and_self_are_read() {
        assert_eq!(
            paths("use crate::harness::runtime;", &[]),
            ["1:harness::runtime"]
        );
        assert_eq!(
            paths("use crate::{pod::Pod, report::{Outcome, self}};", &[]),
            ["1:pod::Pod", "1:report::Outcome", "1:report"]
        );
        assert_eq!(
            paths("use super::{\n  a::X,\n  b::*,\n};", &["pod", "cluster"]),
            ["2:pod::a::X", "3:pod::b"]
        );
        assert_eq!(
            paths("let x = crate::state::random_id(12);", &["procs"]),
            ["1:state::random_id"]
        );
        assert_eq!(paths("use super::super::X;", &["a", "b"]), ["1:X"]);
        assert_eq!(paths("use self::inner::Y;", &["a"]), ["1:a::inner::Y"]);
        assert_eq!(
            paths("mod tests {\n use super::*;\n}\nuse super::Z;", &["a", "b"]),
            ["2:a::b", "4:a::Z"]
        );
    }

    #[test]
    fn comments_strings_and_macros_are_not_references() {
        assert!(paths("$crate::__private::main()", &[]).is_empty());
        assert!(paths("// use crate::x::Y;\n/* crate::z */", &[]).is_empty());
        assert!(paths(
            r####"let s = "crate::x"; let r = r#"super::y"#;"####,
            &["a"]
        )
        .is_empty());
        assert!(paths("pub(crate) fn f() {} pub(super) struct S;", &["a"]).is_empty());
        // A lifetime is not a character literal that hides the code after it.
        assert_eq!(
            paths(
                "fn f<'a>(x: &'a str) -> char { let _ = crate::y::Z; '}' }",
                &["a"]
            ),
            ["1:y::Z"]
        );
    }

    #[test]
    fn an_upward_reference_fails_the_check() {
        const LOW_HIGH: Layers<'static> = Layers {
            ranks: &[("low", 0), ("high", 1)],
            reexports: &[],
        };
        let by_use = tree(&[
            ("low.rs", "use crate::high::X;\n"),
            ("high.rs", "use crate::low::Y;\n"),
        ]);
        let text = panic_text(|| LOW_HIGH.check_ranks(by_use.path()));
        assert!(
            text.contains("`low` (rank 0) uses `high` (rank 1)"),
            "{text}"
        );
        assert!(!text.contains("`high` (rank 1) uses"), "{text}");
        let by_super_path = tree(&[
            ("low.rs", "fn f() { super::high::g() }\n"),
            ("high.rs", "pub fn g() {}\n"),
        ]);
        let text = panic_text(|| LOW_HIGH.check_ranks(by_super_path.path()));
        assert!(
            text.contains("low.rs:1: `low` (rank 0) uses `high`"),
            "{text}"
        );
    }

    #[test]
    fn a_circle_between_nested_files_fails_the_check() {
        let dir = tree(&[
            ("lib.rs", "mod pod;\n"),
            ("pod/mod.rs", "mod a;\nmod b;\nmod c;\n"),
            ("pod/a.rs", "use super::b::B;\n"),
            ("pod/b.rs", "\nuse crate::pod::c::C;\n"),
            ("pod/c.rs", "fn f() { super::a::g() }\n"),
        ]);
        let text = panic_text(|| check_circles(dir.path()));
        assert!(
            text.contains("import circle: pod/a.rs:1 → pod/b.rs:2 → pod/c.rs:1 → pod/a.rs"),
            "{text}"
        );
        // The same files in a line pass.
        let dir = tree(&[
            ("lib.rs", "mod pod;\n"),
            ("pod/mod.rs", "mod a;\nmod b;\nmod c;\n"),
            ("pod/a.rs", "use super::b::B;\n"),
            ("pod/b.rs", "use crate::pod::c::C;\n"),
            ("pod/c.rs", "mod tests { use super::*; }\n"),
        ]);
        check_circles(dir.path());
    }

    #[test]
    fn a_circle_between_top_level_files_fails_the_check() {
        let dir = tree(&[
            ("lib.rs", "mod gateway;\nmod server;\n"),
            ("gateway/mod.rs", "use crate::server::bind;\n"),
            ("server/mod.rs", "fn f() { crate::gateway::serve() }\n"),
        ]);
        let layers = Layers {
            ranks: &[("lib", 9), ("gateway", 1), ("server", 1)],
            reexports: &[],
        };
        let text = panic_text(|| layers.check(dir.path()));
        assert!(
            text.contains("import circle: gateway/mod.rs:1 → server/mod.rs:1 → gateway/mod.rs"),
            "{text}"
        );
    }
}
