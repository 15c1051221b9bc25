//! The harness, on top of everything: turns the binary's registered tests
//! into libtest-mimic trials, sets up the process (settings, signal handler;
//! the pod and the reaper start on first use), runs each test's lifecycle
//! ([`lifecycle`]), and hands the records down to reporting when the tests
//! are done.

mod hang;
mod lifecycle;
mod panics;
mod pod_lock;

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

use libtest_mimic::{Arguments, FormatSetting, Trial};

use crate::engine::report::{Outcome, TestRecord};
use crate::engine::run::Run;
use crate::engine::settings::{RunAs, Settings};

/// Concurrency when neither `--test-threads` nor `TESTKIT_TEST_THREADS` is
/// given. End-to-end tests spend their time waiting on the service, not on a
/// CPU, so the CPU count (libtest's default) would serialize them for
/// nothing; a waiting harness thread costs a few pages of stack.
pub(crate) const DEFAULT_TEST_THREADS: usize = 256;

/// The boxed future of one test body. Not `Send`: each test runs on its own
/// harness thread, driven by `Handle::block_on`, so tests may hold anything
/// across an await.
pub type BoxFuture<'a> = Pin<Box<dyn Future<Output = crate::Result> + 'a>>;

/// One registered test, as `#[testkit::test]` records it.
#[derive(Debug)]
pub struct TestDef {
    /// `module_path!()` where the test is defined.
    pub module_path: &'static str,
    /// The function's name.
    pub name: &'static str,
    /// The first paragraph of the doc comment, lines joined by one space.
    pub description: &'static str,
    /// `file!()` of the test function.
    pub file: &'static str,
    /// Line of the test function's name.
    pub line: u32,
    /// The attribute's options: [`NO_OPTIONS`] for a test that sets none,
    /// as most do. One pointer instead of five fields keeps what the
    /// compiler evaluates per test small.
    pub options: &'static TestOptions,
    /// The test function, as the attribute rewrites it: its body as a boxed
    /// future.
    pub run: for<'a> fn(&'a mut crate::Cx) -> BoxFuture<'a>,
}

/// The options of `#[testkit::test(..)]`.
#[derive(Debug)]
pub struct TestOptions {
    /// `ignore = "reason"`.
    pub ignore: Option<&'static str>,
    /// `timeout = "90s"`, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `known_issue = "ID"`.
    pub known_issue: Option<&'static str>,
    /// `fails_with = "text"`: what the failure of a known issue must contain.
    pub fails_with: Option<&'static str>,
    /// `intermittent = true`: the known issue fails the test only
    /// sometimes; a pass is not an unexpected pass.
    pub intermittent: bool,
    /// `requires = [..]`: pod capabilities the test needs.
    pub requires: &'static [&'static str],
    /// `trace = "on"`: which this test keeps of its trace, over
    /// `TESTKIT_TRACE` (`off`, `retain-on-failure`, `on`).
    pub trace: Option<&'static str>,
    /// `exclusive`: the test has the pod to itself: no other test of the run
    /// uses it while its body and cleanup run.
    pub exclusive: bool,
}

/// The options of a test that sets none.
pub static NO_OPTIONS: TestOptions = TestOptions {
    ignore: None,
    timeout_ms: None,
    known_issue: None,
    fails_with: None,
    intermittent: false,
    requires: &[],
    trace: None,
    exclusive: false,
};

inventory::collect!(TestDef);

impl TestDef {
    /// The name libtest, nextest and every report know the test by.
    fn full_name(&self) -> String {
        format!("{}::{}", self.module_path, self.name)
    }

    /// Whether `name` is [`full_name`](Self::full_name), without building
    /// it. Called for every test of the binary in every process nextest
    /// starts: the lengths first, the cheapest comparison.
    fn is_named(&self, name: &str) -> bool {
        let (name, module, own) = (
            name.as_bytes(),
            self.module_path.as_bytes(),
            self.name.as_bytes(),
        );
        name.len() == module.len() + 2 + own.len()
            && name[module.len() + 2..] == *own
            && name[..module.len()] == *module
            && name[module.len()..module.len() + 2] == *b"::"
    }

    /// A record of this test with its static facts filled in.
    fn record(&self, run: &Run) -> TestRecord {
        let mut record = TestRecord::new(&run.id, &run.binary, &self.full_name());
        record.description = self.description.to_owned();
        record.file = self.file.to_owned();
        record.line = self.line;
        record.known_issue = self.options.known_issue.map(str::to_owned);
        record.fails_with = self.options.fails_with.map(str::to_owned);
        record.intermittent = self.options.intermittent;
        record.requires = self
            .options
            .requires
            .iter()
            .map(|&s| s.to_owned())
            .collect();
        record
    }

    /// The record of a statically ignored test: skipped, saying why.
    fn ignored_record(&self, run: &Run) -> TestRecord {
        let mut record = self.record(run);
        record.outcome = Outcome::Skipped;
        record.skip_reason = Some(format!(
            "ignored: {}",
            self.options.ignore.unwrap_or("ignored")
        ));
        record
    }
}

/// What tells the runner this binary is testkit's (see
/// `report::HARNESS_MARKER`); `main` reads it, so no linker drops it.
#[used]
static HARNESS_MARKER: [u8; 32] = crate::engine::report::HARNESS_MARKER;

/// `testkit::main!()` calls this, with the manifest dir the binary was
/// compiled in. A test binary runs in one of three roles: its tests (the
/// harness), the reaper of a test process, or a sweeper of the Rust kinds
/// it links.
pub fn main(manifest_dir: &'static str) -> ExitCode {
    std::hint::black_box(&HARNESS_MARKER);
    let args = Arguments::from_args();
    crate::globals::set_compiled_manifest_dir(manifest_dir);
    let settings = crate::globals::settings();
    match settings.map(|s| &s.run_as) {
        Ok(RunAs::Reaper { journal, parent }) => {
            crate::reaper::reaper_main(journal.clone(), parent)
        }
        Ok(RunAs::Sweeper { kinds }) => {
            crate::runtime::block_on(crate::sweeper::sweeper_main(kinds))
        }
        // Unusable settings fail every test with the reason (see `trial`).
        Ok(RunAs::Harness) | Err(_) if args.list => list(&args),
        Ok(RunAs::Harness) | Err(_) => run(args, settings.ok()),
    }
}

/// `--list`: the tests, in libtest's format on stdout (cargo and nextest
/// parse it), their descriptions on stderr.
fn list(args: &Arguments) -> ExitCode {
    let tests = selected(args);
    if args.ignored {
        record_listed_ignored();
    }
    let trials = tests.iter().map(|&def| trial(def, None)).collect();
    let conclusion = libtest_mimic::run(args, trials);
    if !matches!(args.format, Some(FormatSetting::Terse)) {
        for def in &tests {
            eprintln!("{}: {}", def.full_name(), def.description);
        }
    }
    conclusion.exit_code()
}

/// Runs the selected tests, records the statically ignored ones, and ends
/// the process's pod session and reaper.
fn run(mut args: Arguments, settings: Option<&'static Settings>) -> ExitCode {
    let tests = selected(&args);
    if let (Some(_), Ok(run)) = (settings, crate::globals::run()) {
        // Before any thread starts: what the tests start inherits the tag.
        crate::leftovers::tag_process(&run.id);
    }
    crate::log::set_echo(args.nocapture);
    let trials: Vec<Trial> = tests.iter().map(|&def| trial(def, settings)).collect();
    // Statically ignored tests never reach their runner; record them here so
    // reports still say why they were skipped.
    let mut not_run: Vec<&'static TestDef> = Vec::new();
    let mut to_run = 0;
    for (&def, t) in tests.iter().zip(&trials) {
        if args.is_filtered_out(t) {
            continue;
        }
        if args.is_ignored(t) {
            not_run.push(def);
        } else {
            to_run += 1;
        }
    }
    args.test_threads = Some(test_threads(&args, settings, to_run));
    panics::install_hook();
    if let Some(settings) = settings {
        // Ctrl-C and nextest's timeout clean up what the running tests created.
        crate::signals::install_signal_handler(settings.grace);
        // SIGUSR1: what each test in its body is doing, and go on.
        hang::install_status_handler();
    }

    let conclusion = libtest_mimic::run(&args, trials);
    if let (Some(settings), Ok(run)) = (settings, crate::globals::run()) {
        for def in not_run {
            crate::globals::write_record(run, &def.ignored_record(run));
        }
        let ignored = || {
            inventory::iter::<TestDef>
                .into_iter()
                .filter(|def| def.options.ignore.is_some())
                .map(|def| def.ignored_record(run))
                .collect()
        };
        crate::engine::report::finish_binary(run, settings.under_nextest, ignored);
    }
    crate::globals::finish_pod();
    // Without a runner, the browser this process's tests shared is the
    // process's to end; before the reaper goes, which would end it.
    #[cfg(feature = "browser")]
    if let Ok(run) = crate::globals::run() {
        if let Err(e) = crate::browser::finish_process(run) {
            eprintln!("testkit: the browser this process's tests shared: {e}: failing the process");
            crate::reaper::finish_process();
            return ExitCode::FAILURE;
        }
    }
    // Every test's cleanup ran: the reaper has nothing to do.
    crate::reaper::finish_process();
    if crate::globals::record_lost() {
        // The tests may all have passed, but no report will say so.
        eprintln!("testkit: a test record could not be written (see above): failing the process");
        return ExitCode::FAILURE;
    }
    conclusion.exit_code()
}

/// How many tests run at once: `--test-threads`, else `TESTKIT_TEST_THREADS`,
/// else the default, and never more than there are tests to run.
/// libtest-mimic starts every thread it is given, whatever the number of
/// tests: under nextest, where a process runs one test, 256 threads were
/// most of what a trivial test cost. The runtime is told the same.
fn test_threads(args: &Arguments, settings: Option<&Settings>, to_run: usize) -> usize {
    let threads = args
        .test_threads
        .or(settings.and_then(|s| s.test_threads))
        .unwrap_or(DEFAULT_TEST_THREADS)
        .clamp(1, to_run.max(1));
    crate::runtime::expect_concurrent_tests(threads);
    threads
}

/// Under nextest, a binary whose only tests are ignored never gets a test
/// process: nextest lists its ignored tests (`--list --ignored`, with the
/// run's id, before it runs any test) and skips them. The listing is the
/// one moment testkit runs for it, and records them then. Only with a run
/// id the run's test processes share (nextest's, or `TESTKIT_RUN_ID`): a
/// listing of its own would make a folder nothing else writes into.
fn record_listed_ignored() {
    let (Ok(settings), Ok(run)) = (crate::globals::settings(), crate::globals::run()) else {
        return;
    };
    let ignored = || {
        inventory::iter::<TestDef>
            .into_iter()
            .filter(|def| def.options.ignore.is_some())
    };
    // A binary without ignored tests has nothing to say, and no folder to make.
    if !settings.under_nextest || run.alone || ignored().next().is_none() {
        return;
    }
    crate::engine::report::record_listed_ignored(run, || {
        ignored().map(|def| def.ignored_record(run)).collect()
    });
}

/// The tests this process may run. With `--exact NAME`, which is how
/// nextest starts each test's process, only the test of that name, found
/// without building every test's name: what a process does under nextest
/// must not grow with the number of tests in its binary. Otherwise every
/// test, sorted; libtest-mimic applies the filters.
fn selected(args: &Arguments) -> Vec<&'static TestDef> {
    let mut all = inventory::iter::<TestDef>.into_iter();
    match &args.filter {
        // Names are unique (a module cannot hold two functions of one
        // name): the first match is the one.
        Some(name) if args.exact && !args.list => {
            all.find(|def| def.is_named(name)).into_iter().collect()
        }
        _ => {
            let mut tests: Vec<&'static TestDef> = all.collect();
            tests.sort_by_key(|def| (def.module_path, def.name));
            tests
        }
    }
}

fn trial(def: &'static TestDef, settings: Option<&'static Settings>) -> Trial {
    let name = def.full_name();
    Trial::ignorable_test(name, move || lifecycle::run_test(def, settings))
        .with_ignored_flag(def.options.ignore.is_some())
}
