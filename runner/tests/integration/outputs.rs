//! The outputs of a run (`junit.xml`, `junit/<binary>.xml`, `report.html`)
//! are read by every reader whatever bytes a test produced: XML non-characters,
//! NUL, ESC, BEL, invalid UTF-8 and `]]>` in its doc comment, its message,
//! its log, its output and its known issue's text.

use crate::report::render;
use crate::truth::add_test_binary;
use crate::{fixture, runner, Ran};

/// What no XML 1.0 document may hold, and `]]>`.
const NASTY: &str = "U+FFFE \u{FFFE} U+FFFF \u{FFFF} ESC \u{1b}[31mred\u{1b}[0m BEL \u{7} NUL \u{0} CDATA-end ]]> end";

/// The fixture test binary; `DOC_NASTY` in its doc comments becomes
/// [`NASTY`], raw.
const UNREADABLE: &str = r#"//! Tests whose doc comments, messages and logs hold what no XML reader
//! accepts and what a browser should not be sent raw.

use std::io::Write as _;

use testkit::prelude::*;

/// Text no XML 1.0 document may hold, and `]]>`.
const NASTY: &str = "U+FFFE \u{FFFE} U+FFFF \u{FFFF} ESC \u{1b}[31mred\u{1b}[0m BEL \u{7} NUL \u{0} CDATA-end ]]> end";

/// Lone surrogates (U+D800, U+DFFF) as raw bytes: not UTF-8.
const SURROGATES: &[u8] = b"lone \xed\xa0\x80 and \xed\xbf\xbf surrogates";

fn write_raw() {
    let mut out = std::io::stdout();
    let _ = out.write_all(SURROGATES);
    let _ = out.write_all(NASTY.as_bytes());
    let _ = out.write_all(b"\n");
    let _ = out.flush();
    let mut err = std::io::stderr();
    let _ = err.write_all(SURROGATES);
    let _ = err.write_all(b"\n");
}

/// Fails: DOC_NASTY
#[testkit::test]
async fn fails_with_unreadable_text(cx: &mut Cx) -> testkit::Result {
    cx.pod()?;
    write_raw();
    cx.log(String::from_utf8_lossy(SURROGATES));
    cx.log(NASTY);
    bail!("message {NASTY}\nsecond line {NASTY}")
}

/// Fails as FIX-2 documents: DOC_NASTY
#[testkit::test(known_issue = "FIX-2", fails_with = "CDATA-end ]]> end")]
async fn fails_as_documented_with_unreadable_text(cx: &mut Cx) -> testkit::Result {
    write_raw();
    cx.log(NASTY);
    bail!("pinned {NASTY}")
}

/// Passes: DOC_NASTY
#[testkit::test]
async fn passes_with_unreadable_text(cx: &mut Cx) -> testkit::Result {
    write_raw();
    cx.log(NASTY);
    Ok(())
}

testkit::main!();
"#;

/// The entry of `KNOWN-ISSUES.md` the pinned test fails as, its title and
/// text holding [`NASTY`] raw.
fn known_issue() -> String {
    format!("\n## FIX-2: a title with {NASTY}\nThe body, too: {NASTY}\nhttps://bugs.example.com/FIX-2\n")
}

/// A real run whose tests write and fail with U+FFFE, U+FFFF, NUL, ESC,
/// BEL, lone surrogates as raw bytes and `]]>`: every JUnit file parses
/// with a strict XML parser and holds what the records say around what was
/// mended, report.html carries none of those bytes raw, and Chromium shows
/// the failing test on it.
#[test]
fn every_output_is_read_whatever_bytes_a_test_produced() {
    let suite = fixture("suite");
    add_test_binary(
        suite.path(),
        "unreadable",
        &UNREADABLE.replace("DOC_NASTY", NASTY),
    );
    let issues = suite.path().join("KNOWN-ISSUES.md");
    let mut text = std::fs::read_to_string(&issues).unwrap();
    text.push_str(&known_issue());
    std::fs::write(&issues, text).unwrap();
    // The parser the proof rests on refuses what the run must not write.
    for bad in [
        "<a>\u{FFFE}</a>",
        "<a>\u{FFFF}</a>",
        "<a>\u{0}</a>",
        "<a>\u{1b}</a>",
        "<a b=\"\u{FFFE}\"/>",
    ] {
        assert!(roxmltree::Document::parse(bad).is_err(), "{bad:?} parses");
    }
    let ran = Ran::from(
        runner()
            .arg("run")
            .arg(suite.path())
            .args(["-E", "binary(unreadable)"])
            .output()
            .unwrap(),
    );
    assert_eq!(ran.code, 1, "one test fails: {}", ran.stdout);
    assert_eq!(ran.verdict("tests").0, "fail");
    let results = ran.results();

    for file in ["junit.xml", "junit/unreadable.xml"] {
        let path = results.join(file);
        let xml =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let doc = roxmltree::Document::parse(&xml)
            .unwrap_or_else(|e| panic!("{file} is not XML: {e}\n{xml}"));
        let case = |name: &str| {
            doc.descendants()
                .find(|n| n.has_tag_name("testcase") && n.attribute("name") == Some(name))
                .unwrap_or_else(|| panic!("{file}: no testcase {name}"))
        };
        let failed = case("unreadable::fails_with_unreadable_text");
        let failure = failed
            .children()
            .find(|n| n.has_tag_name("failure"))
            .unwrap_or_else(|| panic!("{file}: the failing test has no <failure>"));
        let message = failure.attribute("message").unwrap_or("");
        assert!(
            message.contains(
                "message U+FFFE \u{FFFD} U+FFFF \u{FFFD} ESC red BEL  NUL  CDATA-end ]]> end"
            ),
            "{file}: {message:?}"
        );
        let description = failed
            .descendants()
            .find(|n| n.attribute("name") == Some("description"))
            .and_then(|n| n.attribute("value"))
            .unwrap_or("");
        assert!(
            description.contains("U+FFFE \u{FFFD} U+FFFF \u{FFFD}")
                && description.contains("]]> end"),
            "{file}: {description:?}"
        );
        let out = failed
            .children()
            .find(|n| n.has_tag_name("system-out"))
            .and_then(|n| n.text())
            .unwrap_or("");
        assert!(
            out.contains("lone \u{FFFD}") && out.contains("CDATA-end ]]> end"),
            "{file}: {out:?}"
        );
        let pinned = case("unreadable::fails_as_documented_with_unreadable_text");
        let skipped = pinned
            .children()
            .find(|n| n.has_tag_name("skipped"))
            .unwrap_or_else(|| panic!("{file}: the pinned test is no expected failure"));
        assert!(
            skipped.attribute("message").unwrap_or("").starts_with(
                "known issue FIX-2: the test returned an error: pinned U+FFFE \u{FFFD}"
            ),
            "{file}: {:?}",
            skipped.attribute("message")
        );
        case("unreadable::passes_with_unreadable_text");
        for raw in ['\u{FFFE}', '\u{FFFF}', '\u{0}', '\u{1b}', '\u{7}'] {
            assert!(!xml.contains(raw), "{file} holds {raw:?}");
        }
    }

    let page = results.join("report.html");
    let bytes = std::fs::read(&page).unwrap();
    let html = String::from_utf8(bytes.clone()).expect("report.html is UTF-8");
    for (raw, name) in [(0x00u8, "NUL"), (0x1b, "ESC"), (0x07, "BEL")] {
        assert!(!bytes.contains(&raw), "report.html holds a raw {name}");
    }
    for raw in ['\u{FFFE}', '\u{FFFF}'] {
        assert!(!html.contains(raw), "report.html holds {raw:?}");
    }
    // What was there is shown, not lost.
    assert!(html.contains("NUL ␀ CDATA-end ]]&gt; end"), "report.html");
    assert!(html.contains("BEL ␇"), "report.html");
    assert!(
        html.contains(
            "a title with U+FFFE \u{FFFD} U+FFFF \u{FFFD} ESC red BEL ␇ NUL ␀ CDATA-end ]]&gt; end"
        ),
        "report.html does not show the known issue's title"
    );
    let dom = render(&page, "unreadable", "unreadable");
    let failures = &dom[dom.find("id=\"failures\"").expect("a Failures section")..];
    assert!(
        failures.contains("fails_with_unreadable_text"),
        "the page does not show the failing test: {failures}"
    );
    assert!(
        failures.contains("CDATA-end ]]&gt; end"),
        "the failure's message is not shown"
    );
}
