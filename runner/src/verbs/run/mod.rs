//! `testkit-runner run SUITE_DIR`: the main job. Phases, in order, each
//! with a verdict appended to `verdict.jsonl` as soon as it is decided:
//! up, health, auth, tests, residue, down. See `--help` for the exit codes.
//!
//! `plan` turns the arguments into what the run will do (every usage error
//! is found there), `phases` has a function per phase, `pod` what the pod
//! phases do to the pod, `suite` the tests phase, `signal` the Ctrl-C
//! they all heed, and `status` SIGUSR1's report of what the tests are
//! doing. The verdicts they give, and `verdict.jsonl` they append
//! to, are the crate's `verdict` module: the summary and the container
//! sweep give them too.

mod phases;
mod plan;
mod pod;
mod select;
mod signal;
mod status;
mod suite;
mod watch;

use std::path::PathBuf;

use clap::Args;

use crate::errors::ExpectedError;
use phases::Run;
pub(crate) use plan::default_results_root;
use plan::{Plan, Planned};
pub(crate) use suite::Engine;
pub(crate) use watch::{watchdog, WatchArgs};

/// `testkit-runner run`.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The suite: a Cargo workspace with its `testkit.toml`.
    suite: PathBuf,
    /// The results folder (default: `<target dir>/testkit/runs/<run id>`).
    #[arg(long, value_name = "DIR")]
    results: Option<PathBuf>,
    /// Use the caller's pod (a handle JSON file) instead of starting one;
    /// it is validated, and never stopped.
    #[arg(long, value_name = "FILE")]
    handle_json: Option<PathBuf>,
    /// The test engine.
    #[arg(long, value_enum, default_value = "nextest")]
    runner: Engine,
    /// Run the tests of a nextest archive (`cargo nextest archive`) instead
    /// of building the suite; the suite dir is its workspace.
    #[arg(long, value_name = "FILE", conflicts_with = "runner")]
    archive_file: Option<PathBuf>,
    /// A nextest filter expression (repeatable).
    #[arg(short = 'E', long = "filter", value_name = "EXPR")]
    filters: Vec<String>,
    /// Run one shard: `k/n` (or nextest's `count:k/n`, `hash:k/n`).
    #[arg(long, value_name = "K/N")]
    partition: Option<String>,
    /// Leave the pod running after the run, and say how to reach and stop it
    /// (a machine pod: its forwarded port, console, QEMU log and monitor);
    /// `testkit-runner pod ls` lists it, `pod down` ends it.
    #[arg(long)]
    keep: bool,
    /// With `--pod vm`: the environment (machine image) to boot, one of
    /// `[pod.vm] environments` (default: `[pod.vm] image`).
    #[arg(long, value_name = "NAME")]
    environment: Option<String>,
    /// With `--pod vm`: how the product gets onto the machine: `deb` (its
    /// packages, `[pod.vm] debs`) or `binaries` (files copied and its unit
    /// started, `[pod.vm.binaries]`). Default: `[pod.vm] installer`.
    #[arg(long, value_enum, value_name = "INSTALLER")]
    installer: Option<crate::machines::InstallerArg>,
    /// The pod to start: the suite's service as a process (`[pod] command`),
    /// as a container of the local Docker Engine (`[pod.container]`), or
    /// installed from its Debian package in a QEMU machine (`[pod.vm]`).
    /// Default: a container for a pod of several nodes
    /// (`[pod.container.nodes]`) or a suite with `[pod.container]` and no
    /// `[pod] command`, else a process.
    #[arg(long, value_enum, value_name = "KIND")]
    pod: Option<crate::containers::PodMode>,
    /// Use this run id (1-16 of a-z0-9) instead of a fresh one. Refused
    /// (exit 64) while another runner with this id is live; the secrets dir
    /// of a run whose runner is gone is taken over, saying so.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Rerun only the tests that failed, were killed or never ran in the
    /// latest run of this suite (the latest results folder under the
    /// default results root whose run was of this suite). With nothing to
    /// rerun, it says so and exits 0 without starting the pod.
    #[arg(long, conflicts_with = "from")]
    last_failed: bool,
    /// Rerun only the tests that failed, were killed or never ran in the
    /// latest run of the results folder DIR: a run's, a CI artifact's, or
    /// one `testkit-runner merge` wrote (read from its junit.xml).
    #[arg(long, value_name = "DIR")]
    from: Option<PathBuf>,
    /// Show the test engine's output instead of keeping it in the results
    /// folder (`tests.log`; under nextest each failed test's output is kept
    /// once, capped at 1 MiB, in `tests.events.jsonl`).
    #[arg(long)]
    show_output: bool,
    /// Passed to `cargo nextest run` (or `cargo test`) as given: test name
    /// filters, engine options (`--retries 1`: a test that passes on its
    /// retry is counted flaky), and after a second `--`, arguments of the
    /// test binaries.
    #[arg(last = true, value_name = "ARGS")]
    extra: Vec<String>,
}

/// The run, top to bottom: each phase hands the next what it needs, and
/// every phase runs (or says why it is skipped) whatever came before.
pub(crate) async fn run(
    args: RunArgs,
    settings: testkit_engine::settings::Settings,
) -> Result<(), ExpectedError> {
    // First: from here on SIGUSR1 asks what the tests are doing, and never
    // ends the runner.
    status::install();
    // Everything that can be wrong with the arguments is found before
    // anything starts.
    let plan = match Plan::from_args(args, settings)? {
        Planned::Run(plan) => plan,
        Planned::NothingToRerun(why) => {
            println!("{why}");
            return Ok(());
        }
    };
    let mut run = Run::begin(&plan)?;
    let pod = run.up().await;
    let healthy = run.health(&pod).await;
    let session = run.auth(&pod, healthy).await;
    let tests = run.tests(session.as_ref()).await;
    let binaries = tests
        .as_ref()
        .map(|t| t.binaries.clone())
        .unwrap_or_default();
    let leaks = run.residue(session.as_ref(), &binaries, &pod).await;
    let keep_note = run.down(pod).await;
    run.finish(session.is_some(), tests, leaks, keep_note)
}
