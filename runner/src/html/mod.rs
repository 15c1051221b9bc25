//! `report.html`: one self-contained page (styles and script inline, no
//! network) for a results folder or a merged set of them, written at the end
//! of every `run`, by `merge`, and by `testkit-runner report DIR` for the
//! results of a plain `cargo test` / `cargo nextest run`.
//!
//! - `model`: what the page shows, read from each results folder;
//! - `source`: the commit a run tested, kept in `source.json`;
//! - `render`: the page itself;
//! - `trace`: a test's trace, as a waterfall on the page;
//! - `text`: text as both carry it, printable (the templates escape it).
//!
//! They point one way: `render` uses `model`, `trace` and `text`; `trace`
//! uses `text`; `model` uses `source`; `text` and `source` use none of
//! the others.
//!
//! Everything on the page comes from files that are redacted when written
//! (records, `verdict.jsonl`, the journal); the pod's folder, which holds
//! the handle and session, is never read.

mod model;
mod render;
pub(crate) mod source;
mod text;
mod trace;

use std::path::{Path, PathBuf};

use testkit_engine::report::{KnownIssues, ReportError, Summary};

use model::Part;
use source::Source;

/// The page's file name in a results folder.
pub(crate) const FILE: &str = "report.html";

/// Writes `<results_dir>/report.html` of the run `run_id` of that folder;
/// its path. A folder that other runs wrote into too shows this one only.
pub(crate) fn write(results_dir: &Path, run_id: &str) -> Result<PathBuf, ReportError> {
    let input = (results_dir.to_owned(), Some(run_id.to_owned()));
    // The run being judged: its seal comes after its page.
    write_parts(results_dir, &[input], None, false)
}

/// Writes `<out_dir>/report.html` from several results folders (one per
/// pod: the partitions of a fanned-out run), the latest run of each; its
/// path. Inputs that are not folders (JUnit files) have nothing for the
/// page and are passed over.
pub(crate) fn write_merged(out_dir: &Path, inputs: &[PathBuf]) -> Result<PathBuf, ReportError> {
    let inputs: Vec<(PathBuf, Option<String>)> = inputs.iter().map(|i| (i.clone(), None)).collect();
    write_with(out_dir, &inputs, None)
}

/// [`write_merged`] of the given run of each folder (`None`: its latest),
/// with the suite to ask git for folders that do not record what they
/// tested.
pub(crate) fn write_with(
    out_dir: &Path,
    inputs: &[(PathBuf, Option<String>)],
    suite: Option<&Path>,
) -> Result<PathBuf, ReportError> {
    write_parts(out_dir, inputs, suite, true)
}

fn write_parts(
    out_dir: &Path,
    inputs: &[(PathBuf, Option<String>)],
    suite: Option<&Path>,
    hold_to_seal: bool,
) -> Result<PathBuf, ReportError> {
    let mut parts = inputs
        .iter()
        .filter(|(i, _)| i.is_dir())
        .map(|(d, run)| Part::read(d, run.as_deref(), hold_to_seal))
        .collect::<Result<Vec<Part>, ReportError>>()?;
    if let Some(suite) = suite {
        let source = Source::of(suite);
        for part in parts.iter_mut().filter(|p| p.source.is_none()) {
            part.source = Some(source.clone());
        }
    }
    let records: Vec<_> = parts
        .iter()
        .flat_map(|p| p.records.iter().cloned())
        .collect();
    let known = known_issues(parts.iter().filter_map(|p| p.source.as_ref()));
    let summary = Summary::from_records(&records, known.as_ref());
    let title = match parts.as_slice() {
        [one] => {
            let suite = one
                .source
                .as_ref()
                .map(|s| format!("{} · ", s.suite))
                .unwrap_or_default();
            format!("{suite}run {}", one.run_id())
        }
        many => format!("{} results folders merged", many.len()),
    };
    let html = render::Page {
        title: &title,
        parts: &parts,
        summary: &summary,
        out_dir,
    }
    .html();
    // Every text on the page was redacted when written; a secret this
    // process knows of is redacted once more on the way out.
    let html = testkit_engine::redact(&html);
    let path = out_dir.join(FILE);
    std::fs::create_dir_all(out_dir)
        .and_then(|()| write_atomically(&path, html.as_bytes()))
        .map_err(|source| ReportError::Io {
            path: path.clone(),
            cause: source,
        })?;
    Ok(path)
}

/// The suite's KNOWN-ISSUES.md, which gives the issues their titles, when
/// the suite is still where a run found it.
fn known_issues<'a>(sources: impl Iterator<Item = &'a Source>) -> Option<KnownIssues> {
    sources
        .map(|s| PathBuf::from(&s.suite))
        .find(|d| d.is_dir())
        .and_then(|d| KnownIssues::load(&d).ok())
}

/// [`known_issues`] of the suite that results folders record.
pub(crate) fn known_issues_of(dirs: &[PathBuf]) -> Option<KnownIssues> {
    let sources: Vec<Source> = dirs.iter().filter_map(|d| Source::read(d)).collect();
    known_issues(sources.iter())
}

/// Written beside and renamed over, so that a browser reloading the page
/// never sees half of it.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("html.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// At the end of a run: what it tested (`source.json`), then the page of
/// that run. The error names the file that could not be written, and why.
pub(crate) fn write_for_run(
    results_dir: &Path,
    suite_dir: &Path,
    run_id: &str,
) -> Result<PathBuf, ReportError> {
    Source::of(suite_dir)
        .write(results_dir)
        .map_err(|cause| ReportError::Io {
            path: results_dir.join(source::FILE),
            cause,
        })?;
    write(results_dir, run_id)
}
