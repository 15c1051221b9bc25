//! The per-test record: what crosses the process boundary from a test process
//! to the reporters and the runner. Versioned; fields are only ever added,
//! and every field added after version 1 has a default, so that a reader
//! accepts older records. The schema is documented in [`crate::report`].

use serde::{Deserialize, Serialize};

/// The version of [`TestRecord`]'s schema.
pub const RECORD_SCHEMA_VERSION: u32 = 1;

/// The outcome of one test, as reports show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The test passed and its resources are gone (`cleanup` says whether
    /// its own cleanup deleted them).
    Passed,
    /// The body failed, or its cleanup did.
    Failed,
    /// The test did not run; `skip_reason` says why.
    Skipped,
    /// A test pinned to a known issue failed as documented.
    ExpectedFailure,
    /// A test pinned to a known issue passed: the run fails.
    UnexpectedPass,
}

impl Outcome {
    /// The word records, JUnit's `outcome` property, the report page and
    /// the summary use: the record's own spelling (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "failed",
            Outcome::Skipped => "skipped",
            Outcome::ExpectedFailure => "expected_failure",
            Outcome::UnexpectedPass => "unexpected_pass",
        }
    }

    /// Whether this outcome fails a run: a failure, or a known issue that
    /// passed.
    pub fn fails(self) -> bool {
        matches!(self, Outcome::Failed | Outcome::UnexpectedPass)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a test failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The body returned `Err`.
    Error,
    /// The body panicked.
    Panic,
    /// The body outlived its timeout and was cancelled.
    Timeout,
    /// Deleting or verifying the test's resources failed: something leaked.
    Cleanup,
    /// A known issue's failure did not contain its `fails_with` text.
    KnownIssueMismatch,
    /// A test pinned to a known issue passed.
    KnownIssueFixed,
    /// The known issue's id is not listed in `KNOWN-ISSUES.md`.
    KnownIssueUnlisted,
    /// A fault the test injected into a node could not be undone, or its
    /// undo not proven: the pod is not what the next test expects.
    FaultNotUndone,
    /// The suite's config (`testkit.toml`, its kinds) cannot be used: the
    /// test never ran, and a known issue does not excuse it.
    Config,
    /// A browser of the test did not end within its teardown cap and was
    /// killed (`browser teardown timed out`).
    BrowserTeardown,
    /// The test opened a browser and saved no screenshot: no evidence, no pass.
    NoScreenshot,
}

impl FailureKind {
    /// The word records, JUnit's failure `type`, the report page and the
    /// summary use: the record's own spelling (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::Timeout => "timeout",
            FailureKind::Cleanup => "cleanup",
            FailureKind::KnownIssueMismatch => "known_issue_mismatch",
            FailureKind::KnownIssueFixed => "known_issue_fixed",
            FailureKind::KnownIssueUnlisted => "known_issue_unlisted",
            FailureKind::FaultNotUndone => "fault_not_undone",
            FailureKind::Config => "config",
            FailureKind::BrowserTeardown => "browser_teardown",
            FailureKind::NoScreenshot => "no_screenshot",
        }
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a failure is the fault of: where to look first, and whether a
/// retry may rerun it. Every failed test, and every failed phase of a run,
/// has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureCategory {
    /// The product under test: an assertion, an HTTP answer the test did
    /// not accept, a timeout waiting for it, a resource it did not delete.
    Product,
    /// What the product runs on: the pod did not boot, the container
    /// engine failed, a port could not be bound, a test process was killed
    /// (out of memory, a signal), a node died. The only category a retry
    /// limited to the infrastructure (`[suite] retry = "infrastructure"`)
    /// reruns.
    Infrastructure,
    /// A known product bug (`known_issue = "ID"`): it failed as documented,
    /// or it passed and is pinned.
    KnownIssue,
    /// testkit itself: the suite's config cannot be used, a known issue is
    /// not listed, a test broke a rule of the harness, or a bug of testkit.
    Testkit,
}

impl FailureCategory {
    /// Every category, in the order reports group them.
    pub const ALL: [FailureCategory; 4] = [
        FailureCategory::Product,
        FailureCategory::Infrastructure,
        FailureCategory::KnownIssue,
        FailureCategory::Testkit,
    ];

    /// The word records, JUnit's `category` property, CTRF, the report page
    /// and the summary use: the record's own spelling (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCategory::Product => "product",
            FailureCategory::Infrastructure => "infrastructure",
            FailureCategory::KnownIssue => "known_issue",
            FailureCategory::Testkit => "testkit",
        }
    }

    /// The category a failure of `kind` has when nothing more is known of
    /// it (a record written before categories, or by a test process that
    /// could not tell): what the kind says of where the fault lies.
    pub fn of_kind(kind: Option<FailureKind>) -> FailureCategory {
        match kind {
            None
            | Some(FailureKind::Error)
            | Some(FailureKind::Panic)
            | Some(FailureKind::Timeout)
            | Some(FailureKind::Cleanup)
            | Some(FailureKind::KnownIssueMismatch) => FailureCategory::Product,
            Some(FailureKind::FaultNotUndone) | Some(FailureKind::BrowserTeardown) => {
                FailureCategory::Infrastructure
            }
            Some(FailureKind::KnownIssueFixed) => FailureCategory::KnownIssue,
            Some(FailureKind::KnownIssueUnlisted)
            | Some(FailureKind::Config)
            | Some(FailureKind::NoScreenshot) => FailureCategory::Testkit,
        }
    }
}

impl std::fmt::Display for FailureCategory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The cleanup of a test's resources, as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CleanupState {
    /// The test created nothing.
    #[default]
    Nothing,
    /// Everything the test created was deleted and verified gone.
    Verified,
    /// `TESTKIT_KEEP` kept the resources.
    Kept,
    /// Something could not be deleted or verified gone.
    Failed,
    /// Everything is gone, but at least one resource was already gone when
    /// cleanup came to delete it: something else deleted it (a janitor,
    /// another run, the product), so its cleanup verified nothing.
    GoneBeforeDelete,
}

impl CleanupState {
    /// The word records and JUnit use.
    pub fn as_str(self) -> &'static str {
        match self {
            CleanupState::Nothing => "nothing",
            CleanupState::Verified => "verified",
            CleanupState::Kept => "kept",
            CleanupState::Failed => "failed",
            CleanupState::GoneBeforeDelete => "gone_before_delete",
        }
    }
}

/// What became of one resource a test created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceState {
    /// Journaled; the creating request was not answered (yet).
    Pending,
    /// The creating request succeeded.
    Created,
    /// Deleted and verified gone (by cleanup, or by the test itself).
    Deleted,
    /// `TESTKIT_KEEP` kept it.
    Kept,
    /// It could not be deleted or verified gone.
    Leaked,
    /// Its first delete found it already gone: something else deleted it.
    /// It is gone (verified), but not by the test's cleanup.
    GoneBeforeDelete,
}

impl ResourceState {
    /// The word records and JUnit use.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceState::Pending => "pending",
            ResourceState::Created => "created",
            ResourceState::Deleted => "deleted",
            ResourceState::Kept => "kept",
            ResourceState::Leaked => "leaked",
            ResourceState::GoneBeforeDelete => "gone_before_delete",
        }
    }
}

impl std::fmt::Display for ResourceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One resource a test created, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRecord {
    /// The resource kind, as the suite declares it.
    pub kind: String,
    /// Its name on the pod.
    pub name: String,
    /// What became of it.
    pub state: ResourceState,
}

/// What became of a process a test left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessFate {
    /// Ended (SIGTERM, then SIGKILL past a grace) and verified gone.
    Ended,
    /// `TESTKIT_KEEP_PROCESSES` kept it running.
    Kept,
    /// It outlived SIGKILL.
    Survived,
}

impl ProcessFate {
    /// The word records and summaries use.
    pub fn as_str(self) -> &'static str {
        match self {
            ProcessFate::Ended => "ended",
            ProcessFate::Kept => "kept",
            ProcessFate::Survived => "survived",
        }
    }
}

/// A process a test left running when it ended: started while the test ran
/// (it carries the test process's `TESTKIT_PROCESS_TAG`), and still alive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftoverProcess {
    /// Its pid.
    pub pid: i32,
    /// Its command line, redacted.
    pub command: String,
    /// What became of it.
    pub fate: ProcessFate,
}

/// How a test held the pod lock ([`crate::pod::lock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LockMode {
    /// With every other test that is not `exclusive`.
    Shared,
    /// `#[testkit::test(exclusive)]`: alone, no other test of the run using
    /// the pod.
    Exclusive,
}

impl LockMode {
    /// The word records and summaries use.
    pub fn as_str(self) -> &'static str {
        match self {
            LockMode::Shared => "shared",
            LockMode::Exclusive => "exclusive",
        }
    }
}

/// The pod lock a test held while its body and cleanup ran. The interval
/// lies inside the time the lock was really held: `acquired_at_ms` is read
/// once the lock is taken, `released_at_ms` before it is let go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LockRecord {
    /// Shared or exclusive.
    pub mode: LockMode,
    /// When the lock was taken, in milliseconds since the Unix epoch.
    pub acquired_at_ms: u64,
    /// When it was let go, in milliseconds since the Unix epoch.
    pub released_at_ms: u64,
    /// How long the test waited for it: time that counts against no
    /// timeout of the test's own.
    pub wait_ms: u64,
}

impl LockRecord {
    /// A lock held in `mode` from `acquired_at_ms` to `released_at_ms`,
    /// after a wait of `wait_ms`.
    pub fn new(mode: LockMode, acquired_at_ms: u64, released_at_ms: u64, wait_ms: u64) -> Self {
        LockRecord {
            mode,
            acquired_at_ms,
            released_at_ms,
            wait_ms,
        }
    }

    /// How long the lock was held.
    pub(crate) fn held_ms(&self) -> u64 {
        self.released_at_ms.saturating_sub(self.acquired_at_ms)
    }
}

/// One test's record: see [`crate::report`] for the schema.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TestRecord {
    /// [`RECORD_SCHEMA_VERSION`].
    pub schema: u32,
    /// The run's id.
    pub run_id: String,
    /// The test binary.
    pub binary: String,
    /// Full test name.
    pub name: String,
    /// The first paragraph of the doc comment.
    pub description: String,
    /// Where the test is defined.
    pub file: String,
    /// Line of the test function.
    pub line: u32,
    /// The outcome.
    pub outcome: Outcome,
    /// Why it failed, when it did.
    pub failure_kind: Option<FailureKind>,
    /// The failure, or for an expected failure the failure observed.
    pub message: Option<String>,
    /// Why it was skipped.
    pub skip_reason: Option<String>,
    /// When the test started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// How long it took, cleanup included.
    pub duration_ms: u64,
    /// `known_issue = "ID"`.
    pub known_issue: Option<String>,
    /// `fails_with = "..."`.
    pub fails_with: Option<String>,
    /// `requires = [..]`.
    pub requires: Vec<String>,
    /// Capabilities the pod lacked.
    pub capabilities_missing: Vec<String>,
    /// Resources the test created.
    pub resources: Vec<ResourceRecord>,
    /// The cleanup as a whole.
    pub cleanup: CleanupState,
    /// The test's log, redacted.
    pub output: String,
    /// How many browsers the test opened (`cx.browser()`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub browsers: u32,
    /// The screenshots it saved (PNG files in its artifacts folder), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub screenshots: Vec<String>,
    /// A browser of the test outlived its teardown cap and was killed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub browser_teardown_timed_out: bool,
    /// Processes the test left running (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leftover_processes: Vec<LeftoverProcess>,
    /// `intermittent = true`: the known issue does not fail every time, so
    /// a pass is not an unexpected pass.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intermittent: bool,
    /// Which attempt of the test this record is: 1, or nextest's
    /// `NEXTEST_ATTEMPT` of a retry.
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
    /// The test's earlier attempts in the same run (nextest retries), oldest
    /// first. A test process writes none; readers ([`crate::report::read_records`])
    /// fold the records of a test's earlier attempts in here, and give an
    /// attempt that left no record (its process crashed) one that says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptRecord>,
    /// The test's kept trace (`TESTKIT_TRACE`): the absolute path of its
    /// `trace.json`, absent when none was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The faults the test injected into the pod's nodes, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultRecord>,
    /// The pod lock the test held (absent when it took none: it was
    /// skipped or failed before its body ran, or it is older than the lock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockRecord>,
    /// The history of operations the test recorded (`cx.history()`): the
    /// absolute path of its `history.json`, absent when it recorded none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<String>,
    /// What its failure is the fault of, as the process that judged it saw
    /// it (absent when it did not fail, or in an older record: then
    /// [`TestRecord::category`] derives it from `failure_kind`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<FailureCategory>,
}

/// A fault a test injected into a node, and its undo.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FaultRecord {
    /// The node.
    pub node: String,
    /// What was done: `pause worker-2`.
    pub fault: String,
    /// When it was injected, in milliseconds since the Unix epoch.
    pub injected_at_ms: u64,
    /// When its undo was proven, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undone_at_ms: Option<u64>,
    /// What became of it.
    pub state: FaultState,
    /// Why it is not undone, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

impl FaultRecord {
    /// A fault on `node`, `fault` describing it, injected now and in effect.
    pub fn injected(node: &str, fault: String) -> FaultRecord {
        FaultRecord {
            node: node.to_owned(),
            fault,
            injected_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            undone_at_ms: None,
            state: FaultState::InEffect,
            problem: None,
        }
    }
}

/// What became of a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FaultState {
    /// In effect: the test has not ended, or its injection failed half-way
    /// and is still to be undone.
    InEffect,
    /// Undone, and proven so (the node healthy, its peers reaching it).
    Undone,
    /// Nothing of it was left to undo when its undo came (the test undid
    /// it itself, or a later fault on the same node did), and the node is
    /// proven whole: as `gone_before_delete` is for a resource.
    GoneBeforeUndo,
    /// The undo failed or could not be proven.
    NotUndone,
    /// `TESTKIT_KEEP` kept it, with the test's resources.
    Kept,
}

impl FaultState {
    /// The word records, the report page and JUnit use: the record's own
    /// spelling (its serde name).
    pub fn as_str(self) -> &'static str {
        match self {
            FaultState::InEffect => "in_effect",
            FaultState::Undone => "undone",
            FaultState::GoneBeforeUndo => "gone_before_undo",
            FaultState::NotUndone => "not_undone",
            FaultState::Kept => "kept",
        }
    }
}

impl std::fmt::Display for FaultState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One earlier attempt of a test that nextest retried: what it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AttemptRecord {
    /// 1 for the first try, 2 and up for retries.
    pub attempt: u32,
    /// What the attempt came to.
    pub outcome: Outcome,
    /// Why it failed, when it did.
    #[serde(default)]
    pub failure_kind: Option<FailureKind>,
    /// The failure.
    #[serde(default)]
    pub message: Option<String>,
    /// When it started, in milliseconds since the Unix epoch (0 when it left
    /// no record).
    #[serde(default)]
    pub started_at_ms: u64,
    /// How long it took, cleanup included.
    #[serde(default)]
    pub duration_ms: u64,
    /// The resources it created, and what became of them.
    #[serde(default)]
    pub resources: Vec<ResourceRecord>,
    /// Its cleanup as a whole.
    #[serde(default)]
    pub cleanup: CleanupState,
    /// Its log, redacted.
    #[serde(default)]
    pub output: String,
    /// The pod lock it held, when it took one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<LockRecord>,
    /// What its failure was the fault of, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<FailureCategory>,
}

impl AttemptRecord {
    /// What is kept of `record` as an earlier attempt of its test.
    pub fn of(record: &TestRecord) -> AttemptRecord {
        AttemptRecord {
            attempt: record.attempt,
            outcome: record.outcome,
            failure_kind: record.failure_kind,
            message: record.message.clone(),
            started_at_ms: record.started_at_ms,
            duration_ms: record.duration_ms,
            resources: record.resources.clone(),
            cleanup: record.cleanup,
            output: record.output.clone(),
            lock: record.lock,
            category: record.category(),
        }
    }

    /// An attempt that left no record: nextest retries only a failure, so
    /// it failed, and its process ended before testkit could record it.
    pub(crate) fn unrecorded(attempt: u32) -> AttemptRecord {
        AttemptRecord {
            attempt,
            outcome: Outcome::Failed,
            failure_kind: Some(FailureKind::Error),
            message: Some(format!(
                "no record: attempt {attempt} failed (nextest retried it) and its process \
                 crashed or was killed before it wrote one; see tests.log"
            )),
            started_at_ms: 0,
            duration_ms: 0,
            resources: Vec::new(),
            cleanup: CleanupState::Nothing,
            output: String::new(),
            lock: None,
            category: Some(FailureCategory::Infrastructure),
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn first_attempt() -> u32 {
    1
}

fn is_first_attempt(n: &u32) -> bool {
    *n <= 1
}

impl TestRecord {
    /// A record of the test `name` of `binary` in the run `run_id`, passed,
    /// with every other field empty: the harness fills it in as the test
    /// runs, and the runner for a test that never wrote one.
    pub fn new(run_id: &str, binary: &str, name: &str) -> TestRecord {
        TestRecord {
            schema: RECORD_SCHEMA_VERSION,
            run_id: run_id.to_owned(),
            binary: binary.to_owned(),
            name: name.to_owned(),
            description: String::new(),
            file: String::new(),
            line: 0,
            outcome: Outcome::Passed,
            failure_kind: None,
            message: None,
            skip_reason: None,
            started_at_ms: 0,
            duration_ms: 0,
            known_issue: None,
            fails_with: None,
            requires: Vec::new(),
            capabilities_missing: Vec::new(),
            resources: Vec::new(),
            cleanup: CleanupState::Nothing,
            output: String::new(),
            browsers: 0,
            screenshots: Vec::new(),
            browser_teardown_timed_out: false,
            leftover_processes: Vec::new(),
            intermittent: false,
            attempt: 1,
            attempts: Vec::new(),
            trace: None,
            faults: Vec::new(),
            lock: None,
            history: None,
            category: None,
        }
    }

    /// How many times the test ran in its run: its earlier attempts and this
    /// one.
    pub fn total_attempts(&self) -> u32 {
        self.attempt.max(1).max(
            self.attempts
                .iter()
                .map(|a| a.attempt + 1)
                .max()
                .unwrap_or(1),
        )
    }

    /// The earlier attempts that failed.
    pub fn failed_attempts(&self) -> impl Iterator<Item = &AttemptRecord> {
        self.attempts.iter().filter(|a| a.outcome.fails())
    }

    /// Flaky: the test failed and then, retried, did not (it passed, or
    /// failed as its known issue documents). nextest retries only
    /// failures, so a record of a retry that did not fail is flaky even when
    /// the attempts before it left no record.
    pub fn is_flaky(&self) -> bool {
        !self.outcome.fails()
            && (self.attempt > 1 || self.attempts.iter().any(|a| a.outcome.fails()))
    }

    /// Marks the test failed, for `kind`, with `message`; its category is
    /// the kind's until the caller says more ([`TestRecord::categorize`]).
    pub fn fail(&mut self, kind: FailureKind, message: String) {
        self.outcome = Outcome::Failed;
        self.failure_kind = Some(kind);
        self.message = Some(message);
        self.category = None;
    }

    /// Says what the test's failure is the fault of.
    pub fn categorize(&mut self, category: FailureCategory) {
        self.category = Some(category);
    }

    /// What the test's failure (or its documented failure, for a known
    /// issue) is the fault of; `None` when it neither failed nor failed as
    /// documented. A pinned known issue is a known issue whatever its kind;
    /// a failure that does not match its documented one is not.
    pub fn category(&self) -> Option<FailureCategory> {
        match self.outcome {
            Outcome::Passed | Outcome::Skipped => None,
            Outcome::ExpectedFailure | Outcome::UnexpectedPass => Some(FailureCategory::KnownIssue),
            Outcome::Failed => Some(
                self.category
                    .unwrap_or_else(|| FailureCategory::of_kind(self.failure_kind)),
            ),
        }
    }
}

#[cfg(test)]
mod words {
    use super::*;

    /// Each of `values` has `word` for its word, and that is its serde
    /// name: the record's spelling, which is versioned.
    fn words_are_serde_names<T: Serialize + Copy + std::fmt::Debug>(
        values: &[T],
        word: fn(T) -> &'static str,
    ) {
        for &value in values {
            let serde = serde_json::to_value(value).expect("a unit variant serializes");
            assert_eq!(Some(word(value)), serde.as_str(), "{value:?}");
        }
    }

    /// The words every output prints are the record's own, so that JUnit,
    /// the report page and the summary say what `records/*.jsonl` says.
    #[test]
    fn each_enums_word_is_its_serde_name() {
        // A variant added to one of these enums and not to its list here
        // fails to compile, so that no word goes unchecked.
        let outcome = |o| match o {
            Outcome::Passed
            | Outcome::Failed
            | Outcome::Skipped
            | Outcome::ExpectedFailure
            | Outcome::UnexpectedPass => o,
        };
        let outcomes = [
            Outcome::Passed,
            Outcome::Failed,
            Outcome::Skipped,
            Outcome::ExpectedFailure,
            Outcome::UnexpectedPass,
        ]
        .map(outcome);
        words_are_serde_names(&outcomes, Outcome::as_str);
        let kind = |k| match k {
            FailureKind::Error
            | FailureKind::Panic
            | FailureKind::Timeout
            | FailureKind::Cleanup
            | FailureKind::KnownIssueMismatch
            | FailureKind::KnownIssueFixed
            | FailureKind::KnownIssueUnlisted
            | FailureKind::FaultNotUndone
            | FailureKind::Config
            | FailureKind::BrowserTeardown
            | FailureKind::NoScreenshot => k,
        };
        let kinds = [
            FailureKind::Error,
            FailureKind::Panic,
            FailureKind::Timeout,
            FailureKind::Cleanup,
            FailureKind::KnownIssueMismatch,
            FailureKind::KnownIssueFixed,
            FailureKind::KnownIssueUnlisted,
            FailureKind::FaultNotUndone,
            FailureKind::Config,
            FailureKind::BrowserTeardown,
            FailureKind::NoScreenshot,
        ]
        .map(kind);
        words_are_serde_names(&kinds, FailureKind::as_str);
        let state = |s| match s {
            FaultState::InEffect
            | FaultState::Undone
            | FaultState::GoneBeforeUndo
            | FaultState::NotUndone
            | FaultState::Kept => s,
        };
        let states = [
            FaultState::InEffect,
            FaultState::Undone,
            FaultState::GoneBeforeUndo,
            FaultState::NotUndone,
            FaultState::Kept,
        ]
        .map(state);
        words_are_serde_names(&states, FaultState::as_str);
        // Display says the word too.
        assert_eq!(Outcome::ExpectedFailure.to_string(), "expected_failure");
        assert_eq!(FailureKind::FaultNotUndone.to_string(), "fault_not_undone");
        assert_eq!(FaultState::GoneBeforeUndo.to_string(), "gone_before_undo");
        // The enums that had their words before.
        words_are_serde_names(
            &[
                CleanupState::Nothing,
                CleanupState::Verified,
                CleanupState::Kept,
                CleanupState::Failed,
                CleanupState::GoneBeforeDelete,
            ],
            CleanupState::as_str,
        );
        words_are_serde_names(
            &[
                ResourceState::Pending,
                ResourceState::Created,
                ResourceState::Deleted,
                ResourceState::Kept,
                ResourceState::Leaked,
                ResourceState::GoneBeforeDelete,
            ],
            ResourceState::as_str,
        );
        words_are_serde_names(
            &[ProcessFate::Ended, ProcessFate::Kept, ProcessFate::Survived],
            ProcessFate::as_str,
        );
        words_are_serde_names(&[LockMode::Shared, LockMode::Exclusive], LockMode::as_str);
    }
}
