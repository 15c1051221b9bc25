//! The set checker: adds, and reads of the whole set.
//!
//! The final read is the `ok` read that completed last. An element whose
//! add was acknowledged before the final read was invoked must be in it
//! (else it is lost). No read may hold an element nobody tried to add
//! (unexpected), one whose add certainly failed, one whose add was invoked
//! only after the read completed, or an element twice (duplicated). An
//! element whose add is indeterminate may be read or not.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

use super::{list, CheckError, Checked, Model, UnknownReason};
use crate::history::{HistorySnapshot, Op, Outcome, Value};

/// What a set check found wrong.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SetAnomalies {
    /// Acknowledged before the final read began, and not in it.
    pub lost: Vec<Value>,
    /// Read, and never added by anyone.
    pub unexpected: Vec<Value>,
    /// Twice or more in one read.
    pub duplicated: Vec<Value>,
    /// Read, though every add of it failed (was certainly not done).
    pub failed_but_read: Vec<Value>,
    /// Read by a read that completed before any add of it was invoked.
    pub read_before_add: Vec<Value>,
    /// Elements whose add was acknowledged.
    pub acknowledged: usize,
    /// Elements in the final read.
    pub final_read: usize,
}

impl SetAnomalies {
    fn is_empty(&self) -> bool {
        self.lost.is_empty()
            && self.unexpected.is_empty()
            && self.duplicated.is_empty()
            && self.failed_but_read.is_empty()
            && self.read_before_add.is_empty()
    }
}

impl fmt::Display for SetAnomalies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        for (what, items) in [
            ("lost (acknowledged, not in the final read)", &self.lost),
            ("unexpected (never added)", &self.unexpected),
            ("duplicated (twice in one read)", &self.duplicated),
            ("read though their add failed", &self.failed_but_read),
            ("read before their add was invoked", &self.read_before_add),
        ] {
            if !items.is_empty() {
                parts.push(format!("{} {what}: {}", items.len(), list(items)));
            }
        }
        write!(
            f,
            "{}; {} elements acknowledged, {} in the final read",
            parts.join("; "),
            self.acknowledged,
            self.final_read
        )
    }
}

pub(super) fn check(history: &HistorySnapshot) -> Result<Checked, CheckError> {
    let checker = Model::Set.as_str();
    // Per element: its adds' outcomes, its first invocation, its first
    // acknowledgement.
    #[derive(Default)]
    struct Adds {
        any_not_failed: bool,
        first_invoke: Option<u64>,
        first_ok: Option<u64>,
    }
    let mut adds: HashMap<&Value, Adds> = HashMap::new();
    let mut reads = Vec::new();
    let mut ops = 0;
    for (index, o) in history.ops.iter().enumerate() {
        match &o.op {
            Op::Add { element } => {
                ops += 1;
                let a = adds.entry(element).or_default();
                a.any_not_failed |= o.outcome != Outcome::Fail;
                a.first_invoke = Some(a.first_invoke.map_or(o.invoke_ns, |t| t.min(o.invoke_ns)));
                if o.outcome == Outcome::Ok {
                    let at = o.complete_ns.unwrap_or(u64::MAX);
                    a.first_ok = Some(a.first_ok.map_or(at, |t| t.min(at)));
                }
            }
            Op::ReadSet => {
                ops += 1;
                if o.outcome != Outcome::Ok {
                    continue;
                }
                let Value::List(items) = &o.result else {
                    return Err(CheckError::Malformed {
                        checker,
                        problem: format!(
                            "operation {index} (read set by client {}) completed ok with {}: complete a \
                             read of the set with ok(a list of its elements)",
                            o.client, o.result
                        ),
                    });
                };
                reads.push((o.invoke_ns, o.complete_ns.unwrap_or(u64::MAX), items));
            }
            _ => {}
        }
    }
    if ops == 0 {
        return Err(CheckError::Unknown {
            checker,
            reason: UnknownReason::Empty {
                expected: "set operations (Op::Add, Op::ReadSet)",
            },
        });
    }
    let Some(&(final_invoke, _, final_items)) = reads.iter().max_by_key(|r| r.1) else {
        return Err(CheckError::Unknown {
            checker,
            reason: UnknownReason::NoRead,
        });
    };
    let mut found = SetAnomalies {
        acknowledged: adds.values().filter(|a| a.first_ok.is_some()).count(),
        final_read: final_items.len(),
        ..SetAnomalies::default()
    };
    let in_final: BTreeSet<&Value> = final_items.iter().collect();
    let mut lost: Vec<&Value> = adds
        .iter()
        .filter(|(e, a)| a.first_ok.is_some_and(|t| t < final_invoke) && !in_final.contains(*e))
        .map(|(e, _)| *e)
        .collect();
    lost.sort();
    found.lost = lost.into_iter().cloned().collect();
    let (mut unexpected, mut duplicated, mut failed, mut early) = (
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
        BTreeSet::new(),
    );
    for &(_, completed, items) in &reads {
        let mut seen = BTreeSet::new();
        for e in items {
            if !seen.insert(e) {
                duplicated.insert(e);
            }
            match adds.get(e) {
                None => {
                    unexpected.insert(e);
                }
                Some(a) if !a.any_not_failed => {
                    failed.insert(e);
                }
                Some(a) if a.first_invoke.is_some_and(|t| t > completed) => {
                    early.insert(e);
                }
                Some(_) => {}
            }
        }
    }
    let owned = |s: BTreeSet<&Value>| s.into_iter().cloned().collect();
    found.unexpected = owned(unexpected);
    found.duplicated = owned(duplicated);
    found.failed_but_read = owned(failed);
    found.read_before_add = owned(early);
    if found.is_empty() {
        Ok(Checked {
            model: Model::Set,
            ops,
            keys: 1,
        })
    } else {
        Err(CheckError::Set(Box::new(found)))
    }
}
