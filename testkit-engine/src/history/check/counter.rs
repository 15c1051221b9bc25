//! The counter checker: increments, and reads of the counter.
//!
//! A read must lie between what the increments that certainly happened
//! before it sum to, and that plus every increment that may have: the
//! increments acknowledged before the read was invoked must be in it; those
//! invoked before it completed, acknowledged or indeterminate, may be.
//! Failed increments are left out.

use std::fmt;

use super::{CheckError, Checked, Model, UnknownReason};
use crate::history::{HistorySnapshot, Op, Outcome, Value};

/// A read of the counter outside its bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterRead {
    /// Its index in the history.
    pub index: usize,
    /// The client that read.
    pub client: u32,
    /// What it read.
    pub value: i64,
    /// The least it could have read.
    pub lower: i64,
    /// The most it could have read.
    pub upper: i64,
}

impl fmt::Display for CounterRead {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "operation {} (client {}) read {}, outside {}..={}",
            self.index, self.client, self.value, self.lower, self.upper
        )
    }
}

/// What a counter check found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterAnomalies {
    /// The reads out of bounds, in order of invocation.
    pub reads: Vec<CounterRead>,
    /// The reads checked.
    pub checked: usize,
}

impl fmt::Display for CounterAnomalies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} reads out of bounds: {}",
            self.reads.len(),
            self.checked,
            super::list(&self.reads)
        )
    }
}

pub(super) fn check(history: &HistorySnapshot) -> Result<Checked, CheckError> {
    let checker = Model::Counter.as_str();
    let mut incrs = Vec::new();
    let mut reads = Vec::new();
    let mut ops = 0;
    for (index, o) in history.ops.iter().enumerate() {
        match (&o.op, o.outcome) {
            (Op::Incr { .. }, Outcome::Fail) | (Op::ReadCounter, Outcome::Fail | Outcome::Info) => {
                ops += 1
            }
            (Op::Incr { by }, outcome) => {
                ops += 1;
                // An indeterminate increment completes, for the bounds, never.
                let done = match outcome {
                    Outcome::Ok => o.complete_ns.unwrap_or(u64::MAX),
                    _ => u64::MAX,
                };
                incrs.push((o.invoke_ns, done, *by));
            }
            (Op::ReadCounter, Outcome::Ok) => {
                ops += 1;
                let Value::Int(value) = o.result else {
                    return Err(CheckError::Malformed {
                        checker,
                        problem: format!(
                            "operation {index} (read counter by client {}) completed ok with {}: \
                             complete a read of the counter with ok(an integer)",
                            o.client, o.result
                        ),
                    });
                };
                reads.push((index, o, value));
            }
            _ => {}
        }
    }
    if ops == 0 {
        return Err(CheckError::Unknown {
            checker,
            reason: UnknownReason::Empty {
                expected: "counter operations (Op::Incr, Op::ReadCounter)",
            },
        });
    }
    let mut out = Vec::new();
    for &(index, o, value) in &reads {
        let (invoked, completed) = (o.invoke_ns, o.complete_ns.unwrap_or(u64::MAX));
        let (mut lower, mut upper) = (0i64, 0i64);
        for &(call, done, by) in &incrs {
            if done < invoked {
                lower = lower.saturating_add(by);
                upper = upper.saturating_add(by);
            } else if call < completed {
                lower = lower.saturating_add(by.min(0));
                upper = upper.saturating_add(by.max(0));
            }
        }
        if value < lower || value > upper {
            out.push(CounterRead {
                index,
                client: o.client,
                value,
                lower,
                upper,
            });
        }
    }
    if out.is_empty() {
        Ok(Checked {
            model: Model::Counter,
            ops,
            keys: 1,
        })
    } else {
        Err(CheckError::Counter(Box::new(CounterAnomalies {
            reads: out,
            checked: reads.len(),
        })))
    }
}
