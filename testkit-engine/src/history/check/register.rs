//! The register checker: every key a linearizable register of reads,
//! writes and compare-and-sets.
//!
//! Keys are independent registers, and linearizability is local
//! (P-compositionality): the history is linearizable when the history of
//! each key is, so each key is searched on its own, which keeps a search
//! small. A key's search is Wing & Gong's, with Lowe's memoization, as
//! Porcupine's `checkSingle` does it: the invoke and return events, in time
//! order, form a linked list; the search linearizes an operation whose
//! invocation comes before every remaining return (it lifts the
//! operation's two events out of the list), backtracks when the first
//! remaining event is a return, and never enters a (linearized set, state)
//! it has entered before.
//!
//! What each outcome says to the search:
//!
//! - `ok`: the operation took effect between its invocation and its return.
//! - `fail`: it took none; it is left out.
//! - `info`: it may have taken effect at any time after its invocation, or
//!   never. Its return is open: it stays pending to the end of the search,
//!   where linearizing it last is the same as it never having happened. An
//!   indeterminate read constrains nothing and is left out.
//! - a compare-and-set that completed `ok(false)` took no effect and says
//!   the register did not hold its `from`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;

use super::{CheckError, Checked, Deadline, Drawing, Model, UnknownReason};
use crate::history::{HistorySnapshot, Op, Operation, Outcome, Value};

/// A register's value, interned per key: 0 is [`Value::Nil`].
type State = u32;

/// What an operation does to the register.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Reads this value.
    Read(State),
    /// Writes this value.
    Write(State),
    /// Swapped `from` for `to`.
    CasOk { from: State, to: State },
    /// Answered that the register did not hold `from`.
    CasMismatch { from: State },
    /// Indeterminate: swapped if the register held `from`, or did nothing.
    CasMaybe { from: State, to: State },
}

impl Step {
    /// The state after this step from `state`, or `None` when the step
    /// cannot happen there.
    pub(super) fn apply(self, state: State) -> Option<State> {
        match self {
            Step::Read(v) => (state == v).then_some(state),
            Step::Write(v) => Some(v),
            Step::CasOk { from, to } => (state == from).then_some(to),
            Step::CasMismatch { from } => (state != from).then_some(state),
            Step::CasMaybe { from, to } => Some(if state == from { to } else { state }),
        }
    }

    /// The value this step needs some write to have written.
    fn observes(self) -> Option<State> {
        match self {
            Step::Read(v) | Step::CasOk { from: v, .. } => (v != 0).then_some(v),
            _ => None,
        }
    }

    /// The value this step may write.
    fn writes(self) -> Option<State> {
        match self {
            Step::Write(v) | Step::CasOk { to: v, .. } | Step::CasMaybe { to: v, .. } => Some(v),
            _ => None,
        }
    }
}

/// One operation of a key, as the search sees it.
#[derive(Debug, Clone, Copy)]
pub(super) struct RegOp {
    /// Its index in the history.
    pub(super) index: usize,
    pub(super) step: Step,
    pub(super) call: u64,
    /// `u64::MAX`: open (indeterminate).
    pub(super) ret: u64,
}

/// The operations on one key.
struct Key {
    ops: Vec<RegOp>,
    values: Vec<Value>,
}

/// What a search found.
#[derive(Debug)]
pub(super) enum Search {
    Linearizable,
    /// No linearization: the longest legal order found (positions in the
    /// searched slice), the state after it, and the operation that could
    /// not come next.
    Stuck {
        order: Vec<usize>,
        state: State,
        blocking: usize,
    },
    OutOfTime,
}

/// The key history is not linearizable: the smallest part of it found that
/// is not, with a drawing.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NotLinearizable {
    /// The key.
    pub key: String,
    /// How many of its operations were checked.
    pub key_ops: usize,
    /// The smallest sub-history found that cannot be linearized, its
    /// operations' indices in the history, in order of invocation.
    pub indices: Vec<usize>,
    /// Whether shrinking it ran to its end (else it ran out of its bound,
    /// and a smaller failing part may exist).
    pub minimal: bool,
    /// The longest legal order of the sub-history's operations the search
    /// found, as indices in the history.
    pub longest_order: Vec<usize>,
    /// What the register holds after that order.
    pub state: Value,
    /// The operation that cannot come next: the conflict (absent when the
    /// search for it ran out of time).
    pub conflict: Option<usize>,
    /// The sub-history, drawn.
    pub drawing: Drawing,
}

impl fmt::Display for NotLinearizable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let number = |index: usize| {
            self.drawing
                .ops
                .iter()
                .find(|o| o.index == index)
                .map_or_else(|| format!("op {index}"), |o| format!("#{}", o.number))
        };
        writeln!(
            f,
            "register check failed: key {:?} is not linearizable: {} of its {} operations have no legal order{}:",
            self.key,
            self.indices.len(),
            self.key_ops,
            if self.minimal { "" } else { " (shrinking ran out of time; a smaller part may fail too)" }
        )?;
        writeln!(f)?;
        f.write_str(&self.drawing.render())?;
        writeln!(f)?;
        let Some(conflict) = self.conflict else {
            return f.write_str("the search for the longest legal order ran out of time");
        };
        let order: Vec<String> = self.longest_order.iter().map(|&i| number(i)).collect();
        if order.is_empty() {
            write!(f, "no operation can come first")?;
        } else {
            write!(f, "the longest legal order is {}", order.join(", "))?;
        }
        write!(
            f,
            ", after which the register holds {}, and {} cannot come next",
            self.state,
            number(conflict)
        )
    }
}

pub(super) fn check(history: &HistorySnapshot, deadline: Deadline) -> Result<Checked, CheckError> {
    let keys = keys(history)?;
    let total: usize = keys.values().map(|k| k.ops.len()).sum();
    if total == 0 {
        return Err(CheckError::Unknown {
            checker: Model::Register.as_str(),
            reason: UnknownReason::Empty {
                expected: "completed register operations (Op::Read, Op::Write, Op::Cas)",
            },
        });
    }
    for (name, key) in &keys {
        match search(&key.ops, &deadline) {
            Search::Linearizable => {}
            Search::OutOfTime => {
                return Err(CheckError::Unknown {
                    checker: Model::Register.as_str(),
                    reason: UnknownReason::TimeBound {
                        bound: deadline.bound,
                        key: Some(name.clone()),
                        ops: key.ops.len(),
                    },
                })
            }
            Search::Stuck { .. } => {
                return Err(CheckError::NotLinearizable(Box::new(explain(
                    history,
                    name,
                    key,
                    Deadline::after(deadline.bound),
                ))))
            }
        }
    }
    Ok(Checked {
        model: Model::Register,
        ops: total,
        keys: keys.len(),
    })
}

/// The history's register operations by key, as the search sees them.
fn keys(history: &HistorySnapshot) -> Result<BTreeMap<String, Key>, CheckError> {
    let mut keys: BTreeMap<String, Key> = BTreeMap::new();
    let mut interned: HashMap<String, HashMap<Value, State>> = HashMap::new();
    for (index, o) in history.ops.iter().enumerate() {
        let Some(name) = o.op.key() else { continue };
        if o.outcome == Outcome::Fail {
            continue;
        }
        let key = keys.entry(name.to_owned()).or_insert_with(|| Key {
            ops: Vec::new(),
            values: vec![Value::Nil],
        });
        let ids = interned.entry(name.to_owned()).or_default();
        let mut intern = |v: &Value| -> State {
            if *v == Value::Nil {
                return 0;
            }
            *ids.entry(v.clone()).or_insert_with(|| {
                key.values.push(v.clone());
                (key.values.len() - 1) as State
            })
        };
        let ok = o.outcome == Outcome::Ok;
        let step = match (&o.op, ok) {
            (Op::Read { .. }, true) => Step::Read(intern(&o.result)),
            (Op::Read { .. }, false) => continue,
            (Op::Write { value, .. }, _) => Step::Write(intern(value)),
            (Op::Cas { from, to, .. }, false) => Step::CasMaybe {
                from: intern(from),
                to: intern(to),
            },
            (Op::Cas { from, to, .. }, true) => match o.result {
                Value::Bool(true) => Step::CasOk {
                    from: intern(from),
                    to: intern(to),
                },
                Value::Bool(false) => Step::CasMismatch { from: intern(from) },
                ref other => {
                    return Err(CheckError::Malformed {
                        checker: Model::Register.as_str(),
                        problem: format!(
                            "operation {index} ({} by client {}) completed ok with {other}: complete a cas \
                             with ok(true) when it swapped and ok(false) when the register did not hold \
                             the expected value",
                            o.op, o.client
                        ),
                    })
                }
            },
            _ => continue,
        };
        let ret = match (ok, o.complete_ns) {
            (true, Some(at)) => at,
            _ => u64::MAX,
        };
        key.ops.push(RegOp {
            index,
            step,
            call: o.invoke_ns,
            ret,
        });
    }
    Ok(keys)
}

const HEAD: usize = 0;
const NIL: usize = usize::MAX;

/// Searches for a linearization of `ops` (Wing & Gong, with Lowe's cache of
/// (linearized set, state)).
pub(super) fn search(ops: &[RegOp], deadline: &Deadline) -> Search {
    let n = ops.len();
    // Events in time order; at equal times invocations come first, so that
    // operations that touch are concurrent, not ordered.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * n);
    for (i, op) in ops.iter().enumerate() {
        events.push((op.call, false, i));
        events.push((op.ret, true, i));
    }
    events.sort_unstable_by_key(|&(at, is_return, i)| (at, is_return, i));
    // Node 0 is the head; node k + 1 is event k.
    let nodes = events.len() + 1;
    let mut next = vec![NIL; nodes];
    let mut prev = vec![NIL; nodes];
    let mut node_op = vec![0usize; nodes];
    let mut is_call = vec![false; nodes];
    let mut ret_of = vec![NIL; n];
    let mut matching = vec![NIL; nodes];
    for (k, &(_, is_return, i)) in events.iter().enumerate() {
        let node = k + 1;
        prev[node] = k;
        next[k] = node;
        node_op[node] = i;
        is_call[node] = !is_return;
        if is_return {
            ret_of[i] = node;
        }
    }
    for node in 1..nodes {
        if is_call[node] {
            matching[node] = ret_of[node_op[node]];
        }
    }
    let lift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, call: usize| {
        let ret = matching[call];
        next[prev[call]] = next[call];
        if next[call] != NIL {
            prev[next[call]] = prev[call];
        }
        next[prev[ret]] = next[ret];
        if next[ret] != NIL {
            prev[next[ret]] = prev[ret];
        }
    };
    let unlift = |next: &mut Vec<usize>, prev: &mut Vec<usize>, call: usize| {
        let ret = matching[call];
        next[prev[ret]] = ret;
        if next[ret] != NIL {
            prev[next[ret]] = ret;
        }
        next[prev[call]] = call;
        prev[next[call]] = call;
    };

    let words = n.div_ceil(64).max(1);
    let mut linearized = vec![0u64; words];
    let mut cache: HashSet<(Vec<u64>, State)> = HashSet::new();
    let mut calls: Vec<(usize, State)> = Vec::new();
    let mut state: State = 0;
    let mut best: Option<(Vec<usize>, State, usize)> = None;
    let mut entry = next[HEAD];
    let mut steps: u64 = 0;
    while next[HEAD] != NIL {
        steps += 1;
        if steps & 1023 == 0 && deadline.passed() {
            return Search::OutOfTime;
        }
        if is_call[entry] {
            let op = node_op[entry];
            if let Some(new_state) = ops[op].step.apply(state) {
                let mut with = linearized.clone();
                with[op / 64] |= 1 << (op % 64);
                if cache.insert((with, new_state)) {
                    calls.push((entry, state));
                    state = new_state;
                    linearized[op / 64] |= 1 << (op % 64);
                    lift(&mut next, &mut prev, entry);
                    entry = next[HEAD];
                    continue;
                }
            }
            entry = next[entry];
        } else {
            // The first remaining return: that operation must come next,
            // and nothing before it could.
            if best.as_ref().is_none_or(|b| calls.len() > b.0.len()) {
                let order = calls.iter().map(|&(c, _)| node_op[c]).collect();
                best = Some((order, state, node_op[entry]));
            }
            let Some((call, before)) = calls.pop() else {
                let (order, state, blocking) = best.unwrap_or((Vec::new(), 0, node_op[entry]));
                return Search::Stuck {
                    order,
                    state,
                    blocking,
                };
            };
            state = before;
            let op = node_op[call];
            linearized[op / 64] &= !(1 << (op % 64));
            unlift(&mut next, &mut prev, call);
            entry = next[call];
        }
    }
    Search::Linearizable
}

/// The smallest part of `key`'s operations that still has no linearization
/// (shrunk greedily within `deadline`), explained and drawn.
fn explain(
    history: &HistorySnapshot,
    name: &str,
    key: &Key,
    deadline: Deadline,
) -> NotLinearizable {
    let (kept, minimal) = shrink(&key.ops, &deadline);
    let sub: Vec<RegOp> = kept.iter().map(|&i| key.ops[i]).collect();
    // Searched once more for the longest legal order and the conflict:
    // the part was searched to its end before, unless shrinking ran out of
    // time, and then this search may too.
    let stuck = match search(&sub, &Deadline::after(deadline.bound)) {
        Search::Stuck {
            order,
            state,
            blocking,
        } => Some((order, state, blocking)),
        Search::Linearizable | Search::OutOfTime => None,
    };
    let mut indices: Vec<usize> = sub.iter().map(|o| o.index).collect();
    indices.sort_unstable();
    let conflict = stuck.as_ref().map(|&(_, _, blocking)| sub[blocking].index);
    let drawn: Vec<(usize, &Operation)> = indices.iter().map(|&i| (i, &history.ops[i])).collect();
    NotLinearizable {
        key: name.to_owned(),
        key_ops: key.ops.len(),
        drawing: Drawing::of(&drawn, conflict),
        indices,
        minimal,
        longest_order: stuck
            .as_ref()
            .map(|(order, _, _)| order.iter().map(|&i| sub[i].index).collect())
            .unwrap_or_default(),
        state: stuck.as_ref().map_or(Value::Nil, |&(_, state, _)| {
            key.values[state as usize].clone()
        }),
        conflict,
    }
}

/// Removes operations from `ops` while what is left still has no
/// linearization: chunks of half, then a quarter, … then one operation.
/// A removal must not leave a read of a value whose every write it removed
/// (that would be a different anomaly from the one found). Returns the
/// positions kept, and whether shrinking ran to its end within `deadline`.
fn shrink(ops: &[RegOp], deadline: &Deadline) -> (Vec<usize>, bool) {
    let written: HashSet<State> = ops.iter().filter_map(|o| o.step.writes()).collect();
    let closed = |kept: &[usize]| {
        let writes: HashSet<State> = kept.iter().filter_map(|&i| ops[i].step.writes()).collect();
        kept.iter()
            .filter_map(|&i| ops[i].step.observes())
            .all(|v| !written.contains(&v) || writes.contains(&v))
    };
    let fails = |kept: &[usize]| {
        let sub: Vec<RegOp> = kept.iter().map(|&i| ops[i]).collect();
        matches!(search(&sub, deadline), Search::Stuck { .. })
    };
    let mut kept: Vec<usize> = (0..ops.len()).collect();
    let mut chunk = (kept.len() / 2).max(1);
    loop {
        let mut at = 0;
        let mut removed = false;
        while at < kept.len() {
            if deadline.passed() {
                return (kept, false);
            }
            let end = (at + chunk).min(kept.len());
            let candidate: Vec<usize> = kept[..at].iter().chain(&kept[end..]).copied().collect();
            if !candidate.is_empty() && closed(&candidate) && fails(&candidate) {
                kept = candidate;
                removed = true;
            } else {
                at = end;
            }
        }
        // One at a time, until nothing more goes: a write can go only once
        // the reads of its value have gone, which may come later in a pass.
        if chunk == 1 && !removed {
            return (kept, true);
        }
        chunk = (chunk / 2).max(1);
    }
}
