//! The exit codes of `testkit-runner`, for scripts and CI. They are part of
//! the command's interface: documented in `--help` and TESTING.md, and never
//! renumbered. Which outcome ends with which code is decided in one place,
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

/// The table printed by `--help`.
pub(crate) const HELP: &str = "\
Exit codes:
  0    all green (expected failures included)
  1    tests failed, a known issue passed, resources leaked, or teardown failed
  2    the run could not complete (the pod did not come up, the build failed)
  64   bad arguments, suite or handle
  130  interrupted (Ctrl-C or SIGTERM); cleanup and teardown still ran";
