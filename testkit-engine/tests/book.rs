//! The book (`book/`) is the user manual; these tests keep it honest:
//!
//! - every page under `book/src` is in `SUMMARY.md`, and every page
//!   `SUMMARY.md` names is there;
//! - every link of the book and of the READMEs resolves: to a page, to a
//!   heading of it (`page.md#anchor`, anchors made as mdBook makes them),
//!   or to a file of the repository. A page of the book links to a file
//!   outside `book/src` by its repository URL (`<repository>/blob/main/PATH`
//!   or `/tree/main/DIR`), which resolves against the checkout: mdBook copies
//!   only `book/src`, so a relative link out of it is dead in the book;
//! - every pointer at the book in the files git knows (a page, with or
//!   without an anchor, in a message, a doc comment or a template)
//!   resolves the same way;
//! - every toml block is checked: a plain one is a `testkit.toml` and goes
//!   through the engine's parser and kinds as `testkit-runner check` does;
//!   `toml,over=PATH` is merged over that file of the repository first;
//!   `toml,cargo` and `toml,nextest` are valid TOML;
//! - every code block says its language, and is fenced.
//!
//! The Rust blocks are compiled by `cargo test --doc` (testkit's `book`
//! module includes the pages).
//!
//! The pages are read with pulldown-cmark, with the options mdBook gives
//! it: what counts as a code block, a link or a heading here is what counts
//! in the rendered book, not what a line-by-line guess makes of it.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;

use pulldown_cmark::{BrokenLink, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};
use testkit_engine::config::SuiteConfig;
use testkit_engine::resource::Kinds;

// ---------------------------------------------------------------------------
// The repository
// ---------------------------------------------------------------------------

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .expect("the repository's root")
}

fn book_src() -> PathBuf {
    repo().join("book/src")
}

/// The workspace's `repository` (root `Cargo.toml`, `[workspace.package]`):
/// the URL a page of the book links files outside `book/src` by.
fn repository_url() -> String {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let manifest: toml::Table = toml::from_str(&manifest).expect("Cargo.toml is TOML");
    manifest["workspace"]["package"]["repository"]
        .as_str()
        .expect("Cargo.toml: [workspace.package] repository")
        .trim_end_matches('/')
        .to_owned()
}

/// The files git knows (tracked, and new ones it does not ignore), relative
/// to the repository's root: the sources, without the build's output.
fn git_files() -> Vec<PathBuf> {
    let out = Command::new("git")
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "-z",
        ])
        .current_dir(repo())
        .output()
        .expect("git runs (this test reads the checkout's file list)");
    assert!(
        out.status.success(),
        "git ls-files failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: BTreeSet<PathBuf> = out
        .stdout
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
        .collect();
    list.into_iter().collect()
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

// ---------------------------------------------------------------------------
// Reading Markdown as mdBook does
// ---------------------------------------------------------------------------

/// The options mdBook 0.5 parses a page with (mdbook-markdown's
/// `new_cmark_parser`), with those `[output.html]` turns on by default and
/// `book/book.toml` leaves on: smart punctuation (it changes a heading's
/// text, so its anchor), definition lists (their terms get anchors too) and
/// admonitions.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
        | Options::ENABLE_SMART_PUNCTUATION
        | Options::ENABLE_DEFINITION_LIST
        | Options::ENABLE_GFM
}

/// How a code block is written.
#[derive(Debug, PartialEq)]
enum Fence {
    /// Between fences (of backticks or tildes, of any length), with its
    /// info string, and whether its closing fence is there (an unclosed one
    /// runs to the end of the page or of its list item).
    Fenced { info: String, closed: bool },
    /// Indented by four spaces: rustdoc compiles it as Rust.
    Indented,
}

/// A code block: the line where it starts (1-based), how it is written
/// and its text.
struct Block {
    line: usize,
    fence: Fence,
    text: String,
}

/// A link: its line, its target, and whether it is a Markdown link (not
/// an `href` of HTML): only those make a chapter of `SUMMARY.md`.
struct Link {
    line: usize,
    target: String,
    markdown: bool,
}

/// A Markdown file as mdBook reads it.
struct Markdown {
    blocks: Vec<Block>,
    /// Every link: inline, autolink, image, each reference definition (used
    /// or not; a reference link is checked at its definition), and each
    /// `href`/`src` of HTML outside comments.
    links: Vec<Link>,
    /// `[text][ref]` and `[text][]` without a definition: mdBook shows
    /// them as plain text.
    broken_references: Vec<(usize, String)>,
    /// The ids the rendered page has: its headings' and its definition
    /// terms' (as mdBook makes them), and any `id` of its HTML.
    anchors: BTreeSet<String>,
}

/// Line numbers of byte offsets.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(at, _)| at + 1))
            .collect();
        Lines(starts)
    }

    /// The 1-based line of the byte at `offset`.
    fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|start| *start <= offset)
    }
}

/// A heading or a definition term being read: its `{#id}` if it has one,
/// and its text so far.
struct Title {
    id: Option<String>,
    text: String,
}

fn parse(text: &str) -> Markdown {
    let lines = Lines::new(text);
    let mut broken = Vec::new();
    let mut md = Markdown {
        blocks: Vec::new(),
        links: Vec::new(),
        broken_references: Vec::new(),
        anchors: BTreeSet::new(),
    };
    {
        let callback = |link: BrokenLink<'_>| {
            if matches!(link.link_type, LinkType::Reference | LinkType::Collapsed) {
                broken.push((link.span.start, link.reference.to_string()));
            }
            None
        };
        let parser = Parser::new_with_broken_link_callback(text, options(), Some(callback));
        for (_, def) in parser.reference_definitions().iter() {
            md.links.push(Link {
                line: lines.of(def.span.start),
                target: def.dest.to_string(),
                markdown: true,
            });
        }
        read_events(text, &lines, parser.into_offset_iter(), &mut md);
    }
    md.broken_references = broken
        .into_iter()
        .map(|(at, reference)| (lines.of(at), reference))
        .collect();
    md
}

/// Fills `md` from the parser's events.
fn read_events<'a>(
    text: &'a str,
    lines: &Lines,
    events: impl Iterator<Item = (Event<'a>, Range<usize>)>,
    md: &mut Markdown,
) {
    // mdBook numbers a repeated heading id (`x`, `x-1`, …) among the ids it
    // made itself; a `{#id}` is taken as written and kept out of the count.
    let mut made_ids = HashSet::new();
    let mut block: Option<Block> = None;
    let mut title: Option<Title> = None;
    let mut in_comment = false;
    for (event, range) in events {
        match event {
            Event::Start(Tag::CodeBlock(kind)) => {
                let fence = match kind {
                    CodeBlockKind::Fenced(info) => Fence::Fenced {
                        info: info.trim().to_owned(),
                        closed: fence_closed(&text[range.clone()]),
                    },
                    CodeBlockKind::Indented => Fence::Indented,
                };
                block = Some(Block {
                    line: lines.of(range.start),
                    fence,
                    text: String::new(),
                });
            }
            Event::End(TagEnd::CodeBlock) => md.blocks.extend(block.take()),
            Event::Text(t) if block.is_some() => block.as_mut().unwrap().text.push_str(&t),
            Event::Start(Tag::Heading { id, .. }) => {
                title = Some(Title {
                    id: id.map(|id| id.to_string()),
                    text: String::new(),
                })
            }
            Event::Start(Tag::DefinitionListTitle) => {
                title = Some(Title {
                    id: None,
                    text: String::new(),
                })
            }
            Event::End(TagEnd::Heading(_) | TagEnd::DefinitionListTitle) => {
                if let Some(title) = title.take() {
                    let id = match title.id {
                        Some(id) => id,
                        None => unique_id(&id_from_content(&title.text), &mut made_ids),
                    };
                    md.anchors.insert(id);
                }
            }
            Event::Text(t) | Event::Code(t) if title.is_some() => {
                title.as_mut().unwrap().text.push_str(&t)
            }
            Event::SoftBreak if title.is_some() => title.as_mut().unwrap().text.push('\n'),
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                ..
            })
            | Event::Start(Tag::Image {
                link_type,
                dest_url,
                ..
            }) => {
                // A reference link is checked at its definition; an email
                // autolink has no target to check.
                if matches!(
                    link_type,
                    LinkType::Inline | LinkType::Autolink | LinkType::WikiLink { .. }
                ) {
                    md.links.push(Link {
                        line: lines.of(range.start),
                        target: dest_url.to_string(),
                        markdown: true,
                    });
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                read_html(&html, range.start, lines, &mut in_comment, md)
            }
            // An HTML block ends with its comment, closed or not.
            Event::End(TagEnd::HtmlBlock) => in_comment = false,
            _ => {}
        }
    }
}

/// Whether the source of a fenced code block ends with a closing fence:
/// of its opening fence's character, at least as long. An unclosed fence is
/// no error to CommonMark (the block runs on), but it is a mistake.
fn fence_closed(source: &str) -> bool {
    let mut lines = source.trim_end_matches(['\n', '\r']).lines();
    let open = lines.next().unwrap_or("").trim_start();
    let Some(c) = open.chars().next() else {
        return false;
    };
    let length = open.chars().take_while(|x| *x == c).count();
    let Some(last) = lines.last() else {
        return false;
    };
    let last = last.trim_start_matches([' ', '\t', '>']).trim_end();
    last.len() >= length && last.chars().all(|x| x == c)
}

/// The links and ids of a piece of HTML (a line of an HTML block, or a tag
/// inline) that starts at byte `start` of the file, comments left out;
/// `in_comment` carries a comment open at the end of one piece to the next.
fn read_html(html: &str, start: usize, lines: &Lines, in_comment: &mut bool, md: &mut Markdown) {
    let mut pos = 0;
    while pos < html.len() {
        if *in_comment {
            match html[pos..].find("-->") {
                Some(end) => {
                    pos += end + "-->".len();
                    *in_comment = false;
                }
                None => return,
            }
        }
        let end = match html[pos..].find("<!--") {
            Some(open) => {
                *in_comment = true;
                pos + open
            }
            None => html.len(),
        };
        // Line by line, for the line numbers.
        let mut at = start + pos;
        for piece in html[pos..end].split_inclusive('\n') {
            let line = lines.of(at);
            for target in html_attribute(piece, "href")
                .into_iter()
                .chain(html_attribute(piece, "src"))
            {
                md.links.push(Link {
                    line,
                    target,
                    markdown: false,
                });
            }
            md.anchors.extend(html_attribute(piece, "id"));
            at += piece.len();
        }
        pos = if *in_comment { end + "<!--".len() } else { end };
    }
}

/// The values of attribute `name` (`name="v"`, `name='v'` or `name=v`) in
/// a piece of HTML.
fn html_attribute(html: &str, name: &str) -> Vec<String> {
    let lower = html.to_ascii_lowercase();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = lower[from..].find(name) {
        let start = from + found;
        from = start + name.len();
        let before = lower[..start].chars().next_back();
        if !before.is_some_and(char::is_whitespace) {
            continue;
        }
        let Some(value) = html[from..].trim_start().strip_prefix('=') else {
            continue;
        };
        let value = value.trim_start();
        let value = match value.chars().next() {
            Some(q @ ('"' | '\'')) => value[1..].split(q).next().unwrap_or(""),
            _ => value
                .split(|c: char| c.is_whitespace() || c == '>')
                .next()
                .unwrap_or(""),
        };
        out.push(value.to_owned());
    }
    out
}

/// mdBook's `id_from_content` (mdbook-html 0.5, `utils.rs`): a heading's
/// text trimmed and lowercased, whitespace as `-`, anything but letters,
/// digits, `-` and `_` dropped.
fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// mdBook's `unique_id`: `id`, or `id-1`, `id-2`, … if it is taken.
fn unique_id(id: &str, used: &mut HashSet<String>) -> String {
    let mut candidate = id.to_owned();
    let mut n = 0;
    while !used.insert(candidate.clone()) {
        n += 1;
        candidate = format!("{id}-{n}");
    }
    candidate
}

// ---------------------------------------------------------------------------
// Info strings
// ---------------------------------------------------------------------------

/// The languages the book's blocks may say. A language not here is most
/// likely a typo that would slip a block past its checks (`tomll`); a new
/// one goes here, if highlight.js knows it.
const LANGUAGES: &[&str] = &[
    "text", "toml", "rust", "sh", "console", "json", "yaml", "markdown", "diff",
];

/// The words of a fenced block's info string, as rustdoc splits them (at
/// commas and blanks); CommonMark's language is the first, which
/// highlight.js takes case-insensitively.
fn words(info: &str) -> Vec<&str> {
    info.split([',', ' ', '\t'])
        .filter(|w| !w.is_empty())
        .collect()
}

/// How rustdoc reads a fenced block (its `LangString::parse`): as Rust,
/// and whether it leaves it uncompiled (`ignore`).
struct Rustdoc {
    rust: bool,
    ignored: bool,
}

fn rustdoc(info: &str) -> Rustdoc {
    let (mut rust_word, mut other_word, mut ignored) = (false, false, false);
    for word in words(info) {
        match word {
            "rust" => rust_word = true,
            "ignore" => {
                ignored = true;
                rust_word = !other_word;
            }
            "should_panic" | "no_run" => rust_word = !other_word,
            w if w.starts_with("ignore-") => rust_word = !other_word,
            "test_harness" | "compile_fail" | "standalone_crate" => {
                rust_word = !other_word || rust_word
            }
            w if w.starts_with("edition") => {}
            w if w.len() == 5 && w.starts_with('E') && w[1..].parse::<u32>().is_ok() => {
                rust_word = !other_word || rust_word
            }
            w if w.starts_with('{') || w.ends_with('}') => {}
            _ => other_word = true,
        }
    }
    Rustdoc {
        rust: !other_word || rust_word,
        ignored,
    }
}

// ---------------------------------------------------------------------------
// Resolving links
// ---------------------------------------------------------------------------

/// Who follows a link: the rendered book holds only `book/src`; a checkout
/// (GitHub, an editor) has every file.
#[derive(Clone, Copy, PartialEq)]
enum Reader {
    Book,
    Checkout,
}

/// What a link can point at: the book's pages with their anchors, and the
/// checkout.
struct Targets {
    root: PathBuf,
    book_src: PathBuf,
    repository: String,
    /// Each page of the book by its canonical path, with its anchors.
    pages: BTreeMap<PathBuf, BTreeSet<String>>,
}

impl Targets {
    fn new() -> Self {
        let pages = pages()
            .into_iter()
            .map(|(rel, text)| {
                let path = book_src().join(rel).canonicalize().unwrap();
                (path, parse(&text).anchors)
            })
            .collect();
        Targets {
            root: repo(),
            book_src: book_src().canonicalize().unwrap(),
            repository: repository_url(),
            pages,
        }
    }

    /// Whether `target`, linked from the file `from`, resolves for
    /// `reader`; `Err` says what is wrong and what to do.
    fn check(&self, from: &Path, reader: Reader, target: &str) -> Result<(), String> {
        if let Some(result) = self.check_repository_url(target) {
            return result;
        }
        if has_scheme(target) {
            return Ok(());
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
            return Err(format!("{target}: no such file"));
        };
        if reader == Reader::Book && !file.starts_with(&self.book_src) {
            return Err(self.outside_the_book(target, &file));
        }
        match (self.pages.get(&file), fragment) {
            (Some(anchors), Some(f)) if !anchors.contains(f) => Err(format!(
                "{target}: the page has no heading whose anchor is #{f} \
                 (mdBook's anchor of `## Some title` is #some-title; \
                 `## Title {{#{f}}}` sets one)"
            )),
            (None, Some(_)) if file.extension().is_some_and(|e| e == "md") => Err(format!(
                "{target}: an anchor into a file outside the book (only the book's anchors are known here)"
            )),
            _ => Ok(()),
        }
    }

    /// `Some` when `target` is a file of this repository by URL
    /// (`<repository>/blob/main/PATH` or `/tree/main/DIR`): then it must be
    /// in the checkout.
    fn check_repository_url(&self, target: &str) -> Option<Result<(), String>> {
        let rest = target.strip_prefix(&self.repository)?;
        let (rest, dir) = if let Some(path) = rest.strip_prefix("/blob/main/") {
            (path, false)
        } else {
            (rest.strip_prefix("/tree/main/")?, true)
        };
        let path = rest.split(['#', '?']).next().unwrap().trim_end_matches('/');
        let file = self.root.join(path);
        Some(match (file.is_dir(), file.is_file()) {
            (true, _) if dir => Ok(()),
            (_, true) if !dir => Ok(()),
            (true, _) => Err(format!(
                "{target}: {path} is a folder: say {}/tree/main/{path}",
                self.repository
            )),
            (_, true) => Err(format!(
                "{target}: {path} is a file: say {}/blob/main/{path}",
                self.repository
            )),
            _ => Err(format!("{target}: the checkout has no {path}")),
        })
    }

    /// What to say of a relative link from a page to `file`, outside
    /// `book/src`.
    fn outside_the_book(&self, target: &str, file: &Path) -> String {
        let rel = file.strip_prefix(&self.root).unwrap_or(file);
        let kind = if file.is_dir() { "tree" } else { "blob" };
        format!(
            "{target}: outside book/src, which is all mdBook puts in the book, so the link is dead there: \
             say {}/{kind}/main/{}",
            self.repository,
            rel.display()
        )
    }
}

/// Whether a link has a scheme (`https:`, `mailto:`, …): mdBook's test for
/// a link it leaves alone (`fix_link`).
fn has_scheme(target: &str) -> bool {
    let Some((scheme, _)) = target.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+.-".contains(c))
}

// ---------------------------------------------------------------------------
// The summary
// ---------------------------------------------------------------------------

#[test]
fn every_page_is_in_the_summary_and_every_summary_entry_is_a_page() {
    let pages = pages();
    let summary = pages.get("SUMMARY.md").expect("book/src/SUMMARY.md");
    // mdBook makes a chapter of a Markdown link, never of an `href` (nor of
    // anything in a comment, which the parser leaves out).
    let listed: BTreeMap<String, usize> = parse(summary)
        .links
        .iter()
        .filter(|link| link.markdown)
        .map(|link| (link.target.split('#').next().unwrap().to_owned(), link.line))
        .collect();
    let mut wrong = Vec::new();
    for page in pages.keys().filter(|p| *p != "SUMMARY.md") {
        if !listed.contains_key(page) {
            wrong.push(format!(
                "book/src/{page} is not in SUMMARY.md: add it as `- [Title]({page})` \
                 (a link in a comment does not count)"
            ));
        }
    }
    for (page, line) in &listed {
        if !pages.contains_key(page) {
            wrong.push(format!(
                "book/src/SUMMARY.md:{line}: lists {page}, which is not under book/src: \
                 fix the link or add the page"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------
// Links
// ---------------------------------------------------------------------------

/// The Markdown files whose links are checked: the book's pages (read in
/// the book) and every README git knows (read in a checkout).
fn linking_files() -> Vec<(PathBuf, Reader)> {
    let root = repo();
    let mut files: Vec<(PathBuf, Reader)> = pages()
        .keys()
        .map(|rel| (book_src().join(rel), Reader::Book))
        .collect();
    for file in git_files() {
        if file.file_name().is_some_and(|n| n == "README.md") && root.join(&file).is_file() {
            files.push((root.join(file), Reader::Checkout));
        }
    }
    files
}

#[test]
fn every_link_of_the_book_and_the_readmes_resolves() {
    let targets = Targets::new();
    let root = repo();
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (file, reader) in linking_files() {
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        let md = parse(&std::fs::read_to_string(&file).unwrap());
        for link in &md.links {
            checked += 1;
            if let Err(problem) = targets.check(&file, reader, &link.target) {
                wrong.push(format!("{shown}:{}: {problem}", link.line));
            }
        }
        for (line, reference) in &md.broken_references {
            wrong.push(format!(
                "{shown}:{line}: [{reference}] is not defined, so the link shows as plain text: \
                 add `[{reference}]: TARGET` to the page"
            ));
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

// ---------------------------------------------------------------------------
// Pointers at the book in the sources
// ---------------------------------------------------------------------------

/// Every pointer at a page of the book in the text of a file, as the page's
/// path from the repository's root (`book/src/<page>.md[#anchor]`): written
/// so, or as the rendered page (`book/<page>.html[#anchor]`); with its line
/// and the text as written.
fn pointers(text: &str) -> Vec<(usize, String, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("book/") {
            rest = &rest[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/-_.#".contains(c)))
                .unwrap_or(rest.len());
            let pointer = rest[..end].trim_end_matches('.');
            if let Some(page) = page_of_pointer(pointer) {
                out.push((i + 1, pointer.to_owned(), page));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// `book/src/<page>.md[#a]` as it is; `book/<page>.html[#a]` as the page it
/// is rendered from; `None` for anything else under `book/`, and for a
/// placeholder in capitals (`book/src/PAGE.md`, as in `toml,over=PATH`):
/// the book's pages are named in lowercase.
fn page_of_pointer(pointer: &str) -> Option<String> {
    let (path, fragment) = match pointer.split_once('#') {
        Some((p, f)) => (p, format!("#{f}")),
        None => (pointer, String::new()),
    };
    let name = Path::new(path).file_stem()?.to_string_lossy();
    if !name.chars().any(|c| c.is_ascii_lowercase()) {
        return None;
    }
    if path.starts_with("book/src/") && path.ends_with(".md") {
        return Some(pointer.to_owned());
    }
    let page = path.strip_prefix("book/")?.strip_suffix(".html")?;
    Some(format!("book/src/{page}.md{fragment}"))
}

/// The files scanned for pointers: every text file git knows but the
/// book's pages (their links are checked as links) and this file (whose
/// docs show pointers as examples).
fn pointing_files() -> Vec<(PathBuf, String)> {
    let root = repo();
    let this = Path::new("testkit-engine/tests").join(Path::new(file!()).file_name().unwrap());
    git_files()
        .into_iter()
        .filter(|file| !file.starts_with("book/src") && *file != this)
        .filter_map(|file| {
            let bytes = std::fs::read(root.join(&file)).ok()?;
            // A binary file (an image): neither UTF-8 nor free of NULs.
            let text = String::from_utf8(bytes)
                .ok()
                .filter(|t| !t.contains('\0'))?;
            Some((file, text))
        })
        .collect()
}

#[test]
fn every_pointer_at_the_book_in_the_sources_resolves() {
    let targets = Targets::new();
    let root = repo();
    let mut wrong = Vec::new();
    let mut checked = 0;
    let files = pointing_files();
    assert!(files.len() > 100, "only {} files found", files.len());
    for (file, text) in files {
        for (line, written, page) in pointers(&text) {
            checked += 1;
            let from = root.join("README.md");
            if let Err(problem) = targets.check(&from, Reader::Checkout, &page) {
                let shown = if written == page {
                    String::new()
                } else {
                    format!("{written}, rendered from ")
                };
                wrong.push(format!("{}:{line}: {shown}{problem}", file.display()));
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

// ---------------------------------------------------------------------------
// toml blocks
// ---------------------------------------------------------------------------

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

/// A `toml,over=PATH` block: merged over that file, then checked as a
/// `testkit.toml`.
fn check_over(base_path: &Path, block: &str, at: &Path) -> Result<(), String> {
    let base = std::fs::read_to_string(base_path)
        .map_err(|e| format!("cannot read {}: {e}", base_path.display()))?;
    let mut base: toml::Table = toml::from_str(&base).expect("the base file is TOML");
    let over: toml::Table = toml::from_str(block).map_err(|e| e.to_string())?;
    merge(&mut base, over);
    check_suite_config(&toml::to_string(&base).unwrap(), at)
}

/// A toml block, by the words after its language.
fn check_toml_block(attributes: &[&str], text: &str, at: &Path) -> Result<(), String> {
    match attributes {
        [] => check_suite_config(text, at),
        ["cargo" | "nextest"] => toml::from_str::<toml::Table>(text)
            .map(drop)
            .map_err(|e| e.to_string()),
        [over] if over.starts_with("over=") => {
            check_over(&repo().join(&over["over=".len()..]), text, at)
        }
        _ => Err(format!(
            "unknown annotation `{}`: say toml, toml,over=PATH, toml,cargo or toml,nextest",
            attributes.join(" ")
        )),
    }
}

#[test]
fn every_toml_block_of_the_book_is_valid() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for (page, text) in pages() {
        for block in parse(&text).blocks {
            let Fence::Fenced { info, .. } = &block.fence else {
                continue;
            };
            let words = words(info);
            let Some((language, attributes)) = words.split_first() else {
                continue;
            };
            if !language.eq_ignore_ascii_case("toml") {
                continue;
            }
            checked += 1;
            let at = format!("book/src/{page}:{}", block.line);
            if let Err(e) = check_toml_block(attributes, &block.text, Path::new(&at)) {
                wrong.push(format!("{at}: ```{info}: {e}"));
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

// ---------------------------------------------------------------------------
// Code blocks and the doc tests
// ---------------------------------------------------------------------------

/// The pages testkit's `#[cfg(doctest)] mod book` (`testkit/src/lib.rs`)
/// includes, as paths relative to `book/src`: read as rustc reads the
/// file, so a page named in a comment is not included.
fn doctest_pages() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(repo().join("testkit/src/lib.rs")).unwrap();
    let file = syn::parse_file(&lib).expect("testkit/src/lib.rs parses");
    let book = file
        .items
        .iter()
        .find_map(|item| match item {
            syn::Item::Mod(m) if m.ident == "book" && is_cfg_doctest(&m.attrs) => {
                m.content.as_ref()
            }
            _ => None,
        })
        .expect("testkit/src/lib.rs has a `#[cfg(doctest)] mod book { … }`");
    let mut out = BTreeSet::new();
    for item in &book.1 {
        let syn::Item::Macro(m) = item else { continue };
        if !m.mac.path.is_ident("pages") {
            continue;
        }
        let entries = m
            .mac
            .parse_body_with(
                syn::punctuated::Punctuated::<PageEntry, syn::Token![,]>::parse_terminated,
            )
            .expect("testkit/src/lib.rs: `pages! { module = \"../../book/src/page.md\", … }`");
        for entry in entries {
            let path = entry.page.value();
            let page = path.strip_prefix("../../book/src/").unwrap_or_else(|| {
                panic!("testkit/src/lib.rs: {path} is not ../../book/src/<page>.md")
            });
            out.insert(page.to_owned());
        }
    }
    out
}

fn is_cfg_doctest(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|cfg| cfg == "doctest")
    })
}

/// One `module = "page"` of `pages!`.
struct PageEntry {
    page: syn::LitStr,
}

impl syn::parse::Parse for PageEntry {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        input.parse::<syn::Ident>()?;
        input.parse::<syn::Token![=]>()?;
        Ok(PageEntry {
            page: input.parse()?,
        })
    }
}

/// What is wrong with a code block, if anything.
fn check_block(block: &Block) -> Option<String> {
    let info = match &block.fence {
        Fence::Indented => {
            return Some(
                "an indented code block (rustdoc would compile it as Rust, mdBook shows it \
                 unhighlighted): fence it, as ```text or with its language"
                    .to_owned(),
            )
        }
        Fence::Fenced { closed: false, .. } => {
            return Some(
                "a code block that is never closed (it runs on to the end of the page or list \
                 item): close it with a fence like its opening one"
                    .to_owned(),
            )
        }
        Fence::Fenced { info, .. } => info,
    };
    let words = words(info);
    let Some(language) = words.first() else {
        return Some(
            "a code block without a language (rustdoc would compile it as Rust): say ```text"
                .to_owned(),
        );
    };
    let language = language.to_ascii_lowercase();
    if !rustdoc(info).rust && !LANGUAGES.contains(&language.as_str()) {
        return Some(format!(
            "```{info}: `{language}` is not a language of the book ({}): a typo? \
             a new one goes in LANGUAGES in testkit-engine/tests/book.rs",
            LANGUAGES.join(", ")
        ));
    }
    None
}

#[test]
fn every_rust_page_is_compiled_by_the_doc_tests() {
    // testkit's lib.rs includes each page with a Rust block in its
    // `#[cfg(doctest)] mod book`; a page with Rust that it leaves out would
    // go uncompiled. A block is Rust as rustdoc sees it: `no_run` alone is.
    let included = doctest_pages();
    let mut wrong = Vec::new();
    for (page, text) in pages() {
        let blocks = parse(&text).blocks;
        // (An unlabeled or indented block is Rust to rustdoc too, but it is
        // an error of its own below.)
        let rust = blocks.iter().find(|b| match &b.fence {
            Fence::Fenced { info, .. } if !info.is_empty() => {
                let r = rustdoc(info);
                r.rust && !r.ignored
            }
            _ => false,
        });
        if let Some(b) = rust.filter(|_| !included.contains(&page)) {
            wrong.push(format!(
                "book/src/{page}:{}: a Rust block, and testkit/src/lib.rs does not include \
                 the page, so it goes uncompiled: add the page to `pages!` in its \
                 `#[cfg(doctest)] mod book`",
                b.line
            ));
        }
        for b in &blocks {
            if let Some(problem) = check_block(b) {
                wrong.push(format!("book/src/{page}:{}: {problem}", b.line));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
