//! The book (`book/`) is the user manual; these tests keep it honest:
//!
//! - every page under `book/src` is in `SUMMARY.md`, and every page
//!   `SUMMARY.md` names is there;
//! - every link of the book and of the READMEs resolves: to a page, to a
//!   heading of it (`page.md#anchor`, anchors made as mdBook makes them),
//!   or to a file of the repository;
//! - every pointer at the book in the sources (`book/src/page.md#anchor` in
//!   a message, a doc comment or a template) resolves the same way;
//! - every ```toml block is checked: a plain one is a `testkit.toml` and
//!   goes through the engine's parser and kinds as `testkit-runner check`
//!   does; ```toml,over=PATH is merged over that file of the repository
//!   first; ```toml,cargo and ```toml,nextest are valid TOML.
//!
//! The Rust blocks are compiled by `cargo test --doc` (testkit's `book`
//! module includes the pages).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use testkit_engine::config::SuiteConfig;
use testkit_engine::resource::Kinds;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository's root")
}

fn book_src() -> PathBuf {
    repo().join("book/src")
}

/// Every page under `book/src`, by its path relative to it.
fn pages() -> BTreeMap<String, String> {
    fn walk(dir: &Path, base: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("book/src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, base, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&path).unwrap();
                out.insert(rel, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&book_src(), &book_src(), &mut out);
    out
}

/// A fenced code block: the line of its opening fence (1-based), its info
/// string and its text (the fence's indentation taken off).
struct Block {
    line: usize,
    info: String,
    text: String,
}

/// The code blocks of a page, and its lines outside them (with their
/// numbers).
fn split(text: &str) -> (Vec<Block>, Vec<(usize, &str)>) {
    let mut blocks = Vec::new();
    let mut prose = Vec::new();
    // The open block, and its fence's indentation.
    let mut open: Option<(Block, usize)> = None;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    let block = Block {
                        line: i + 1,
                        info: info.trim().to_owned(),
                        text: String::new(),
                    };
                    open = Some((block, indent));
                } else {
                    prose.push((i + 1, line));
                }
            }
            Some((block, _)) if trimmed.trim_end() == "```" => blocks.push(block),
            Some((mut block, fence_indent)) => {
                let cut = line
                    .chars()
                    .take(fence_indent)
                    .take_while(|c| *c == ' ')
                    .count();
                block.text.push_str(&line[cut..]);
                block.text.push('\n');
                open = Some((block, fence_indent));
            }
        }
    }
    assert!(open.is_none(), "a code block is not closed");
    (blocks, prose)
}

/// The anchor mdBook (and GitHub) gives a heading: its text lowercased,
/// spaces as `-`, anything but letters, digits, `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered as mdBook
/// numbers it (`x`, `x-1`, …).
fn anchors(text: &str) -> BTreeSet<String> {
    let (_, prose) = split(text);
    let mut out = BTreeSet::new();
    for (_, line) in prose {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && line[hashes..].starts_with(' ') {
            let base = anchor(line[hashes..].trim());
            let mut id = base.clone();
            let mut n = 0;
            while out.contains(&id) {
                n += 1;
                id = format!("{base}-{n}");
            }
            out.insert(id);
        }
    }
    out
}

/// The targets of a line's links, code spans left out.
fn links(line: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
        } else if !in_code {
            plain.push(c);
        }
    }
    let mut out = Vec::new();
    let mut rest = plain.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find([')', ' ']).unwrap_or(rest.len());
        out.push(rest[..end].to_owned());
        rest = &rest[end..];
    }
    out
}

/// Whether `target`, linked from the file `from`, resolves; `None` when it
/// does, else what is wrong.
fn check_target(
    from: &Path,
    target: &str,
    book: &BTreeMap<PathBuf, BTreeSet<String>>,
) -> Option<String> {
    if target.starts_with("http://")
        || target.starts_with("https://")
        || target.starts_with("mailto:")
    {
        return None;
    }
    let (path, fragment) = match target.split_once('#') {
        Some((p, f)) => (p, Some(f)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        from.to_owned()
    } else {
        from.parent().unwrap().join(path)
    };
    let Ok(file) = file.canonicalize() else {
        return Some(format!("{target}: no such file"));
    };
    match (book.get(&file), fragment) {
        (Some(anchors), Some(f)) if !anchors.contains(f) => Some(format!(
            "{target}: the page has no heading whose anchor is #{f}"
        )),
        (None, Some(_)) if file.extension().is_some_and(|e| e == "md") => {
            Some(format!("{target}: an anchor into a file outside the book"))
        }
        _ => None,
    }
}

/// Each page of the book by its canonical path, with its anchors.
fn book_anchors() -> BTreeMap<PathBuf, BTreeSet<String>> {
    pages()
        .into_iter()
        .map(|(rel, text)| {
            let path = book_src().join(rel).canonicalize().unwrap();
            (path, anchors(&text))
        })
        .collect()
}

#[test]
fn every_page_is_in_the_summary_and_every_summary_entry_is_a_page() {
    let pages = pages();
    let summary = pages.get("SUMMARY.md").expect("book/src/SUMMARY.md");
    let (_, prose) = split(summary);
    let listed: BTreeSet<String> = prose
        .iter()
        .flat_map(|(_, line)| links(line))
        .map(|target| target.split('#').next().unwrap().to_owned())
        .collect();
    let mut wrong = Vec::new();
    for page in pages.keys().filter(|p| *p != "SUMMARY.md") {
        if !listed.contains(page) {
            wrong.push(format!("book/src/{page} is not in SUMMARY.md"));
        }
    }
    for page in &listed {
        if !pages.contains_key(page) {
            wrong.push(format!(
                "SUMMARY.md lists {page}, which is not under book/src"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_link_of_the_book_and_the_readmes_resolves() {
    let book = book_anchors();
    let mut files: Vec<PathBuf> = pages().keys().map(|rel| book_src().join(rel)).collect();
    let root = repo();
    files.push(root.join("README.md"));
    for dir in [
        "testkit",
        "testkit-engine",
        "testkit-macros",
        "runner",
        "sandboxd",
        "bench",
        "ci-examples",
    ] {
        files.push(root.join(dir).join("README.md"));
    }
    for suite in std::fs::read_dir(root.join("suites")).unwrap() {
        files.push(suite.unwrap().path().join("README.md"));
    }
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in files.iter().filter(|f| f.is_file()) {
        let text = std::fs::read_to_string(file).unwrap();
        let (_, prose) = split(&text);
        for (line, text) in prose {
            for target in links(text) {
                checked += 1;
                if let Some(problem) = check_target(file, &target, &book) {
                    let shown = file.strip_prefix(&root).unwrap_or(file);
                    wrong.push(format!("{}:{line}: {problem}", shown.display()));
                }
            }
        }
    }
    assert!(
        checked > 100,
        "only {checked} links found: is the book there?"
    );
    assert!(
        wrong.is_empty(),
        "links that do not resolve:\n{}",
        wrong.join("\n")
    );
}

/// Every `book/src/<page>.md[#anchor]` in the text of a file.
fn pointers(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("book/src/") {
            rest = &rest[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/-_.#".contains(c)))
                .unwrap_or(rest.len());
            let pointer = rest[..end].trim_end_matches('.');
            if pointer.contains(".md") {
                out.push((i + 1, pointer.to_owned()));
            }
            rest = &rest[end..];
        }
    }
    out
}

#[test]
fn every_pointer_at_the_book_in_the_sources_resolves() {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(
                    name.as_str(),
                    "target" | ".git" | "book" | "node_modules" | "fixtures"
                ) {
                    walk(&path, out);
                }
            } else if [".rs", ".md", ".toml", ".in", ".sh"]
                .iter()
                .any(|e| name.ends_with(e))
                || name == "run"
            {
                out.push(path);
            }
        }
    }
    let root = repo();
    let book = book_anchors();
    let mut files = Vec::new();
    walk(&root, &mut files);
    let this = Path::new(file!()).file_name().unwrap();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for file in files.iter().filter(|f| f.file_name() != Some(this)) {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for (line, pointer) in pointers(&text) {
            checked += 1;
            if let Some(problem) = check_target(&root.join("README.md"), &pointer, &book) {
                let shown = file.strip_prefix(&root).unwrap_or(file);
                wrong.push(format!("{}:{line}: {problem}", shown.display()));
            }
        }
    }
    assert!(checked > 5, "only {checked} pointers at the book found");
    assert!(
        wrong.is_empty(),
        "pointers at the book that do not resolve:\n{}",
        wrong.join("\n")
    );
}

/// `over`'s values replace `base`'s; tables are merged key by key.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// A `testkit.toml` as `testkit-runner check` takes it: the file parsed,
/// then its resource kinds.
fn check_suite_config(text: &str, path: &Path) -> Result<(), String> {
    let config = SuiteConfig::parse(text, path).map_err(|e| e.to_string())?;
    Kinds::from_config(&config, path).map_err(|e| e.to_string())?;
    Ok(())
}

#[test]
fn every_toml_block_of_the_book_is_valid() {
    let root = repo();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        let (blocks, _) = split(&text);
        for block in blocks {
            let mut tags = block.info.split(',').map(str::trim);
            if tags.next() != Some("toml") {
                continue;
            }
            checked += 1;
            let at = format!("book/src/{page}:{}", block.line);
            let path = Path::new(&at);
            let tag = tags.next();
            let result = match tag {
                None => check_suite_config(&block.text, path),
                Some("cargo") | Some("nextest") => toml::from_str::<toml::Table>(&block.text)
                    .map(drop)
                    .map_err(|e| e.to_string()),
                Some(t) if t.starts_with("over=") => {
                    let base_path = root.join(&t["over=".len()..]);
                    match std::fs::read_to_string(&base_path) {
                        Err(e) => Err(format!("cannot read {}: {e}", base_path.display())),
                        Ok(base) => {
                            let mut base: toml::Table =
                                toml::from_str(&base).expect("the base file is TOML");
                            match toml::from_str::<toml::Table>(&block.text) {
                                Err(e) => Err(e.to_string()),
                                Ok(over) => {
                                    merge(&mut base, over);
                                    check_suite_config(&toml::to_string(&base).unwrap(), path)
                                }
                            }
                        }
                    }
                }
                Some(t) => Err(format!(
                    "unknown annotation `{t}` (toml, toml,over=PATH, toml,cargo or toml,nextest)"
                )),
            };
            if let Err(e) = result {
                wrong.push(format!("{at}: ```{}: {e}", block.info));
            }
        }
    }
    assert!(checked > 20, "only {checked} toml blocks found");
    assert!(
        wrong.is_empty(),
        "toml blocks that do not check:\n{}",
        wrong.join("\n\n")
    );
}

#[test]
fn every_rust_page_is_compiled_by_the_doc_tests() {
    // testkit's lib.rs includes each page with a Rust block in its
    // `#[cfg(doctest)] mod book`; a page with Rust that it leaves out would
    // go uncompiled.
    let lib = std::fs::read_to_string(repo().join("testkit/src/lib.rs")).unwrap();
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        let (blocks, _) = split(&text);
        let rust = blocks
            .iter()
            .any(|b| b.info.split(',').any(|t| t.trim() == "rust") && !b.info.contains("ignore"));
        if rust && !lib.contains(&format!("\"../../book/src/{page}\"")) {
            wrong.push(format!(
                "book/src/{page} has Rust blocks testkit/src/lib.rs does not include"
            ));
        }
        for b in &blocks {
            if b.info.is_empty() {
                wrong.push(format!(
                    "book/src/{page}:{}: a code block without a language (rustdoc would compile it as Rust): say ```text",
                    b.line
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
