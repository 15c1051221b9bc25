//! `Cx`: what a test receives, and the only `impl Cx`. It carries the test's
//! identity, the run, the test's log and artifacts folder, and the resources
//! it owns; each method hands the work to the module that does it (the pod,
//! the resource tracker, the CLI runner), passing what that module needs.

use std::fmt::{self, Display};
use std::future::Future;
use std::path::{Path, PathBuf};

use crate::cli::{CliCommand, CliOutput};
use crate::engine::pod::Pod;
use crate::engine::run::Run;
use crate::engine::settings::Keep;
use crate::log::Log;
use crate::tracker::{CleanupSummary, Tracker};

/// The context of one test: its name, the run, its log, its artifacts folder,
/// its pod, and what it created.
pub struct Cx {
    full_name: String,
    description: &'static str,
    run: &'static Run,
    pub(crate) log: Log,
    artifacts_dir: PathBuf,
    pub(crate) capabilities_missing: Vec<String>,
    /// `#[testkit::test(exclusive)]`: the test holds the pod lock alone.
    exclusive: bool,
    pub(crate) resources: Tracker,
    /// The operations the test's clients recorded, once it asks for it.
    history: std::sync::OnceLock<crate::engine::history::History>,
    /// The step the test is in ([`Cx::step`]), for hang reports.
    pub(crate) step: CurrentStep,
    #[cfg(feature = "browser")]
    browsers: crate::browser::Browsers,
}

impl Cx {
    /// The context of the test `full_name` in `run`; `attempt` is nextest's
    /// attempt number (retries get resource names of their own);
    /// `exclusive`, whether the test has the pod to itself.
    pub(crate) fn new(
        full_name: String,
        description: &'static str,
        run: &'static Run,
        attempt: Option<u32>,
        exclusive: bool,
    ) -> Cx {
        let artifacts_dir =
            crate::engine::run::artifacts_dir(&run.results_dir, &run.binary, &full_name);
        let log = Log::default();
        let resources = Tracker::new(&full_name, attempt, log.clone());
        Cx {
            #[cfg(feature = "browser")]
            browsers: crate::browser::Browsers::new(log.clone()),
            full_name,
            description,
            run,
            log,
            artifacts_dir,
            capabilities_missing: Vec::new(),
            exclusive,
            resources,
            history: std::sync::OnceLock::new(),
            step: CurrentStep::default(),
        }
    }

    /// Whether the test is `#[testkit::test(exclusive)]`: its body and
    /// cleanup run while no other test of the run uses the pod, which is
    /// what makes injecting a fault into the pod (stopping a node, cutting
    /// the network) safe for the others.
    pub(crate) fn is_exclusive(&self) -> bool {
        self.exclusive
    }

    /// The test's full name: module path and function, joined by `::`.
    pub fn name(&self) -> &str {
        &self.full_name
    }

    /// The first paragraph of the test's doc comment.
    pub fn description(&self) -> &str {
        self.description
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

    /// Names what the test does from here on (`"create the sandbox"`,
    /// `"wait for worker-2 to rejoin"`), until the next step: a hang
    /// report (a timeout's, or one asked for by SIGUSR1) says which step
    /// the test was in and for how long, and the test's log gets a line
    /// `step: NAME`.
    pub fn step(&self, name: impl Display) {
        let name = name.to_string();
        self.log.push(format!("step: {name}"));
        self.step.set(name);
    }

    /// The pod: its handle, an authenticated client, its capabilities. Without
    /// a configured pod the test is skipped; with an unusable one it fails.
    pub fn pod(&self) -> crate::Result<&'static Pod> {
        crate::globals::require_pod()
    }

    /// A new name for a resource of this test: `<prefix>-<run id>-<test
    /// tag>-<nn>`, unique in the run, the same for the same test and call
    /// order, a DNS label of at most 63 characters.
    pub fn unique_name(&self) -> String {
        self.resources.unique_name(&self.run.id)
    }

    /// Creates a resource of `kind` named `name` by running `request`, the
    /// future that sends the creating request. Before `request` is first
    /// polled, waits for a slot when the kind has a budget (an error naming
    /// who holds the slots when none is freed for `TESTKIT_BUDGET_WAIT`),
    /// and journals the name; the resource is tracked from then on, even when `request` fails
    /// (the request may have landed), and is deleted and verified gone when the
    /// test ends.
    ///
    /// ```no_run
    /// # async fn f(cx: &testkit::Cx) -> testkit::Result {
    /// let name = cx.unique_name();
    /// let created = cx.create("sandbox", &name, async { Ok::<_, anyhow::Error>(()) /* POST … */ }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create<T, E, F>(&self, kind: &str, name: &str, request: F) -> crate::Result<T>
    where
        F: Future<Output = Result<T, E>>,
        E: Into<anyhow::Error>,
    {
        // Without a pod there is nothing to create on (the test is skipped
        // with the reason) and nothing to delete from: check before journaling.
        self.pod()?;
        let request = async { request.await.map(|v| (v, None)).map_err(Into::into) };
        let started = std::time::Instant::now();
        let created = self.resources.create(self.run, kind, name, request).await;
        crate::trace::created(kind, name, started, &created);
        created
    }

    /// [`Cx::create`] for a service that assigns its own ids: `request`
    /// answers the id with the value, `(id, value)`. The name (`name`, which
    /// carries the run id, in a field or label of the resource) is journaled
    /// before the request; the id when it is answered. Cleanup and the reaper
    /// delete by id, and find the id by listing the name when the request was
    /// never answered.
    ///
    /// ```no_run
    /// # async fn f(cx: &testkit::Cx) -> testkit::Result {
    /// let name = cx.unique_name_for("record")?;
    /// let record = cx
    ///     .create_with_id("record", &name, async {
    ///         let id = String::from("abc123"); // POST …, read the id from the answer
    ///         Ok::<_, anyhow::Error>((id.clone(), id))
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_with_id<T, E, F>(
        &self,
        kind: &str,
        name: &str,
        request: F,
    ) -> crate::Result<T>
    where
        F: Future<Output = Result<(String, T), E>>,
        E: Into<anyhow::Error>,
    {
        self.pod()?;
        let request = async {
            request
                .await
                .map(|(id, v)| (v, Some(id)))
                .map_err(Into::into)
        };
        let started = std::time::Instant::now();
        let created = self.resources.create(self.run, kind, name, request).await;
        crate::trace::created(kind, name, started, &created);
        created
    }

    /// A new name for a resource of `kind`, in the kind's alphabet
    /// (`[resources.KIND] names`): `pb_<run id>_<test tag>_<nn>` for a kind
    /// whose names are `^\w+$`. The same guarantees as [`Cx::unique_name`].
    pub fn unique_name_for(&self, kind: &str) -> crate::Result<String> {
        self.resources.unique_name_for(&self.run.id, kind)
    }

    /// Stops tracking a resource the test deleted itself and verified gone.
    pub fn forget(&self, kind: &str, name: &str) {
        self.resources.forget(kind, name)
    }

    /// The faults this test injects into the nodes of its pod (a pod of
    /// several, `[pod.container.nodes]`): each undone at the end of the
    /// test, whatever happens, and proven undone. Only a test marked
    /// `#[testkit::test(exclusive)]` may inject them.
    pub fn faults(&self) -> crate::Faults<'_> {
        crate::Faults {
            tracker: &self.resources,
            run: self.run,
            exclusive: self.is_exclusive(),
        }
    }

    /// The test's history: the operations its clients perform against the
    /// service, to check once they are done (the book:
    /// `book/src/history.md#checking-a-history`). Each client records an operation before it sends it and
    /// completes it when the answer is in; the history is written to
    /// `history.json` in the test's artifacts folder when the test ends, and
    /// named in its record. Cheap to clone: one per client task.
    ///
    /// ```no_run
    /// use testkit::history::{Check, Op};
    /// use testkit::prelude::*;
    ///
    /// /// Three clients write and read `x` while worker-2 is frozen: what
    /// /// they saw must be linearizable.
    /// #[testkit::test(exclusive, timeout = "2m")]
    /// async fn x_stays_linearizable_under_a_pause(cx: &mut Cx) -> testkit::Result {
    ///     let pod = cx.pod()?;
    ///     let history = cx.history();
    ///     cx.faults().pause("worker-2").await?;
    ///     let mut clients = Vec::new();
    ///     for client in 0..3u32 {
    ///         let h = history.clone();
    ///         clients.push(tokio::spawn(async move {
    ///             for i in 0..20 {
    ///                 let value = i64::from(client * 100 + i);
    ///                 let op = h.invoke(client, Op::write("x", value));
    ///                 let put = pod.client().put(pod.url("/kv/x")).body(value.to_string());
    ///                 match put.send().await {
    ///                     Ok(r) if r.status().is_success() => op.ok(()),
    ///                     // Refused before anything was done: certainly not written.
    ///                     Ok(r) if r.status().is_client_error() => op.fail(),
    ///                     // A timeout, a 5xx: written or not, nobody knows.
    ///                     _ => op.info(),
    ///                 }
    ///                 let op = h.invoke(client, Op::read("x"));
    ///                 let read = pod.client().get(pod.url("/kv/x")).send().await?;
    ///                 // `?` drops `op` uncompleted: it is recorded as info.
    ///                 op.ok(read.error_for_status()?.text().await?.parse::<i64>()?);
    ///             }
    ///             testkit::Result::<()>::Ok(())
    ///         }));
    ///     }
    ///     for c in clients {
    ///         c.await??;
    ///     }
    ///     history.check(Check::register()).await?;
    ///     Ok(())
    /// }
    /// # fn main() {}
    /// ```
    pub fn history(&self) -> crate::history::History {
        self.history
            .get_or_init(|| crate::engine::history::History::new(&self.full_name))
            .clone()
    }

    /// The history, when the test asked for it.
    pub(crate) fn recorded_history(&self) -> Option<&crate::engine::history::History> {
        self.history.get()
    }

    /// Runs the suite's CLI with `args` against the pod (default timeout 60 s).
    pub async fn cli(&self, args: &[&str]) -> crate::Result<CliOutput> {
        self.cli_command(args).run().await
    }

    /// A CLI run to configure before running it.
    pub fn cli_command(&self, args: &[&str]) -> CliCommand<'_> {
        CliCommand::new(&self.log, args)
    }

    /// A page in a fresh headless Chromium of this test's own, signed in to
    /// the pod like [`Pod::client`] and showing its base URL. The harness
    /// ends the browser when the test ends, whatever happened; a test that
    /// opened one must save a screenshot ([`Page::screenshot`](crate::browser::Page::screenshot))
    /// or it fails. Skipped when there is no pod or `TESTKIT_BROWSER=off`;
    /// without Chromium the test fails, saying how to install it.
    #[cfg(feature = "browser")]
    pub async fn browser(&self) -> crate::Result<crate::browser::Page> {
        self.open_browser(true).await
    }

    /// [`browser`](Self::browser) without credentials: what an anonymous
    /// visitor sees.
    #[cfg(feature = "browser")]
    pub async fn browser_signed_out(&self) -> crate::Result<crate::browser::Page> {
        self.open_browser(false).await
    }

    #[cfg(feature = "browser")]
    async fn open_browser(&self, signed_in: bool) -> crate::Result<crate::browser::Page> {
        crate::browser::check_enabled()?;
        let pod = self.pod()?;
        self.browsers
            .open(self.run, pod, &self.artifacts_dir, signed_in)
            .await
    }

    /// Ends the test's browsers, each under `cap`, after saving the failure
    /// evidence when `failed`.
    #[cfg(feature = "browser")]
    pub(crate) async fn finish_browsers(
        &self,
        failed: bool,
        cap: std::time::Duration,
    ) -> crate::browser::BrowserSummary {
        self.browsers.finish(self.run, failed, cap).await
    }

    /// Deletes what the test created, newest first, and verifies it is gone,
    /// or keeps it when `keep` says so.
    pub(crate) async fn finish(&self, keep: Keep, body_failed: bool) -> CleanupSummary {
        self.resources.finish(keep, body_failed).await
    }
}

impl crate::engine::wait::WaitLog for Cx {
    fn wait_log(&self, line: String) {
        self.log.push(line);
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

/// The step a test is in, and since when: shared with the hang report,
/// which reads it from another task.
#[derive(Clone, Default)]
pub(crate) struct CurrentStep(
    std::sync::Arc<std::sync::Mutex<Option<(String, std::time::Instant)>>>,
);

impl CurrentStep {
    fn set(&self, name: String) {
        let mut step = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *step = Some((name, std::time::Instant::now()));
    }

    /// The step, and how long the test has been in it.
    pub(crate) fn now(&self) -> Option<(String, std::time::Duration)> {
        let step = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        step.as_ref()
            .map(|(name, since)| (name.clone(), since.elapsed()))
    }
}
