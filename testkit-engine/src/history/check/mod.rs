//! Checkers: pure functions from a [`HistorySnapshot`] to a verdict.
//!
//! | checker | operations | fails when |
//! | --- | --- | --- |
//! | [`Check::register`] | [`Op::Read`], [`Op::Write`], [`Op::Cas`] | the operations on some key have no linearization (Wing & Gong / Lowe search, keys checked apart) |
//! | [`Check::set`] | [`Op::Add`], [`Op::ReadSet`] | an acknowledged element is missing from the final read (lost), a read holds an element never added (unexpected), twice (duplicated), one whose add failed, or one before its add was invoked |
//! | [`Check::counter`] | [`Op::Incr`], [`Op::ReadCounter`] | a read lies outside the sum of the increments that must have happened and those that may have |
//! | [`Check::unique_ids`] | [`Op::NewId`] | two acknowledged ids are equal |
//!
//! A check is bounded in time ([`Check::within`], [`DEFAULT_BOUND`]):
//! running out is [`CheckError::Unknown`], as is a history that was
//! truncated or holds nothing to check. Unknown is a failure, never a pass.
//!
//! [`Op::Read`]: super::Op::Read
//! [`Op::Write`]: super::Op::Write
//! [`Op::Cas`]: super::Op::Cas
//! [`Op::Add`]: super::Op::Add
//! [`Op::ReadSet`]: super::Op::ReadSet
//! [`Op::Incr`]: super::Op::Incr
//! [`Op::ReadCounter`]: super::Op::ReadCounter
//! [`Op::NewId`]: super::Op::NewId

mod counter;
mod draw;
mod register;
mod set;
mod unique;

#[cfg(test)]
mod tests;

use std::fmt;
use std::time::{Duration, Instant};

pub use counter::{CounterAnomalies, CounterRead};
pub use draw::{Drawing, DrawnOp};
pub use register::NotLinearizable;
pub use set::SetAnomalies;
pub use unique::DuplicateIds;

use super::HistorySnapshot;

/// How long a check searches before it answers [`CheckError::Unknown`],
/// unless [`Check::within`] says otherwise.
pub const DEFAULT_BOUND: Duration = Duration::from_secs(10);

/// Which model a check holds the history to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Model {
    /// A linearizable read/write/compare-and-set register per key.
    Register,
    /// A set that adds and reads.
    Set,
    /// A counter that increments and reads.
    Counter,
    /// A source of unique ids.
    UniqueIds,
}

impl Model {
    /// The word messages use.
    pub fn as_str(self) -> &'static str {
        match self {
            Model::Register => "register",
            Model::Set => "set",
            Model::Counter => "counter",
            Model::UniqueIds => "unique-ids",
        }
    }
}

/// A check to run over a history: a model and a time bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    model: Model,
    bound: Duration,
}

impl Check {
    /// Each key a linearizable register of reads, writes and
    /// compare-and-sets, starting with no value ([`Value::Nil`]).
    ///
    /// [`Value::Nil`]: super::Value::Nil
    pub fn register() -> Check {
        Check::of(Model::Register)
    }
    /// A set: every acknowledged add is in the final read, and reads hold
    /// only what was added, once.
    pub fn set() -> Check {
        Check::of(Model::Set)
    }
    /// A counter whose every read lies within its bounds.
    pub fn counter() -> Check {
        Check::of(Model::Counter)
    }
    /// Ids that are never handed out twice.
    pub fn unique_ids() -> Check {
        Check::of(Model::UniqueIds)
    }
    fn of(model: Model) -> Check {
        Check {
            model,
            bound: DEFAULT_BOUND,
        }
    }

    /// Searches at most `bound` (and, when the history fails, as long
    /// again to shrink it to its smallest failing part).
    pub fn within(self, bound: Duration) -> Check {
        Check { bound, ..self }
    }

    /// The model.
    pub fn model(&self) -> Model {
        self.model
    }

    /// Runs the check over `history`.
    pub fn run(&self, history: &HistorySnapshot) -> Result<Checked, CheckError> {
        let checker = self.model.as_str();
        if history.dropped > 0 {
            return Err(CheckError::Unknown {
                checker,
                reason: UnknownReason::Truncated {
                    kept: history.ops.len(),
                    dropped: history.dropped,
                },
            });
        }
        let deadline = Deadline::after(self.bound);
        match self.model {
            Model::Register => register::check(history, deadline),
            Model::Set => set::check(history),
            Model::Counter => counter::check(history),
            Model::UniqueIds => unique::check(history),
        }
    }
}

/// When a search gives up.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    bound: Duration,
}

impl Deadline {
    pub(crate) fn after(bound: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + bound,
            bound,
        }
    }
    pub(crate) fn passed(&self) -> bool {
        Instant::now() >= self.at
    }
}

/// A check that passed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Checked {
    /// The model checked.
    pub model: Model,
    /// The operations of the model the check judged.
    pub ops: usize,
    /// The keys (registers), 1 for the other models.
    pub keys: usize,
}

impl fmt::Display for Checked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} check passed: {} operations",
            self.model.as_str(),
            self.ops
        )?;
        if self.model == Model::Register {
            let keys = if self.keys == 1 { "key" } else { "keys" };
            write!(f, " over {} {keys} are linearizable", self.keys)?;
        }
        Ok(())
    }
}

/// A check that did not pass: its Display is the test's failure message.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// The operations on one key have no linearization.
    #[error("{0}")]
    NotLinearizable(Box<NotLinearizable>),
    /// The set lost, invented or repeated elements.
    #[error("set check failed: {0}")]
    Set(Box<SetAnomalies>),
    /// Reads of the counter outside its bounds.
    #[error("counter check failed: {0}")]
    Counter(Box<CounterAnomalies>),
    /// The same id handed out twice.
    #[error("unique-ids check failed: {0}")]
    DuplicateIds(Box<DuplicateIds>),
    /// The check could not decide: no pass.
    #[error("{checker} check: unknown: {reason}")]
    Unknown {
        /// The model's word.
        checker: &'static str,
        /// Why it could not decide.
        reason: UnknownReason,
    },
    /// An operation of the model completed with a result the model cannot
    /// read.
    #[error("{checker} check: the history cannot be checked: {problem}")]
    Malformed {
        /// The model's word.
        checker: &'static str,
        /// What is wrong and how to mend it.
        problem: String,
    },
    /// The check itself panicked: a bug of the checker.
    #[error("{checker} check crashed: {problem}")]
    Crashed {
        /// The model's word.
        checker: &'static str,
        /// The panic.
        problem: String,
    },
}

/// Why a check could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnknownReason {
    /// The search ran out of its time bound.
    TimeBound {
        /// The bound.
        bound: Duration,
        /// The key being searched, for a register.
        key: Option<String>,
        /// Its operations.
        ops: usize,
    },
    /// The history hit its cap and dropped operations.
    Truncated {
        /// Operations kept.
        kept: usize,
        /// Operations dropped.
        dropped: u64,
    },
    /// The history holds no operation of the model.
    Empty {
        /// The operations the model reads.
        expected: &'static str,
    },
    /// A set check found no completed read: nothing says what the set holds.
    NoRead,
}

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnknownReason::TimeBound { bound, key, ops } => {
                write!(
                    f,
                    "the search ran out of its time bound ({})",
                    humantime::format_duration(*bound)
                )?;
                if let Some(key) = key {
                    write!(f, " on key {key:?} ({ops} operations)")?;
                }
                f.write_str("; record fewer concurrent or indeterminate operations per key, or give the check a longer bound with `.within(…)`")
            }
            UnknownReason::Truncated { kept, dropped } => write!(
                f,
                "the history is truncated: {dropped} operations past its cap of {kept} were dropped, \
                 and a check of what is left cannot pass; record fewer operations"
            ),
            UnknownReason::Empty { expected } => {
                write!(f, "the history holds no {expected} to check")
            }
            UnknownReason::NoRead => f.write_str(
                "no read of the set completed, so nothing says what it holds; end the test with a read",
            ),
        }
    }
}

/// At most this many items of a list in a message; the rest are counted.
const LISTED: usize = 10;

/// `items`, at most [`LISTED`] of them, then how many more.
pub(crate) fn list<T: fmt::Display>(items: &[T]) -> String {
    let mut text = items
        .iter()
        .take(LISTED)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > LISTED {
        text.push_str(&format!(" … {} more", items.len() - LISTED));
    }
    text
}
