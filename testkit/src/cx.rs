//! `Cx`: what a test receives. It carries the test's identity, the run, the
//! test's log and artifacts folder, its pod, and the resources it owns.

use std::fmt::{self, Display};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::__private::TestDef;
use crate::run::Run;

/// The context of one test: its name, the run, its log, its artifacts folder,
/// and (with the pod and resource modules) the pod and what the test created.
pub struct Cx {
    pub(crate) def: &'static TestDef,
    pub(crate) full_name: String,
    pub(crate) run: &'static Run,
    pub(crate) log: Log,
    pub(crate) artifacts_dir: PathBuf,
    pub(crate) capabilities_missing: Vec<String>,
    pub(crate) resources: crate::resource::Tracker,
}

impl Cx {
    pub(crate) fn new(def: &'static TestDef, full_name: String, run: &'static Run) -> Cx {
        let artifacts_dir = run
            .results_dir
            .join("artifacts")
            .join(&run.binary)
            .join(sanitize(&full_name));
        let log = Log::default();
        let resources = crate::resource::Tracker::new(&full_name, log.clone());
        Cx {
            def,
            full_name,
            run,
            log,
            artifacts_dir,
            capabilities_missing: Vec::new(),
            resources,
        }
    }

    /// The test's full name: module path and function, joined by `::`.
    pub fn name(&self) -> &str {
        &self.full_name
    }

    /// The first paragraph of the test's doc comment.
    pub fn description(&self) -> &str {
        self.def.description
    }

    /// The run's id: short, lowercase, shared by every test process of the run.
    pub fn run_id(&self) -> &str {
        &self.run.id
    }

    /// The run's results folder.
    pub fn results_dir(&self) -> &Path {
        &self.run.results_dir
    }

    /// This test's own artifacts folder under the results folder, created on
    /// first use. Files written here are kept with the run's results.
    pub fn artifacts_dir(&self) -> std::io::Result<&Path> {
        std::fs::create_dir_all(&self.artifacts_dir)?;
        Ok(&self.artifacts_dir)
    }

    /// Records a line in the test's log. The log is shown when the test fails,
    /// kept in the test's record, and printed as it happens under `--nocapture`.
    pub fn log(&self, message: impl Display) {
        self.log.push(message.to_string());
    }
}

impl fmt::Debug for Cx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cx")
            .field("name", &self.full_name)
            .field("run_id", &self.run.id)
            .finish_non_exhaustive()
    }
}

/// A test's log: timestamped lines, shared so that helpers holding `&Cx` can
/// write to it.
#[derive(Clone, Default)]
pub(crate) struct Log {
    inner: Arc<Mutex<LogInner>>,
}

#[derive(Default)]
struct LogInner {
    start: Option<Instant>,
    lines: Vec<String>,
}

impl Log {
    pub(crate) fn push(&self, message: String) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let start = *inner.start.get_or_insert_with(Instant::now);
        let line = format!("[{:>8.3}s] {}", start.elapsed().as_secs_f64(), message);
        if crate::harness::nocapture() {
            eprintln!("{}", crate::redact::redact(&line));
        }
        inner.lines.push(line);
    }

    pub(crate) fn start(&self) {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).start = Some(Instant::now());
    }

    /// The whole log, redacted.
    pub(crate) fn text(&self) -> String {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        crate::redact::redact(&inner.lines.join("\n")).into_owned()
    }
}

/// A file-name-safe form of a test name: `smoke::create` → `smoke__create`.
pub(crate) fn sanitize(name: &str) -> String {
    name.replace("::", "__")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
