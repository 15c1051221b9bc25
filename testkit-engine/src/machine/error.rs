//! What can go wrong with a machine: one variant per operation, each with
//! the context a reader needs and its cause in `#[source]`.

use std::path::PathBuf;
use std::time::Duration;

/// Why building, booting, driving or ending a machine failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MachineError {
    /// A program the machine needs is not installed.
    #[error("`{program}` is not installed (needed to {purpose}): install Debian's `{package}`")]
    Missing {
        /// The program looked for on PATH.
        program: &'static str,
        /// What it is for.
        purpose: &'static str,
        /// The Debian package that brings it.
        package: &'static str,
    },
    /// An image name that no recipe has.
    #[error("unknown machine image {name:?}; expected one of: {known}")]
    UnknownImage {
        /// The name given.
        name: String,
        /// The names there are.
        known: String,
    },
    /// A file or directory operation failed.
    #[error("failed to {what} {}", path.display())]
    Io {
        /// What was being done (`create`, `read`, ...).
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A command of an image build or of a boot failed.
    #[error("`{command}` failed ({status}): {output}")]
    Command {
        /// The command, shortened.
        command: String,
        /// How it ended.
        status: String,
        /// The end of what it printed.
        output: String,
    },
    /// A command ran longer than it may.
    #[error("`{command}` did not finish within {limit:?}; it was killed")]
    CommandTimeout {
        /// The command, shortened.
        command: String,
        /// Its bound.
        limit: Duration,
    },
    /// QEMU ended before the guest was up.
    #[error("QEMU exited ({status}) before the guest was up; console: {console_tail}")]
    QemuExited {
        /// Its exit status.
        status: String,
        /// The end of the guest's console.
        console_tail: String,
    },
    /// The guest agent did not answer within the boot bound.
    #[error(
        "the guest was not up after {waited:?} (no answer from its agent); console: {console_tail}"
    )]
    BootTimeout {
        /// How long it was given.
        waited: Duration,
        /// The end of the guest's console.
        console_tail: String,
    },
    /// QEMU's monitor (QMP) refused a command or could not be reached.
    #[error("QEMU's monitor: {command}: {problem}")]
    Qmp {
        /// The command.
        command: String,
        /// Its error class and description, or what broke.
        problem: String,
    },
    /// The guest agent refused a command or could not be reached.
    #[error("the guest agent: {command}: {problem}")]
    Agent {
        /// The command.
        command: String,
        /// Its error, or what broke.
        problem: String,
    },
    /// A command run in the guest did not finish within its bound.
    #[error("`{command}` in the guest did not finish within {limit:?}")]
    GuestTimeout {
        /// The command.
        command: String,
        /// Its bound.
        limit: Duration,
    },
    /// A guest port that the machine does not forward.
    #[error("guest port {0} is not forwarded: list it in the machine's ports")]
    PortNotForwarded(u16),
    /// A path too long for a unix socket (108 bytes).
    #[error("the machine's run directory {} is too deep for its sockets (at most 100 bytes): give a shorter parent", path.display())]
    PathTooLong {
        /// The run directory.
        path: PathBuf,
    },
    /// Ending the machine left something behind.
    #[error("the machine did not end cleanly: {0}")]
    Survived(String),
    /// A boot failed, and ending what it had made failed too.
    #[error("{boot}; and ending the failed boot left something: {left}")]
    BootNotEnded {
        /// Why the boot failed.
        #[source]
        boot: Box<MachineError>,
        /// What ending it left.
        left: Box<MachineError>,
    },
    /// A guest file larger than a read may take.
    #[error("{path} in the guest is larger than {max} bytes: a handle field is a short value")]
    GuestFileTooLarge {
        /// The file in the guest.
        path: String,
        /// The bound.
        max: usize,
    },
}

impl MachineError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> MachineError {
        let path = path.into();
        move |source| MachineError::Io { what, path, source }
    }
}
