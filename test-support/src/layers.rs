//! Keeps a crate's layers honest: every module may use only modules of a
//! lower rank. A reference to a module of the same or a higher rank is a
//! problem naming the file, the line and the way out.

use std::collections::BTreeMap;
use std::path::Path;

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

    /// Panics with every upward reference under `src`, every module of
    /// `src` without a rank, and every ranked module that does not exist.
    pub fn check(&self, src: &Path) {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        files.sort();
        let mut problems = Vec::new();
        let mut seen: BTreeMap<String, u32> = BTreeMap::new();
        for file in &files {
            let module = module_of(file, src);
            let Some(own) = self.rank(&module) else {
                problems.push(format!(
                    "{}: module `{module}` has no rank: add it to the crate's layer table",
                    file.display()
                ));
                continue;
            };
            seen.insert(module.clone(), own);
            if module == "layers" {
                continue;
            }
            let text = std::fs::read_to_string(file).unwrap();
            // Comments out, and `use crate::{…}` groups that span lines joined
            // onto the line they start on.
            let lines: Vec<&str> = text
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect();
            for (n, line) in lines.iter().enumerate() {
                let mut code = (*line).to_owned();
                if code.contains("crate::{") && !code.contains('}') {
                    for more in &lines[n + 1..] {
                        code.push_str(more);
                        if more.contains('}') {
                            break;
                        }
                    }
                }
                for target in crate_refs(&code) {
                    if target == module || target.is_empty() {
                        continue;
                    }
                    let target_rank = match self.rank(&target).or_else(|| {
                        self.reexports
                            .iter()
                            .find(|(item, _)| *item == target)
                            .map(|(_, r)| *r)
                    }) {
                        Some(r) => r,
                        None => {
                            problems.push(format!(
                                "{}:{}: `crate::{target}` is neither a ranked module nor a known re-export",
                                file.display(),
                                n + 1
                            ));
                            continue;
                        }
                    };
                    if target_rank >= own {
                        problems.push(format!(
                            "{}:{}: `{module}` (rank {own}) uses `{target}` (rank {target_rank}): \
                             imports must point down; pass what is needed as an argument, or move \
                             the item to a lower module",
                            file.display(),
                            n + 1
                        ));
                    }
                }
            }
        }
        // Every ranked module exists, so the table cannot rot.
        for (module, _) in self.ranks {
            if !seen.contains_key(*module) {
                problems.push(format!(
                    "the layer table names `{module}`, which is not a module of {}",
                    src.display()
                ));
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// `src/pod/session.rs` → `pod`; `src/cx.rs` → `cx`.
fn module_of(path: &Path, src: &Path) -> String {
    let rel = path.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// The modules a line names with `crate::x` or `crate::{x, y}`.
pub fn crate_refs(line: &str) -> Vec<String> {
    let mut refs = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        // Not `$crate::` (macros) nor a longer identifier ending in `crate`.
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                refs.push(name);
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            refs.push(name);
        }
    }
    refs
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
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

    #[test]
    fn a_reference_upward_is_caught() {
        assert_eq!(crate_refs("use crate::harness::runtime;"), ["harness"]);
        assert_eq!(
            crate_refs("use crate::{pod::Pod, report::Outcome};"),
            ["pod", "report"]
        );
        assert_eq!(
            crate_refs("$crate::__private::main()"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn an_upward_use_fails_the_check() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("low.rs"), "use crate::high::X;\n").unwrap();
        std::fs::write(dir.path().join("high.rs"), "use crate::low::Y;\n").unwrap();
        let layers = Layers {
            ranks: &[("low", 0), ("high", 1)],
            reexports: &[],
        };
        let problem = std::panic::catch_unwind(|| layers.check(dir.path())).unwrap_err();
        let text = problem.downcast_ref::<String>().unwrap();
        assert!(
            text.contains("`low` (rank 0) uses `high` (rank 1)"),
            "{text}"
        );
        assert!(!text.contains("`high` (rank 1) uses"), "{text}");
    }
}
