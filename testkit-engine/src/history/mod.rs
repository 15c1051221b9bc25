//! Histories: the operations a test's clients perform against the service,
//! recorded as they happen, and the checkers that judge them ([`check`]).
//!
//! A client [invokes](History::invoke) an operation before it sends the
//! request and completes it when the answer is in: [`ok`](PendingOp::ok)
//! with what it returned, [`fail`](PendingOp::fail) when it certainly had no
//! effect, [`info`](PendingOp::info) when nobody knows (a timeout, a dropped
//! connection). An operation handle dropped without completion is `info`:
//! a client that gave up on an answer cannot claim the request did nothing.
//!
//! Each operation carries the client (process) that performed it, a
//! monotonic timestamp of its invocation and completion (nanoseconds from
//! the history's start), and the operation with its arguments. A history
//! keeps at most its cap of operations ([`MAX_OPS`] by default) and counts
//! the ones it dropped; a check over a truncated history is unknown, never
//! a pass.
//!
//! The file format, `history.json` beside a test's trace, is
//! [`HistorySnapshot`], `version` 1.

pub mod check;

use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::{Deserialize, Serialize};

/// The most operations a history keeps by default; later invocations are
/// counted in [`HistorySnapshot::dropped`].
pub const MAX_OPS: usize = 100_000;

/// The history file's name in a test's artifacts folder.
pub const FILE_NAME: &str = "history.json";

/// A value an operation carries or returns. In JSON: `null`, a boolean, a
/// number, a string or an array.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// Nothing: a key that holds no value, an operation that returns none.
    #[default]
    Nil,
    /// A boolean: whether a compare-and-set swapped.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A text.
    Text(String),
    /// A list: what a read of a set returned.
    List(Vec<Value>),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Nil => f.write_str("nil"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Text(s) => write!(f, "{s:?}"),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl From<()> for Value {
    fn from(_: ()) -> Value {
        Value::Nil
    }
}
impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}
impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}
impl From<i32> for Value {
    fn from(n: i32) -> Value {
        Value::Int(n.into())
    }
}
impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Int(n.into())
    }
}
impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Text(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Text(s)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Nil, Into::into)
    }
}
impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(items: Vec<T>) -> Value {
        Value::List(items.into_iter().map(Into::into).collect())
    }
}

/// An operation a client performs, with its arguments. Each belongs to one
/// model, the checker that judges it: a register per key ([`Op::Read`],
/// [`Op::Write`], [`Op::Cas`]), a set ([`Op::Add`], [`Op::ReadSet`]), a
/// counter ([`Op::Incr`], [`Op::ReadCounter`]) or unique ids ([`Op::NewId`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Op {
    /// Reads the register `key`; `ok` with the value read ([`Value::Nil`]
    /// when the key holds none).
    Read {
        /// The register.
        key: String,
    },
    /// Writes `value` to the register `key`; `ok` with nothing.
    Write {
        /// The register.
        key: String,
        /// What is written.
        value: Value,
    },
    /// Sets the register `key` to `to` if it holds `from`: `ok(true)` when
    /// it swapped, `ok(false)` when the service answered that the register
    /// did not hold `from`; `fail` when it certainly did nothing.
    Cas {
        /// The register.
        key: String,
        /// What the register must hold.
        from: Value,
        /// What it is set to.
        to: Value,
    },
    /// Adds `element` to the set; `ok` with nothing.
    Add {
        /// The element.
        element: Value,
    },
    /// Reads the whole set; `ok` with a [`Value::List`] of its elements.
    ReadSet,
    /// Adds `by` to the counter; `ok` with nothing.
    Incr {
        /// The increment (negative to decrement).
        by: i64,
    },
    /// Reads the counter; `ok` with a [`Value::Int`].
    ReadCounter,
    /// Asks for a new id; `ok` with the id.
    NewId,
}

impl Op {
    /// A read of the register `key`.
    pub fn read(key: impl Into<String>) -> Op {
        Op::Read { key: key.into() }
    }
    /// A write of `value` to the register `key`.
    pub fn write(key: impl Into<String>, value: impl Into<Value>) -> Op {
        Op::Write {
            key: key.into(),
            value: value.into(),
        }
    }
    /// A compare-and-set of the register `key` from `from` to `to`.
    pub fn cas(key: impl Into<String>, from: impl Into<Value>, to: impl Into<Value>) -> Op {
        Op::Cas {
            key: key.into(),
            from: from.into(),
            to: to.into(),
        }
    }
    /// An add of `element` to the set.
    pub fn add(element: impl Into<Value>) -> Op {
        Op::Add {
            element: element.into(),
        }
    }
    /// An increment of the counter by `by`.
    pub fn incr(by: i64) -> Op {
        Op::Incr { by }
    }

    /// The register this operation is on, for a register operation.
    pub fn key(&self) -> Option<&str> {
        match self {
            Op::Read { key } | Op::Write { key, .. } | Op::Cas { key, .. } => Some(key),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Read { key } => write!(f, "read {key}"),
            Op::Write { key, value } => write!(f, "write {key} {value}"),
            Op::Cas { key, from, to } => write!(f, "cas {key} {from}→{to}"),
            Op::Add { element } => write!(f, "add {element}"),
            Op::ReadSet => f.write_str("read set"),
            Op::Incr { by } => write!(f, "incr {by}"),
            Op::ReadCounter => f.write_str("read counter"),
            Op::NewId => f.write_str("new id"),
        }
    }
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It took effect, and returned its result.
    Ok,
    /// It certainly took no effect.
    Fail,
    /// Nobody knows whether it took effect (a timeout, a dropped
    /// connection, a handle dropped without completion, an operation still
    /// open when the history was read).
    Info,
}

impl Outcome {
    /// The word the history file and the drawings use.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fail => "fail",
            Outcome::Info => "info",
        }
    }
}

/// One recorded operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    /// The client (process) that performed it: a client performs one
    /// operation at a time.
    pub client: u32,
    /// What it was.
    pub op: Op,
    /// When it was invoked, in nanoseconds from the history's start (a
    /// monotonic clock).
    pub invoke_ns: u64,
    /// When it completed; absent when it never did (an `info` operation
    /// still open when the history was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete_ns: Option<u64>,
    /// How it ended.
    pub outcome: Outcome,
    /// What it returned, for an `ok` operation.
    #[serde(default, skip_serializing_if = "is_nil")]
    pub result: Value,
}

fn is_nil(v: &Value) -> bool {
    *v == Value::Nil
}

impl Operation {
    /// The operation with its result, as a drawing labels it: `read x → 2`.
    pub fn label(&self) -> String {
        match (&self.op, self.outcome) {
            (Op::Read { .. } | Op::ReadSet | Op::ReadCounter | Op::NewId, Outcome::Ok) => {
                format!("{} → {}", self.op, self.result)
            }
            (Op::Cas { .. }, Outcome::Ok) => format!("{} → {}", self.op, self.result),
            _ => self.op.to_string(),
        }
    }
}

/// A history as it is written to [`FILE_NAME`], and what checkers read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistorySnapshot {
    /// The file format: 1.
    pub version: u32,
    /// The test's full name.
    pub test: String,
    /// Operations in the order they were invoked.
    pub ops: Vec<Operation>,
    /// Operations invoked past the history's cap, not kept.
    #[serde(default)]
    pub dropped: u64,
    /// The checks of it that found it not linearizable, each with its
    /// smallest failing part drawn: what a report draws as lanes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_checks: Vec<FailedCheck>,
}

/// A check that found the history wrong, as the report draws it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FailedCheck {
    /// What failed, in words: `key "x" is not linearizable`.
    pub what: String,
    /// The smallest sub-history that cannot be linearized.
    pub drawing: check::Drawing,
}

impl FailedCheck {
    /// What a register check that found `found` leaves for the report.
    pub fn of(found: &check::NotLinearizable) -> FailedCheck {
        FailedCheck {
            what: format!("key {:?} is not linearizable", found.key),
            drawing: found.drawing.clone(),
        }
    }
}

impl HistorySnapshot {
    /// A history of `ops`, nothing dropped: for checking a history built by
    /// hand or read from elsewhere.
    pub fn new(test: &str, ops: Vec<Operation>) -> HistorySnapshot {
        HistorySnapshot {
            version: 1,
            test: test.to_owned(),
            ops,
            dropped: 0,
            failed_checks: Vec::new(),
        }
    }

    /// Writes the history as JSON to `path`, every registered secret
    /// redacted.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        let json = serde_json::to_string(self).map_err(std::io::Error::other)?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, crate::redact::redact(&json).as_bytes())
    }

    /// Reads a history file.
    pub fn read(path: &Path) -> Result<HistorySnapshot, crate::json::ReadJsonError> {
        crate::json::read_json(path, "history")
    }
}

/// A test's history, being recorded: cheap to clone, so that each client
/// task holds its own handle.
#[derive(Clone)]
pub struct History {
    inner: Arc<Inner>,
}

struct Inner {
    test: String,
    start: Instant,
    cap: usize,
    ops: Mutex<Vec<Slot>>,
    dropped: AtomicU64,
    /// The checks that found it not linearizable, for the record.
    failed: Mutex<Vec<FailedCheck>>,
}

/// An operation as it is kept while the history is recorded: `outcome` is
/// `None` while it is open.
struct Slot {
    client: u32,
    op: Op,
    invoke_ns: u64,
    complete_ns: u64,
    outcome: Option<Outcome>,
    result: Value,
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("History")
            .field("test", &self.inner.test)
            .field("ops", &self.len())
            .finish_non_exhaustive()
    }
}

impl History {
    /// An empty history of the test `test`, its clock starting now, keeping
    /// at most [`MAX_OPS`] operations.
    pub fn new(test: &str) -> History {
        History::with_cap(test, MAX_OPS)
    }

    /// An empty history that keeps at most `cap` operations.
    pub fn with_cap(test: &str, cap: usize) -> History {
        History {
            inner: Arc::new(Inner {
                test: test.to_owned(),
                start: Instant::now(),
                cap,
                ops: Mutex::new(Vec::new()),
                dropped: AtomicU64::new(0),
                failed: Mutex::new(Vec::new()),
            }),
        }
    }

    fn now_ns(&self) -> u64 {
        self.inner.start.elapsed().as_nanos() as u64
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, Vec<Slot>> {
        self.inner.ops.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `client` invokes `op`, now: call it before the request
    /// is sent, and complete the handle when its answer is in.
    pub fn invoke(&self, client: u32, op: Op) -> PendingOp {
        let mut slots = self.slots();
        // Read under the lock: the order of the slots is the order of the
        // invocations' timestamps.
        let invoke_ns = self.now_ns();
        let index = if slots.len() < self.inner.cap {
            slots.push(Slot {
                client,
                op,
                invoke_ns,
                complete_ns: 0,
                outcome: None,
                result: Value::Nil,
            });
            Some(slots.len() - 1)
        } else {
            self.inner.dropped.fetch_add(1, Ordering::Relaxed);
            None
        };
        PendingOp {
            history: self.clone(),
            index,
        }
    }

    fn complete(&self, index: usize, outcome: Outcome, result: Value) {
        let complete_ns = self.now_ns();
        let mut slots = self.slots();
        if let Some(slot) = slots.get_mut(index) {
            slot.complete_ns = complete_ns;
            slot.outcome = Some(outcome);
            slot.result = result;
        }
    }

    /// How many operations the history keeps.
    pub fn len(&self) -> usize {
        self.slots().len()
    }

    /// Whether no operation was recorded (nor dropped).
    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.inner.dropped.load(Ordering::Relaxed) == 0
    }

    /// What was recorded until now. An operation still open is `info`,
    /// without a completion.
    pub fn snapshot(&self) -> HistorySnapshot {
        let ops = self
            .slots()
            .iter()
            .map(|s| Operation {
                client: s.client,
                op: s.op.clone(),
                invoke_ns: s.invoke_ns,
                complete_ns: s.outcome.map(|_| s.complete_ns),
                outcome: s.outcome.unwrap_or(Outcome::Info),
                result: s.result.clone(),
            })
            .collect();
        HistorySnapshot {
            version: 1,
            test: self.inner.test.clone(),
            ops,
            dropped: self.inner.dropped.load(Ordering::Relaxed),
            failed_checks: self
                .inner
                .failed
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Checks what was recorded until now with `check`, on a blocking
    /// thread of the runtime (a check may search for up to its bound).
    pub async fn check(&self, check: check::Check) -> Result<check::Checked, check::CheckError> {
        let snapshot = self.snapshot();
        match tokio::task::spawn_blocking(move || check.run(&snapshot)).await {
            Ok(Err(check::CheckError::NotLinearizable(found))) => {
                self.inner
                    .failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(FailedCheck::of(&found));
                Err(check::CheckError::NotLinearizable(found))
            }
            Ok(result) => result,
            Err(e) => Err(check::CheckError::Crashed {
                checker: "history",
                problem: e.to_string(),
            }),
        }
    }
}

/// An operation invoked and not yet completed. Complete it with
/// [`ok`](PendingOp::ok), [`fail`](PendingOp::fail) or
/// [`info`](PendingOp::info); dropped without completion, it is `info`.
#[must_use = "complete the operation with ok, fail or info (dropped, it is info: indeterminate)"]
pub struct PendingOp {
    history: History,
    /// `None` when the history was full: the operation is only counted.
    index: Option<usize>,
}

impl PendingOp {
    /// The operation took effect and returned `result` (`()` for none).
    pub fn ok(mut self, result: impl Into<Value>) {
        self.complete(Outcome::Ok, result.into());
    }

    /// The operation certainly took no effect (the service refused it
    /// before doing anything).
    pub fn fail(mut self) {
        self.complete(Outcome::Fail, Value::Nil);
    }

    /// Nobody knows whether the operation took effect: a timeout, a
    /// dropped connection, an answer that says nothing.
    pub fn info(mut self) {
        self.complete(Outcome::Info, Value::Nil);
    }

    fn complete(&mut self, outcome: Outcome, result: Value) {
        if let Some(index) = self.index.take() {
            self.history.complete(index, outcome, result);
        }
    }
}

impl Drop for PendingOp {
    fn drop(&mut self) {
        self.complete(Outcome::Info, Value::Nil);
    }
}

impl fmt::Debug for PendingOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingOp")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_are_recorded_with_their_outcomes_and_a_dropped_handle_is_info() {
        let h = History::new("t");
        h.invoke(1, Op::write("x", 1)).ok(());
        h.invoke(2, Op::read("x")).ok(1);
        h.invoke(3, Op::cas("x", 1, 2)).fail();
        h.invoke(1, Op::write("x", 3)).info();
        let open = h.invoke(2, Op::read("x"));
        let dropped = h.invoke(3, Op::read("x"));
        drop(dropped);
        let s = h.snapshot();
        let outcomes: Vec<_> = s.ops.iter().map(|o| o.outcome).collect();
        use Outcome::*;
        assert_eq!(outcomes, [Ok, Ok, Fail, Info, Info, Info]);
        assert_eq!(s.ops[1].result, Value::Int(1));
        // Open: no completion; dropped: completed when it was dropped.
        assert_eq!(s.ops[4].complete_ns, None);
        assert!(s.ops[5].complete_ns.is_some());
        for o in &s.ops {
            assert!(o.complete_ns.is_none_or(|c| c >= o.invoke_ns));
        }
        assert!(s.ops.windows(2).all(|w| w[0].invoke_ns <= w[1].invoke_ns));
        open.ok(3);
        assert_eq!(h.snapshot().ops[4].outcome, Ok);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn clients_in_tasks_record_into_one_history_and_it_checks() {
        let h = History::new("t");
        let register = Arc::new(Mutex::new(Value::Nil));
        let mut tasks = Vec::new();
        for client in 0..4u32 {
            let (h, register) = (h.clone(), register.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..50 {
                    let op = h.invoke(client, Op::write("x", i64::from(client * 100 + i)));
                    *register.lock().unwrap() = Value::Int(i64::from(client * 100 + i));
                    op.ok(());
                    tokio::task::yield_now().await;
                    let op = h.invoke(client, Op::read("x"));
                    let seen = register.lock().unwrap().clone();
                    op.ok(seen);
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let passed = h.check(check::Check::register()).await.unwrap();
        assert_eq!((passed.ops, passed.keys), (400, 1));
        // A read that answered what was never there fails it.
        h.invoke(9, Op::read("x")).ok(12345);
        let e = h.check(check::Check::register()).await.unwrap_err();
        assert!(matches!(e, check::CheckError::NotLinearizable(_)), "{e}");
    }

    #[test]
    fn a_full_history_counts_what_it_drops() {
        let h = History::with_cap("t", 3);
        for i in 0..5 {
            h.invoke(0, Op::write("x", i)).ok(());
        }
        let s = h.snapshot();
        assert_eq!(s.ops.len(), 3);
        assert_eq!(s.dropped, 2);
    }

    #[test]
    fn a_history_file_reads_back_as_written() {
        let h = History::new("t");
        h.invoke(1, Op::write("x", "a")).ok(());
        h.invoke(1, Op::read("x")).ok("a");
        h.invoke(2, Op::ReadSet).ok(vec![1, 2]);
        h.invoke(2, Op::incr(3)).info();
        let s = h.snapshot();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        s.write(&path).unwrap();
        assert_eq!(HistorySnapshot::read(&path).unwrap(), s);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(r#""f":"write","key":"x","value":"a""#),
            "{text}"
        );
    }
}
