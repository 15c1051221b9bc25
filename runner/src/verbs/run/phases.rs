//! The six phases of a run, one function each, in the order they run: up,
//! health, auth, tests, residue, down. Each decides its verdict, appends it
//! to `verdict.jsonl` at once, and hands the next phase what it needs; a
//! phase whose input is missing (no pod, no session) is a skip that says why.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit_engine::settings::var;

use testkit_engine::pod::{LaunchedPod, Pod, PodHandle};
use testkit_engine::resource::{PodHome, SweepBounds};

use super::plan::Plan;
use super::pod;
use super::signal::Interrupt;
use super::suite::{self, TestsOutcome};
use super::watch::{self, Crash, NodeDeath, PodWatch};
use crate::errors::{ExpectedError, RunFailure};
use crate::summary::RunSummary;
use crate::verdict::{PhaseResult, Verdict, VerdictLog};

/// The pod of a run, as the up phase left it.
pub(super) enum RunPod {
    /// The caller's (`--handle-json`): validated, never stopped. Boxed, as
    /// the started pod is: a handle of a multi-node pod is large.
    Caller(Box<PodHandle>),
    /// Started by the runner, which stops it (unless `--keep`).
    Started(Box<LaunchedPod>),
    /// The start failed, and stopped what it began.
    NotUp,
}

impl RunPod {
    fn handle(&self) -> Option<&PodHandle> {
        match self {
            RunPod::Caller(h) => Some(h.as_ref()),
            RunPod::Started(p) => Some(&p.handle),
            RunPod::NotUp => None,
        }
    }

    /// Where the pod's HOME is, for the witnesses that look in it: only a
    /// pod the runner started as a process has one on this machine. (A
    /// container pod's private dir has a `home/` too, which it never uses:
    /// a witness listing it would always find nothing.)
    fn home(&self, mode: crate::containers::PodMode) -> PodHome<'_> {
        match self {
            RunPod::Started(p) if mode == crate::containers::PodMode::Process => {
                PodHome::Here(&p.home)
            }
            RunPod::Started(_) if mode == crate::containers::PodMode::Vm => PodHome::Unknown(
                "the pod is a machine (a QEMU guest), whose HOME is inside it, not on this machine"
                    .to_owned(),
            ),
            RunPod::Started(_) => PodHome::Unknown(
                "the pod is a container, whose HOME is inside it, not on this machine".to_owned(),
            ),
            RunPod::Caller(_) => PodHome::Unknown(
                "the pod is the caller's (--handle-json), whose HOME the runner does not know"
                    .to_owned(),
            ),
            RunPod::NotUp => PodHome::Unknown("the pod did not come up".to_owned()),
        }
    }
}

/// A run in progress: its plan, the phases decided so far, and the interrupt.
pub(super) struct Run<'a> {
    plan: &'a Plan,
    log: VerdictLog,
    phases: Vec<PhaseResult>,
    interrupt: Interrupt,
    started: Instant,
    /// `<results>/pod`: the pod's logs and its handle, redacted.
    pod_dir: PathBuf,
    /// The run's secrets dir, outside the results folder: the handle the
    /// tests use and their session. Removed when the run ends.
    secrets_dir: PathBuf,
    handle_file: PathBuf,
    /// The crash watch over a pod the runner started.
    watch: Option<PodWatch>,
    /// Its `pod ls` record, removed when it goes down.
    record_dir: Option<PathBuf>,
    /// The pod's crash, once noticed (and given its verdict).
    crash: Option<Crash>,
    /// The exits of nodes of a pod of several that no fault of a test
    /// explains, once noticed (and given their verdict).
    node_deaths: Vec<NodeDeath>,
    /// Why its nodes could not be watched, once said in a verdict.
    nodes_blind: Option<String>,
    /// The residue phase could not list or sweep everything: what is left
    /// on the pod is unknown, and the run could not complete.
    residue_unknown: bool,
    /// The id of the run's pod (the value of its `testkit.pod` label) when
    /// it is a container the run started: the residue sweep leaves it to
    /// the down phase.
    own_pod: Option<String>,
    /// A machine pod whose boot failed: what ending its machine left
    /// (`Err`), or that nothing was (`Ok`), for the down phase.
    failed_machine: Option<Result<(), String>>,
}

impl<'a> Run<'a> {
    /// Announces the run, opens `verdict.jsonl` and starts listening for
    /// Ctrl-C and SIGTERM.
    pub(super) fn begin(plan: &'a Plan) -> Result<Run<'a>, ExpectedError> {
        println!("run id: {}", plan.run_id);
        println!("results: {}", plan.results_dir.display());
        let log = VerdictLog::create(&plan.results_dir, &plan.run_id).map_err(|e| {
            ExpectedError::bad_args(format_args!(
                "cannot create verdict.jsonl in {}: {e}",
                plan.results_dir.display()
            ))
        })?;
        if let Some(dead) = plan.claim.taken_over() {
            println!(
                "run id {0}: taking over the secrets dir of run {0} from testkit-runner pid {1}, which is gone: {2}",
                plan.run_id,
                dead.pid,
                plan.claim.dir().display()
            );
        }
        // A rerun says what it reruns before anything starts, and every
        // report of the run says it again with how those tests came out.
        if let Some(rerun) = &plan.rerun {
            match rerun.tests.len() {
                0 => println!("rerunning every test: {} ran none", rerun.source()),
                n => println!(
                    "rerunning {n} tests that failed, were killed or never ran in {}",
                    rerun.source()
                ),
            }
            rerun.write(&plan.results_dir).map_err(|e| {
                ExpectedError::bad_args(format_args!(
                    "cannot write {} in {}: {e}",
                    crate::rerun::FILE,
                    plan.results_dir.display()
                ))
            })?;
        }
        let interrupt = Interrupt::install();
        let pod_dir = plan.results_dir.join("pod");
        let _ = std::fs::create_dir_all(&pod_dir);
        // Word of an earlier run's `pod down` is not about this run's pod.
        let _ = std::fs::remove_file(crate::verbs::pod::stopped_by_file(&plan.results_dir));
        let secrets_dir = plan.claim.dir().to_owned();
        Ok(Run {
            plan,
            log,
            phases: Vec::new(),
            interrupt,
            started: Instant::now(),
            handle_file: secrets_dir.join("handle.json"),
            secrets_dir,
            pod_dir,
            watch: None,
            record_dir: None,
            crash: None,
            node_deaths: Vec::new(),
            nodes_blind: None,
            residue_unknown: false,
            own_pod: None,
            failed_machine: None,
        })
    }

    fn decide(&mut self, mut r: PhaseResult) {
        // A verdict changed after it was made keeps its category in step.
        r.category = match (r.verdict, r.category) {
            (Verdict::Fail, None) => Some(crate::verdict::phase_category(r.phase)),
            (Verdict::Fail, category) => category,
            _ => None,
        };
        // On a terminal, each verdict as it is decided; elsewhere the
        // summary at the end says it all.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            suite::clear_progress();
            eprintln!("{:<8} {:<4}  {}", r.phase, r.verdict.word(), r.evidence);
        }
        self.log.append(&r);
        self.phases.push(r);
    }

    /// up: take the caller's pod, or start one; either way its handle is
    /// written where the tests find it.
    pub(super) async fn up(&mut self) -> RunPod {
        let started = Instant::now();
        suite::progress_line("up: starting the pod");
        let pod = match &self.plan.caller_handle {
            Some((handle, path)) => {
                let evidence = format!(
                    "the caller's pod {} at {} (handle {} validated; it is never stopped)",
                    handle.name(),
                    handle.base_url(),
                    path.display()
                );
                self.decide(PhaseResult::new(
                    "up",
                    Verdict::Pass,
                    evidence,
                    started.elapsed(),
                ));
                RunPod::Caller(Box::new(handle.clone()))
            }
            None => self.start_pod(started).await,
        };
        if let Some(h) = pod.handle() {
            if let Err(e) = h.write_file(&self.handle_file) {
                eprintln!(
                    "testkit-runner: failed to write {}: {e}",
                    self.handle_file.display()
                );
            }
            // What the results folder may say of the pod: no credential.
            let shown = self.pod_dir.join("handle.json");
            if let Err(e) = std::fs::write(&shown, h.to_redacted_json()) {
                eprintln!("testkit-runner: failed to write {}: {e}", shown.display());
            }
        }
        pod
    }

    /// Starts the pod under a watchdog armed before the boot (a runner
    /// killed mid-boot leaves nothing running), and gives up the boot at
    /// Ctrl-C or SIGTERM, ending what it made.
    async fn start_pod(&mut self, started: Instant) -> RunPod {
        let logs = self.pod_dir.join("logs");
        if let Err(e) = watch::arm(&logs, &self.secrets_dir) {
            self.decide(PhaseResult::new(
                "up",
                Verdict::Fail,
                format!(
                    "{}: a runner killed while the pod runs would leave it running, so it was not \
                     started",
                    testkit_engine::error_chain(&e)
                ),
                started.elapsed(),
            ));
            return RunPod::NotUp;
        }
        let run =
            crate::verbs::pod::RunOfPod::this_runner(&self.plan.run_id, &self.plan.results_dir);
        let pods = crate::verbs::pod::pods_dir(&self.plan.settings);
        let record = crate::verbs::pod::BootingRecord::new(
            &pods,
            run,
            &self.plan.config.pod.health_path,
            &logs,
            &self.secrets_dir,
        );
        let booting_record = record.dir().to_owned();
        let boot = pod::start(self.plan, &logs, watch::boot_observer(record));
        let mut interrupt = self.interrupt.clone();
        let booted = tokio::select! {
            booted = boot => booted,
            _ = interrupt.more_than(0) => {
                let _ = std::fs::remove_dir_all(&booting_record);
                let evidence = match watch::end_interrupted_boot(&logs).await {
                    Ok(ended) => format!("interrupted while the pod booted: {ended}"),
                    Err(left) => format!("interrupted while the pod booted, and ending the boot failed: {left}"),
                };
                self.decide(PhaseResult::new("up", Verdict::Fail, evidence, started.elapsed()));
                return RunPod::NotUp;
            }
        };
        let _ = std::fs::remove_dir_all(&booting_record);
        let p = match booted {
            Ok(p) => p,
            Err(e) => {
                if self.plan.pod_mode == crate::containers::PodMode::Vm {
                    self.failed_machine = e.machine_teardown();
                }
                let e = testkit_engine::error_chain(&e);
                let e = match crate::verbs::pod::stopped_by(&self.plan.results_dir) {
                    Some(by) => format!(
                        "the pod was stopped by `pod down` (pid {}) while it booted: {e}",
                        by.pid
                    ),
                    None => e,
                };
                self.decide(PhaseResult::new("up", Verdict::Fail, e, started.elapsed()));
                return RunPod::NotUp;
            }
        };
        self.own_pod = crate::containers::own_pod(&p.private_dir);
        self.guard(&p);
        let machine = p
            .machine_summary()
            .map(|m| format!(", {m}"))
            .unwrap_or_default();
        let evidence = format!(
            "started pod {} at {} (pid {}{}{machine}) in {}, under a watchdog that stops it if the runner dies",
            p.handle.name(),
            p.handle.base_url(),
            p.pid,
            crate::containers::describe(&p.private_dir),
            humantime::format_duration(round_ms(p.boot_time))
        );
        self.decide(PhaseResult::new(
            "up",
            Verdict::Pass,
            evidence,
            started.elapsed(),
        ));
        RunPod::Started(Box::new(p))
    }

    /// Lists a pod the runner started for `pod ls` (its watchdog removes
    /// the record with it), and puts it under its crash watch.
    fn guard(&mut self, p: &LaunchedPod) {
        let health = p
            .handle
            .health()
            .unwrap_or(&self.plan.config.pod.health_path)
            .to_owned();
        let run =
            crate::verbs::pod::RunOfPod::this_runner(&self.plan.run_id, &self.plan.results_dir);
        let pods = crate::verbs::pod::pods_dir(&self.plan.settings);
        self.record_dir =
            match crate::verbs::pod::record_run_pod(&pods, p, &health, run, &self.secrets_dir) {
                Ok(dir) => {
                    watch::tell_record(&dir);
                    Some(dir)
                }
                Err(e) => {
                    // Still stopped by the watchdog; only `pod ls` will not show it.
                    eprintln!(
                        "testkit-runner: cannot list pod {} for `pod ls`: {e}",
                        p.handle.name()
                    );
                    None
                }
            };
        self.watch = Some(PodWatch::start(p, &self.plan.results_dir));
    }

    /// Whether the pod is gone: its process crashed or was stopped by `pod
    /// down`, or the entry node of a pod of several exited. What is seen
    /// the first time is its own verdict, `pod`: the crash, or the exits of
    /// nodes that no fault of a test explains.
    pub(super) fn pod_gone(&mut self) -> bool {
        if !self.pod_crashed() {
            self.nodes_exited();
        }
        self.crash.is_some() || self.entry_death().is_some()
    }

    /// The exit of the entry node of a pod of several, when one was seen.
    fn entry_death(&self) -> Option<&NodeDeath> {
        self.node_deaths.iter().find(|d| d.entry)
    }

    /// Decides a `pod` verdict for the node exits no fault explains that
    /// have not had one yet, and for a node watch gone blind.
    fn nodes_exited(&mut self) {
        let Some(watch) = self.watch.as_ref() else {
            return;
        };
        // `pod down` ends the nodes before the pod's process: its stop is
        // named once that process exits, not as the nodes' exits.
        if crate::verbs::pod::stopped_by(&self.plan.results_dir).is_some() {
            return;
        }
        let (deaths, blind) = watch.node_deaths(&self.plan.results_dir);
        let mut new: Vec<NodeDeath> = deaths
            .into_iter()
            .filter(|d| {
                !self
                    .node_deaths
                    .iter()
                    .any(|o| o.exit.container == d.exit.container && o.exit.at == d.exit.at)
            })
            .collect();
        if !new.is_empty() {
            // Their last lines were redacted of what the runner knew then.
            testkit_engine::redact::register_recorded(&self.secrets_dir);
            for line in new.iter_mut().flat_map(|d| d.exit.last_lines.iter_mut()) {
                *line = testkit_engine::redact(line).into_owned();
            }
            let evidence = new
                .iter()
                .map(NodeDeath::describe)
                .collect::<Vec<_>>()
                .join("; ");
            self.decide(PhaseResult::new(
                "pod",
                Verdict::Fail,
                evidence,
                new[0].after,
            ));
            self.node_deaths.extend(new);
        }
        if let (Some(why), None) = (blind, &self.nodes_blind) {
            self.decide(PhaseResult::new(
                "pod",
                Verdict::Fail,
                format!(
                    "the pod's nodes were not watched to the end ({why}): a node that \
                     exited mid-run would go unseen"
                ),
                Duration::ZERO,
            ));
            self.nodes_blind = Some(why);
        }
    }

    /// Whether the pod's process crashed or was stopped by `pod down`; the
    /// first time, its own verdict, `pod`.
    fn pod_crashed(&mut self) -> bool {
        if self.crash.is_some() {
            return true;
        }
        let Some(mut c) = self.watch.as_ref().and_then(PodWatch::crash) else {
            return false;
        };
        // Its last lines were redacted of what the runner knew then; the
        // tests may have obtained credentials since.
        testkit_engine::redact::register_recorded(&self.secrets_dir);
        for line in &mut c.last_lines {
            *line = testkit_engine::redact(line).into_owned();
        }
        self.decide(PhaseResult::new(
            "pod",
            Verdict::Fail,
            c.describe(),
            c.after,
        ));
        self.crash = Some(c);
        true
    }

    /// health: measured, never assumed. Whether the pod is reachable.
    pub(super) async fn health(&mut self, pod: &RunPod) -> bool {
        let Some(h) = pod.handle() else {
            self.decide(PhaseResult::skip("health", "the pod did not come up"));
            return false;
        };
        if self.interrupt.requested() {
            self.decide(PhaseResult::skip("health", "interrupted"));
            return false;
        }
        let started = Instant::now();
        let path = h
            .health()
            .unwrap_or(&self.plan.config.pod.health_path)
            .to_owned();
        let report = pod::measure_health(h, &path).await;
        let verdict = if report.ok() {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        self.decide(PhaseResult::new(
            "health",
            verdict,
            report.summary(),
            started.elapsed(),
        ));
        report.ok()
    }

    /// auth: the token is accepted and its absence refused; then the session
    /// every test process reuses is opened.
    pub(super) async fn auth(&mut self, pod: &RunPod, healthy: bool) -> Option<Pod> {
        let Some(h) = pod.handle() else {
            self.decide(PhaseResult::skip("auth", "the pod did not come up"));
            return None;
        };
        if self.interrupt.requested() {
            self.decide(PhaseResult::skip("auth", "interrupted"));
            return None;
        }
        if !healthy {
            self.decide(PhaseResult::skip("auth", "the pod is not healthy"));
            return None;
        }
        let started = Instant::now();
        // Log in (or take the handle's credential) and open the session every
        // test process reuses, then check the credential really matters.
        let p = match testkit_engine::pod::connect(
            h.clone(),
            &self.plan.config,
            Some(&self.secrets_dir),
        )
        .await
        {
            Ok(p) => p.for_run(&self.plan.run_id),
            Err(e) => {
                self.decide(PhaseResult::new(
                    "auth",
                    Verdict::Fail,
                    format!("opening the session failed: {e}"),
                    started.elapsed(),
                ));
                return None;
            }
        };
        let report = testkit_engine::pod::check_auth(&p, Duration::from_secs(10)).await;
        let checked = match &report {
            Some(r) if !r.ok() => {
                self.decide(PhaseResult::new(
                    "auth",
                    Verdict::Fail,
                    r.summary(),
                    started.elapsed(),
                ));
                return None;
            }
            Some(r) => r.summary(),
            None => "the suite's [auth] sends no credential (send = \"none\", no probe): nothing to check".to_owned(),
        };
        let evidence = format!(
            "{checked}; session opened for the tests; capabilities: {}",
            if p.capabilities().is_empty() {
                "none".to_owned()
            } else {
                p.capabilities().join(", ")
            }
        );
        self.decide(PhaseResult::new(
            "auth",
            Verdict::Pass,
            evidence,
            started.elapsed(),
        ));
        Some(p)
    }

    /// tests: build the suite and run it against the authenticated pod.
    pub(super) async fn tests(&mut self, session: Option<&Pod>) -> Option<TestsOutcome> {
        if self.interrupt.requested() {
            self.decide(PhaseResult::skip(
                "tests",
                "interrupted before the tests started",
            ));
            return None;
        }
        if session.is_none() {
            self.decide(PhaseResult::skip("tests", "no authenticated pod to test"));
            return None;
        }
        let plan = self.plan;
        let spec = suite::TestsSpec {
            suite_dir: &plan.suite_dir,
            results_dir: &plan.results_dir,
            run_id: &plan.run_id,
            engine: plan.engine,
            archive: plan.archive.as_deref(),
            filters: &plan.filters,
            partition: plan.partition.as_deref(),
            extra: &plan.extra,
            env: test_env(plan, &self.handle_file),
            show_output: plan.show_output,
            secrets_dir: &self.secrets_dir,
            flaky: plan.config.suite.flaky,
            retries: plan.config.suite.retries,
        };
        let mut outcome = suite::run_tests(&spec, &mut self.interrupt).await;
        self.end_left_running(&mut outcome.result).await;
        // The tests phase is whose fault its failed tests are, the first
        // category in triage order (the product's before the others).
        if let Some(category) = outcome.failures.iter().map(|f| f.category).min() {
            outcome.result.category = Some(category);
        }
        self.decide(outcome.result.clone());
        self.pod_gone();
        Some(outcome)
    }

    /// Ends what the tests left running that no test process judged: a
    /// test process killed before its test ended (a crash, a timeout)
    /// never did. Whatever still carries the tag of one of the run's test
    /// processes (`TESTKIT_PROCESS_TAG`, which starts with the run id)
    /// once they all ended is that; it fails the tests phase, named.
    async fn end_left_running(&self, result: &mut PhaseResult) {
        use testkit_engine::process;
        let prefix = format!("{}.", self.plan.run_id);
        let left = process::with_env_prefix(var::PROCESS_TAG, &prefix);
        if left.is_empty() {
            return;
        }
        let named = left
            .iter()
            .map(|p| format!("pid {} `{}`", p.0, process::command_of(p.0)))
            .collect::<Vec<_>>()
            .join(", ");
        // As the tests themselves would: kept when the run asks to keep them.
        let keep = self.plan.settings.keep_processes != testkit_engine::settings::Keep::Never;
        let fate = if keep {
            format!("kept running ({})", var::KEEP_PROCESSES)
        } else {
            match process::end_processes(&left, Duration::from_secs(2)).await {
                Ok(_) => "ended, verified gone".to_owned(),
                Err(survivors) => {
                    format!("ending them failed: {survivors:?} survived SIGTERM and SIGKILL")
                }
            }
        };
        result.verdict = Verdict::Fail;
        result.evidence.push_str(&format!(
            "; {} process(es) the tests started were still running after every test process \
             ended: {named}; {fate}",
            left.len()
        ));
    }

    /// residue: anything on the pod that carries the run id is a leak, and
    /// so is anything a witness finds below the API. Returns the leaks,
    /// each with what became of it.
    pub(super) async fn residue(
        &mut self,
        session: Option<&Pod>,
        binaries: &[std::path::PathBuf],
        pod: &RunPod,
    ) -> Vec<String> {
        let Some(p) = session else {
            self.decide(PhaseResult::skip(
                "residue",
                "no authenticated pod to sweep",
            ));
            return Vec::new();
        };
        if self.pod_gone() {
            return self.residue_of_crashed();
        }
        let started = Instant::now();
        suite::progress_line("residue: listing every resource kind by the run id");
        let plan = self.plan;
        // A signal during the sweep cuts it short (one before it, which
        // stopped the tests, does not: the sweep is the cleanup).
        let mut interrupt = self.interrupt.clone();
        let seen = interrupt.count();
        let bounds = SweepBounds::default()
            .deadline(plan.settings.sweep_deadline)
            .stop_on(
                async move {
                    interrupt.more_than(seen).await;
                },
                "interrupted (SIGINT/SIGTERM)",
            );
        let own_pod = self.own_pod.clone();
        let spec = pod::ResidueSpec {
            own_pod: own_pod.as_deref(),
            kinds: &plan.kinds,
            prefix: &plan.config.suite.name_prefix,
            run_id: &plan.run_id,
            results_dir: &plan.results_dir,
            sweeper: binaries
                .first()
                .map(|b| (b.as_path(), test_env(plan, &self.handle_file))),
            bounds,
        };
        let witnesses = pod::WitnessSpec {
            witnesses: &plan.config.witnesses,
            home: pod.home(plan.pod_mode),
            public_fields: &plan.config.pod.public_fields,
            suite_dir: &plan.suite_dir,
            env: test_env(plan, &self.handle_file),
        };
        let (verdict, mut evidence, leaks, unknown) = pod::residue(p, spec, witnesses).await;
        if verdict == Verdict::Fail {
            // A node that exited during the sweep may be why it failed.
            self.pod_gone();
        }
        if verdict == Verdict::Fail && !self.node_deaths.is_empty() {
            // What failed may be why: say which nodes were gone.
            let nodes: Vec<String> = self
                .node_deaths
                .iter()
                .map(|d| format!("`{}`", d.exit.node))
                .collect();
            evidence.push_str(&format!(
                "; node {} had exited mid-run (see `pod`)",
                nodes.join(", ")
            ));
        }
        self.residue_unknown = unknown;
        self.decide(PhaseResult::new(
            "residue",
            verdict,
            evidence,
            started.elapsed(),
        ));
        leaks
    }

    /// The residue of a pod that is gone (it crashed, its entry node
    /// exited): nothing can be listed on it, and the journal still says
    /// what was left.
    fn residue_of_crashed(&mut self) -> Vec<String> {
        let what = match (&self.crash, self.entry_death()) {
            (Some(c), _) => c.what().to_owned(),
            (None, Some(d)) => format!("the entry node `{}` exited", d.exit.node),
            (None, None) => "the pod crashed".to_owned(),
        };
        // Nothing can be swept, but the journal still says what was left.
        let entries = testkit_engine::resource::read_journal(&self.plan.results_dir);
        let leaks: Vec<String> = testkit_engine::resource::outstanding(&entries)
            .into_iter()
            .filter(|o| o.run == self.plan.run_id)
            .map(|o| {
                format!(
                    "{} `{}`: left on the pod, which is gone (the journal has no verified delete)",
                    o.kind, o.name
                )
            })
            .collect();
        let left = if leaks.is_empty() {
            "the journal names nothing left".to_owned()
        } else {
            format!(
                "the journal names {} left: {}",
                leaks.len(),
                leaks.join("; ")
            )
        };
        self.decide(PhaseResult::skip(
            "residue",
            format!("{what} (see `pod`): nothing can be listed on it; {left}"),
        ));
        leaks
    }

    /// down: stop a pod the runner started and verify it gone; a caller's
    /// pod, or one kept by `--keep`, is left running. Returns how to reach
    /// and stop a kept pod.
    pub(super) async fn down(&mut self, pod: RunPod) -> Option<String> {
        // An exit in the last poll's interval is the pod's, seen now: not
        // taken for what the stop did.
        if let Some(watch) = &self.watch {
            watch.settle().await;
        }
        match pod {
            RunPod::Caller(_) => {
                self.decide(PhaseResult::skip(
                    "down",
                    "the caller's pod is left running: the runner never stops it",
                ));
                None
            }
            RunPod::NotUp if self.failed_machine.is_some() => {
                // The failed boot brought its machine down, or said what
                // that left.
                watch::disarm();
                let logs = self.pod_dir.join("logs");
                let (verdict, evidence) = match self.failed_machine.take() {
                    Some(Err(left)) => (
                        Verdict::Fail,
                        format!(
                            "the failed boot's machine did not end cleanly: {left}; logs kept in {}",
                            logs.display()
                        ),
                    ),
                    _ => (
                        Verdict::Pass,
                        format!(
                            "the failed boot ended what it had made of its machine: QEMU's \
                             process group and its run dir (the overlay) verified gone; logs \
                             kept in {}",
                            logs.display()
                        ),
                    ),
                };
                self.decide(PhaseResult::new("down", verdict, evidence, Duration::ZERO));
                None
            }
            RunPod::NotUp => {
                // The failed or interrupted boot ended what it made.
                watch::disarm();
                let logs = self.pod_dir.join("logs");
                self.decide(PhaseResult::skip(
                    "down",
                    format!(
                        "nothing to stop: the failed start stopped what it began; logs kept in {}",
                        logs.display()
                    ),
                ));
                None
            }
            RunPod::Started(mut p) if self.plan.keep && !self.pod_gone() => {
                // Kept: the watchdog lets it be, `pod ls` still lists it; a
                // machine's guard is released, QEMU runs on.
                let machine = match p.keep_machine().await {
                    Ok(record) => record,
                    Err(e) => {
                        // Not kept: its guard ends it with this process.
                        self.decide(PhaseResult::new(
                            "down",
                            Verdict::Fail,
                            format!(
                                "--keep: the machine could not be let go, so it ends with the \
                                 runner: {}",
                                testkit_engine::error_chain(&e)
                            ),
                            Duration::ZERO,
                        ));
                        return None;
                    }
                };
                if let Some(record) = &machine {
                    watch::keep_machine(record.pgid, &record.run_dir);
                }
                watch::disarm();
                let note =
                    pod::keep_note(&p, machine.as_ref(), &self.handle_file, &self.plan.run_id);
                self.decide(PhaseResult::skip(
                    "down",
                    format!(
                        "kept running (--keep): pod {} at {}, pid {}",
                        p.handle.name(),
                        p.handle.base_url(),
                        p.pid
                    ),
                ));
                Some(note)
            }
            RunPod::Started(p) => {
                let started = Instant::now();
                suite::progress_line("down: stopping the pod");
                // Its logs are redacted as they are kept: with every
                // credential the run's processes obtained.
                testkit_engine::redact::register_recorded(&self.secrets_dir);
                self.pod_gone();
                let seen = self.watch.take().map(PodWatch::stop).unwrap_or_default();
                let (mut verdict, mut evidence) =
                    pod::stop(*p, self.plan.config.pod.stop_grace).await;
                // What the pod's tree held and outlived it (a crashed pod's
                // sandbox processes, reparented away from its tree).
                match watch::end_left_behind(&seen).await {
                    Ok(0) => {}
                    Ok(n) => evidence.push_str(&format!(
                        "; {n} processes the pod had started outlived it: ended, verified gone"
                    )),
                    Err(survivors) => {
                        verdict = Verdict::Fail;
                        evidence.push_str(&format!(
                            "; processes the pod had started survived SIGTERM and SIGKILL: {survivors:?}"
                        ));
                    }
                }
                if let Some(dir) = self.record_dir.take() {
                    let _ = std::fs::remove_dir_all(dir);
                }
                watch::disarm();
                self.decide(PhaseResult::new(
                    "down",
                    verdict,
                    evidence,
                    started.elapsed(),
                ));
                None
            }
        }
    }

    /// The run's verdict: appended to `verdict.jsonl`, printed as the
    /// summary and written to `summary.md`.
    pub(super) fn finish(
        mut self,
        authenticated: bool,
        tests: Option<TestsOutcome>,
        leaks: Vec<String>,
        keep_note: Option<String>,
    ) -> Result<(), ExpectedError> {
        let interrupted = self.interrupt.requested();
        self.put_away_credentials(keep_note.is_some());
        let result = self.run_result(interrupted, authenticated, tests.as_ref());
        let code = crate::errors::exit_code(&result);
        let verdict = if result.is_ok() {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        self.log.finish(verdict, code);

        let plan = self.plan;
        let rerun_line = plan.rerun.as_ref().map(|rerun| {
            let records: Vec<_> = testkit_engine::report::read_records(&plan.results_dir)
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r.run_id == plan.run_id)
                .collect();
            rerun.line(&records)
        });
        let summary = |code: u8| RunSummary {
            rerun: rerun_line.as_deref(),
            suite: &plan.suite_dir,
            run_id: &plan.run_id,
            results_dir: &plan.results_dir,
            phases: &self.phases,
            tests: tests.as_ref().and_then(|t| t.summary.as_ref()),
            failures: tests
                .as_ref()
                .map(|t| t.failures.as_slice())
                .unwrap_or_default(),
            leaks: &leaks,
            leaks_known: !self.residue_unknown,
            exit_code: code,
            interrupted,
            keep_note: keep_note.as_deref(),
            took: self.started.elapsed(),
            flaky: plan.config.suite.flaky,
        };
        let outputs = write_outputs(
            &mut self.log,
            plan,
            result,
            code,
            &summary,
            &self.phases,
            rerun_line.as_deref(),
        );
        if let Some(markdown) = &outputs.markdown {
            crate::summary::to_github_step_summary(markdown);
        }
        print!("{}", testkit_engine::redact(&summary(outputs.code).text()));
        for problem in &outputs.unwritten {
            println!("  NOT WRITTEN: {problem}");
        }
        crate::summary::print_where_to_look(&plan.results_dir, outputs.report.as_deref());
        outputs.result
    }

    /// Redacts what is written from here on of the run's credentials, and
    /// removes them unless a kept pod needs them.
    fn put_away_credentials(&self, keeping_pod: bool) {
        // Whatever is written from here on is redacted of every credential
        // the run's processes obtained, which the ledger going with the
        // secrets dir below still names.
        testkit_engine::redact::register_recorded(&self.secrets_dir);
        // Live credentials go with the run, unless a kept pod still needs
        // them to be reached.
        if !keeping_pod {
            if let Err(e) = std::fs::remove_dir_all(&self.secrets_dir) {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!(
                        "testkit-runner: failed to remove the run's credentials in {}: {e}",
                        self.secrets_dir.display()
                    );
                }
            }
        }
    }

    /// The run's result from its phases, before its outputs are written.
    fn run_result(
        &self,
        interrupted: bool,
        authenticated: bool,
        tests: Option<&TestsOutcome>,
    ) -> Result<(), ExpectedError> {
        // Without a session the run never got to test the pod.
        // Nor did it when the pod crashed under the tests.
        // Nor did it complete when what the tests left on the pod is unknown.
        // Nor when the entry node of a pod of several went.
        let incomplete = !authenticated
            || self.crash.is_some()
            || self.entry_death().is_some()
            || self.residue_unknown
            || tests.is_some_and(|t| t.incomplete);
        let failed = self.phases.iter().any(|p| p.verdict == Verdict::Fail);
        if interrupted {
            Err(ExpectedError::Run(RunFailure::Interrupted))
        } else if incomplete {
            Err(ExpectedError::Run(RunFailure::Incomplete))
        } else if failed {
            Err(ExpectedError::Run(RunFailure::Failed))
        } else {
            Ok(())
        }
    }
}

/// What writing a run's outputs came to: its result and exit code, which
/// an output not written makes incomplete, `summary.md`'s text and the
/// HTML report, each if written, and what was not.
struct Outputs {
    result: Result<(), ExpectedError>,
    code: u8,
    markdown: Option<String>,
    report: Option<PathBuf>,
    unwritten: Vec<String>,
}

/// Writes `summary.md` and the HTML report of a run whose verdict is
/// `result` (exit code `code`).
fn write_outputs<'s>(
    log: &mut VerdictLog,
    plan: &Plan,
    result: Result<(), ExpectedError>,
    code: u8,
    summary: &dyn Fn(u8) -> RunSummary<'s>,
    phases: &[PhaseResult],
    rerun: Option<&str>,
) -> Outputs {
    let md = plan.results_dir.join("summary.md");
    let write_md = |code: u8| {
        let markdown = testkit_engine::redact(&summary(code).markdown()).into_owned();
        std::fs::write(&md, markdown.as_bytes())
            .map(|()| markdown)
            .map_err(|e| format!("{}: {e}", md.display()))
    };
    // An output the run promised and could not write fails it: the run
    // could not complete, whatever its tests said.
    let mut unwritten: Vec<String> = log.unwritten().map(str::to_owned).into_iter().collect();
    let markdown = write_md(code).map_err(|e| unwritten.push(e)).ok();
    let report = crate::html::write_for_run(&plan.results_dir, &plan.suite_dir, &plan.run_id)
        .map_err(|e| unwritten.push(e.to_string()))
        .ok();
    // What other tools read: the tests as CTRF, the timeline as a trace.
    let records: Vec<_> = testkit_engine::report::read_records(&plan.results_dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.run_id == plan.run_id)
        .collect();
    let dir = &plan.results_dir;
    if let Err(e) = crate::ctrf::write(dir, &plan.run_id, &records, rerun) {
        unwritten.push(format!("{}: {e}", dir.join(crate::ctrf::FILE).display()));
    }
    if let Err(e) = crate::timeline::write(dir, &plan.run_id, phases, &records) {
        unwritten.push(format!(
            "{}: {e}",
            dir.join(crate::timeline::FILE).display()
        ));
    }
    let (mut result, mut code) = (result, code);
    if !unwritten.is_empty() {
        result = Err(ExpectedError::Run(RunFailure::Incomplete));
        code = crate::errors::exit_code(&result);
        // The last `run` line of verdict.jsonl is the run's verdict.
        log.finish(Verdict::Fail, code);
    }
    // Last: the seal of every file the verdict was judged from, so that no
    // later reading of the folder can make the run greener than this.
    let verdict = if result.is_ok() { "pass" } else { "fail" };
    if let Err(e) = crate::seal::write(&plan.results_dir, &plan.run_id, verdict, code) {
        unwritten.push(match std::error::Error::source(&e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        });
        result = Err(ExpectedError::Run(RunFailure::Incomplete));
        code = crate::errors::exit_code(&result);
        log.finish(Verdict::Fail, code);
    }
    let markdown = match (&markdown, unwritten.is_empty()) {
        (Some(markdown), true) => Some(markdown.clone()),
        _ => write_md(code).ok(),
    };
    Outputs {
        result,
        code,
        markdown,
        report,
        unwritten,
    }
}

/// What every test process gets: the run, the results folder, the pod's
/// handle (its session is in `<results>/pod/session.json`), the suite, and a
/// PATH that finds the programs built next to the runner (`sandboxctl`).
fn test_env(plan: &Plan, handle_file: &Path) -> Vec<(String, OsString)> {
    let mut env = vec![
        (var::RUN_ID.to_owned(), OsString::from(&plan.run_id)),
        (
            var::RESULTS_DIR.to_owned(),
            plan.results_dir.as_os_str().to_owned(),
        ),
        (
            var::POD_HANDLE.to_owned(),
            handle_file.as_os_str().to_owned(),
        ),
        (
            var::SECRETS_DIR.to_owned(),
            testkit_engine::run::secrets_dir(&plan.settings, &plan.run_id).into_os_string(),
        ),
        (
            var::SUITE_DIR.to_owned(),
            plan.suite_dir.as_os_str().to_owned(),
        ),
    ];
    if let Some(path) = pod::path_with_exe_dir() {
        env.push(("PATH".to_owned(), path));
    }
    env
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}
