//! The errors `testkit-runner` expects, each with its exit code (one of the
//! constants in [`crate::exit`]) and the way it is printed. Every verb
//! returns `Result<(), ExpectedError>`; `main` prints the error and exits
//! with its code, so a new failure is one variant here, not a new
//! convention in a verb.

use std::fmt;

use crate::exit;

/// An outcome other than success that the runner knows how to report.
#[derive(Debug)]
pub(crate) enum ExpectedError {
    /// Bad arguments, an unusable suite dir or config, or an invalid handle:
    /// nothing was started. The message names what is wrong.
    BadArgs(String),
    /// The verb could not do its job: a pod did not start, a file could not
    /// be read or written, the pod could not be reached.
    Incomplete(String),
    /// The verb did its job and what it checked failed; the message says what.
    CheckFailed(String),
    /// The verb did its job and what it checked failed; its output has
    /// already said what, item by item.
    ChecksReported,
    /// A run that did not end green; its summary and `verdict.jsonl` say why.
    Run(RunFailure),
}

/// How a run that was not green ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunFailure {
    /// A phase failed: a test, a known issue, a leak, the teardown.
    Failed,
    /// The run could not complete: the pod, the build, the test command.
    Incomplete,
    /// Ctrl-C or SIGTERM; cleanup, the residue sweep and teardown still ran.
    Interrupted,
}

impl ExpectedError {
    /// A usage error: what is wrong with the arguments, and how to fix it.
    pub(crate) fn bad_args(message: impl fmt::Display) -> ExpectedError {
        ExpectedError::BadArgs(message.to_string())
    }

    /// The exit code this error ends the process with.
    pub(crate) fn process_exit_code(&self) -> u8 {
        match self {
            ExpectedError::BadArgs(_) => exit::BAD_ARGS,
            ExpectedError::Incomplete(_) => exit::INCOMPLETE,
            ExpectedError::CheckFailed(_) | ExpectedError::ChecksReported => exit::VERIFY_FAILED,
            ExpectedError::Run(RunFailure::Failed) => exit::VERIFY_FAILED,
            ExpectedError::Run(RunFailure::Incomplete) => exit::INCOMPLETE,
            ExpectedError::Run(RunFailure::Interrupted) => exit::INTERRUPTED,
        }
    }

    /// Prints what the user has not been told yet, if anything.
    pub(crate) fn display_to_stderr(&self) {
        match self {
            ExpectedError::BadArgs(message)
            | ExpectedError::Incomplete(message)
            | ExpectedError::CheckFailed(message) => eprintln!("testkit-runner: {message}"),
            ExpectedError::ChecksReported | ExpectedError::Run(_) => {}
        }
    }
}

/// The exit code of a verb's result.
pub(crate) fn exit_code(result: &Result<(), ExpectedError>) -> u8 {
    match result {
        Ok(()) => exit::OK,
        Err(e) => e.process_exit_code(),
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn each_error_maps_to_its_documented_exit_code() {
        let cases = [
            (ExpectedError::bad_args("x"), exit::BAD_ARGS),
            (ExpectedError::Incomplete("x".into()), exit::INCOMPLETE),
            (ExpectedError::CheckFailed("x".into()), exit::VERIFY_FAILED),
            (ExpectedError::ChecksReported, exit::VERIFY_FAILED),
            (ExpectedError::Run(RunFailure::Failed), exit::VERIFY_FAILED),
            (ExpectedError::Run(RunFailure::Incomplete), exit::INCOMPLETE),
            (
                ExpectedError::Run(RunFailure::Interrupted),
                exit::INTERRUPTED,
            ),
        ];
        for (error, code) in cases {
            assert_eq!(error.process_exit_code(), code, "{error:?}");
        }
        assert_eq!(exit_code(&Ok(())), exit::OK);
    }
}
