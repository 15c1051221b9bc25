//! Keeps the layers of `lib.rs` honest: every module of this crate may use
//! only modules of a lower rank. A reference to a module of the same or a
//! higher rank fails this test, naming the file, the line and the way out.

use std::collections::BTreeMap;
use std::path::Path;

/// Each top-level module with its rank; lower ranks know nothing of higher
/// ones. Add a new module here, at the lowest rank it can live at.
const RANKS: &[(&str, u32)] = &[
    // Facts that know nothing of tests.
    ("redact", 0),
    ("skip", 0),
    ("runtime", 0),
    ("files", 0),
    ("run_id", 0),
    ("log", 1),
    ("process", 1),
    ("settings", 1),
    ("template", 1),
    ("run", 2),
    ("config", 2),
    // The pod, resources, reports, waits.
    ("wait", 3),
    ("report", 3),
    ("pod", 4),
    ("resource", 5),
    ("cli", 5),
    // A test's browsers: process groups journaled for the reaper.
    ("browser", 6),
    // What a test sees.
    ("cx", 7),
    // The harness on top; the facade and generated code's re-exports above it.
    ("harness", 8),
    ("__private", 9),
    ("lib", 10),
    ("layers", 10),
];

fn rank(module: &str) -> Option<u32> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
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
fn crate_refs(line: &str) -> Vec<String> {
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

#[test]
fn imports_point_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for file in &files {
        let module = module_of(file, &src);
        let Some(own) = rank(&module) else {
            problems.push(format!(
                "{}: module `{module}` has no rank: add it to RANKS in src/layers.rs",
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
                // Items the crate root re-exports (`crate::Result`,
                // `crate::redact(…)`) are named by their own module below.
                let target_rank = match rank(&target) {
                    Some(r) => r,
                    None => match target.as_str() {
                        "Result" | "bail" | "ensure" | "format_err" | "Context" => 0,
                        "redact" | "register_secret" | "REDACTED" => 0,
                        "Skip" => 0,
                        "Cx" => rank("cx").unwrap(),
                        "CliCommand" | "CliOutput" => rank("cli").unwrap(),
                        other => {
                            problems.push(format!(
                                "{}:{}: `crate::{other}` is neither a ranked module nor a known re-export",
                                file.display(),
                                n + 1
                            ));
                            continue;
                        }
                    },
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
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every ranked module exists, so the table cannot rot.
    for (module, _) in RANKS {
        assert!(
            seen.contains_key(*module),
            "RANKS names `{module}`, which is not a module of src/"
        );
    }
}

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
    assert!(rank("pod") > rank("report"));
}
