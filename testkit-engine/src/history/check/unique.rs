//! The unique-ids checker: no two acknowledged ids are equal.

use std::collections::BTreeMap;
use std::fmt;

use super::{CheckError, Checked, Model, UnknownReason};
use crate::history::{HistorySnapshot, Op, Outcome, Value};

/// Ids handed out more than once.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DuplicateIds {
    /// Each id handed out more than once, with the indices of the
    /// operations that got it.
    pub ids: Vec<(Value, Vec<usize>)>,
    /// The ids acknowledged.
    pub acknowledged: usize,
}

impl fmt::Display for DuplicateIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let each: Vec<String> = self
            .ids
            .iter()
            .map(|(id, ops)| {
                let ops: Vec<String> = ops.iter().map(|i| i.to_string()).collect();
                format!("{id} (operations {})", ops.join(", "))
            })
            .collect();
        write!(
            f,
            "{} of {} ids handed out more than once: {}",
            self.ids.len(),
            self.acknowledged,
            super::list(&each)
        )
    }
}

pub(super) fn check(history: &HistorySnapshot) -> Result<Checked, CheckError> {
    let mut by_id: BTreeMap<&Value, Vec<usize>> = BTreeMap::new();
    let mut ops = 0;
    let mut acknowledged = 0;
    for (index, o) in history.ops.iter().enumerate() {
        if o.op != Op::NewId {
            continue;
        }
        ops += 1;
        if o.outcome == Outcome::Ok {
            acknowledged += 1;
            by_id.entry(&o.result).or_default().push(index);
        }
    }
    if ops == 0 {
        return Err(CheckError::Unknown {
            checker: Model::UniqueIds.as_str(),
            reason: UnknownReason::Empty {
                expected: "id operations (Op::NewId)",
            },
        });
    }
    let ids: Vec<(Value, Vec<usize>)> = by_id
        .into_iter()
        .filter(|(_, ops)| ops.len() > 1)
        .map(|(id, ops)| (id.clone(), ops))
        .collect();
    if ids.is_empty() {
        Ok(Checked {
            model: Model::UniqueIds,
            ops,
            keys: 1,
        })
    } else {
        Err(CheckError::DuplicateIds(Box::new(DuplicateIds {
            ids,
            acknowledged,
        })))
    }
}
