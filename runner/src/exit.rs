//! The exit codes of `testkit-runner`, for scripts and CI. They are part of
//! the command's interface: documented in `--help` and the book
//! (`book/src/runner.md#the-runner`), and never renumbered. Which outcome ends with which code is decided in one place,
//! `ExpectedError::process_exit_code` (`errors.rs`).

/// Everything ran and verified green (expected failures included).
pub(crate) const OK: u8 = 0;
/// The run completed but failed: a test failed, a known issue passed,
/// resources leaked, or the pod's teardown could not be verified.
pub(crate) const VERIFY_FAILED: u8 = 1;
/// The run could not complete: the pod did not come up, the suite did not
/// build, the test command could not be started.
pub(crate) const INCOMPLETE: u8 = 2;
/// Bad arguments, an unusable suite dir or config, or an invalid handle.
pub(crate) const BAD_ARGS: u8 = 64;
/// Interrupted by Ctrl-C or SIGTERM: cleanup, residue sweep and teardown ran.
pub(crate) const INTERRUPTED: u8 = 130;

/// What one exit code means for one verb: a row of its `--help` table.
pub(crate) type Row = (u8, &'static str);

const BAD_ARGS_MEANS: &str = "bad arguments, suite or handle";

/// `run`, and the binary's own `--help`: the run uses every code.
pub(crate) const RUN: &[Row] = &[
    (OK, "all green (expected failures included)"),
    (
        VERIFY_FAILED,
        "tests failed, a known issue passed, resources leaked, or teardown failed",
    ),
    (
        INCOMPLETE,
        "the run could not complete (the pod did not come up or was stopped, the build failed, the residue could not be listed, an output could not be written, KNOWN-ISSUES.md does not parse)",
    ),
    (
        BAD_ARGS,
        "bad arguments, suite or handle, or a run id a live runner holds",
    ),
    (
        INTERRUPTED,
        "interrupted (Ctrl-C or SIGTERM); cleanup and teardown still ran",
    ),
];

pub(crate) const JANITOR: &[Row] = &[
    (
        OK,
        "every leftover found was deleted and verified gone (live runs are skipped, saying so)",
    ),
    (
        VERIFY_FAILED,
        "a leftover could not be deleted or verified gone, a listing failed, or the run of --run is live",
    ),
    (INCOMPLETE, "the pod could not be reached"),
    (BAD_ARGS, BAD_ARGS_MEANS),
];

pub(crate) const MERGE: &[Row] = &[
    (
        OK,
        "the merged junit.xml, report.html and summary.md are written",
    ),
    (
        INCOMPLETE,
        "an input could not be read, or an output could not be written",
    ),
    (BAD_ARGS, "bad arguments, or an input that does not exist"),
];

pub(crate) const REPORT: &[Row] = &[
    (OK, "junit.xml and report.html are written"),
    (
        INCOMPLETE,
        "a results folder holds no records or could not be read, or junit.xml or report.html could not be written",
    ),
    (
        BAD_ARGS,
        "bad arguments, a folder that is not a results folder, an unreadable KNOWN-ISSUES.md, or a --run the folder does not hold (or none, where several runs are equally late)",
    ),
];

pub(crate) const NEW: &[Row] = &[
    (OK, "the suite is created"),
    (INCOMPLETE, "a file of the suite could not be written"),
    (
        BAD_ARGS,
        "bad arguments, a folder that is not empty, or no testkit crate to depend on",
    ),
];

pub(crate) const CHECK: &[Row] = &[
    (
        OK,
        "testkit.toml and KNOWN-ISSUES.md are valid, every entry is pinned by a test, every pinned id is listed",
    ),
    (
        VERIFY_FAILED,
        "a problem in testkit.toml or KNOWN-ISSUES.md, or a stale or unlisted entry: each is printed",
    ),
    (BAD_ARGS, "bad arguments, or the suite is not a directory"),
];

pub(crate) const CHECK_KNOWN_ISSUES: &[Row] = &[
    (
        OK,
        "every entry is pinned by a test, every pinned id is listed",
    ),
    (
        VERIFY_FAILED,
        "a stale or unlisted entry, or KNOWN-ISSUES.md could not be checked",
    ),
    (BAD_ARGS, "bad arguments, or the suite is not a directory"),
];

/// `pod`: what its verbs use between them.
pub(crate) const POD: &[Row] = &[
    (OK, "done, and verified"),
    (
        VERIFY_FAILED,
        "what the verb checked failed (auth, health, a stop that left something)",
    ),
    (INCOMPLETE, "the verb could not complete (see its --help)"),
    (
        BAD_ARGS,
        "bad arguments, suite config, or no pod of that name",
    ),
];

pub(crate) const POD_UP: &[Row] = &[
    (OK, "the pod is up, healthy, authenticated and recorded"),
    (
        VERIFY_FAILED,
        "the pod came up but failed the auth check; it was stopped again",
    ),
    (
        INCOMPLETE,
        "the pod did not come up, or could not be recorded",
    ),
    (BAD_ARGS, "bad arguments or suite config"),
];

pub(crate) const POD_STATUS: &[Row] = &[
    (OK, "every pod is alive and healthy"),
    (
        VERIFY_FAILED,
        "a pod is dead or unhealthy, or its pod.json is unreadable",
    ),
    (INCOMPLETE, "the named pod's pod.json is unreadable"),
    (BAD_ARGS, "bad arguments, or no pod of that name"),
];

pub(crate) const POD_LS: &[Row] = &[
    (OK, "listed (dead pods included)"),
    (BAD_ARGS, "bad arguments"),
];

pub(crate) const POD_DOWN: &[Row] = &[
    (
        OK,
        "the pod is stopped (or a dead one reclaimed), its HOME and state removed",
    ),
    (
        VERIFY_FAILED,
        "a process or its HOME survived, or its state could not be removed",
    ),
    (
        INCOMPLETE,
        "the stop could not be carried out, or pod.json is unreadable",
    ),
    (BAD_ARGS, "bad arguments, or no pod of that name"),
];

/// The `Exit codes:` table a verb's `--help` ends with.
pub(crate) fn help(rows: &[Row]) -> String {
    let mut out = "Exit codes:".to_owned();
    for (code, means) in rows {
        out.push_str(&format!("\n  {code:<4} {means}"));
    }
    out
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn the_run_table_reads_as_it_always_has() {
        assert_eq!(
            help(RUN),
            "\
Exit codes:
  0    all green (expected failures included)
  1    tests failed, a known issue passed, resources leaked, or teardown failed
  2    the run could not complete (the pod did not come up or was stopped, the build failed, the residue could not be listed, an output could not be written, KNOWN-ISSUES.md does not parse)
  64   bad arguments, suite or handle, or a run id a live runner holds
  130  interrupted (Ctrl-C or SIGTERM); cleanup and teardown still ran"
        );
    }
}
