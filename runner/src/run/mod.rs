//! `testkit-runner run SUITE_DIR`: the main job. Phases, in order, each
//! with a verdict appended to `verdict.jsonl` as soon as it is decided:
//! up, health, auth, tests, residue, down. See `--help` for the exit codes.

mod pod;
mod signal;
mod tests;
pub(crate) mod verdict;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use testkit::config::SuiteConfig;
use testkit::pod::{HandlePolicy, PodHandle};
use testkit::resource::Kinds;

use crate::exit;
use crate::summary::RunSummary;
pub(crate) use tests::Engine;
use verdict::{PhaseResult, Verdict, VerdictLog};

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
    /// Leave the pod running after the run, and say how to reach and stop it.
    #[arg(long)]
    keep: bool,
    /// Use this run id (1-16 of a-z0-9) instead of a fresh one.
    #[arg(long, value_name = "ID")]
    run_id: Option<String>,
    /// Show the test engine's output instead of keeping it in `tests.log`.
    #[arg(long)]
    show_output: bool,
    /// Passed to `cargo nextest run` (or `cargo test`) as given: test name
    /// filters, and after a second `--`, arguments of the test binaries.
    #[arg(last = true, value_name = "ARGS")]
    extra: Vec<String>,
}

/// A usage error: printed, exit 64.
fn usage(message: impl std::fmt::Display) -> u8 {
    eprintln!("testkit-runner: {message}");
    exit::BAD_ARGS
}

pub(crate) async fn run(args: RunArgs) -> u8 {
    // Everything that can be wrong with the arguments is found before
    // anything starts.
    let suite_dir = match args.suite.canonicalize() {
        Ok(d) if d.is_dir() => d,
        Ok(d) => return usage(format_args!("the suite {} is not a directory", d.display())),
        Err(e) => {
            return usage(format_args!(
                "cannot use the suite dir {}: {e}",
                args.suite.display()
            ))
        }
    };
    if !suite_dir.join("Cargo.toml").is_file() {
        return usage(format_args!(
            "{} has no Cargo.toml: a suite is a Cargo workspace",
            suite_dir.display()
        ));
    }
    let config = match SuiteConfig::load(&suite_dir) {
        Ok(c) => c,
        Err(e) => return usage(e),
    };
    let kinds = match Kinds::from_config(&config, &suite_dir.join(testkit::config::CONFIG_FILE)) {
        Ok(k) => k,
        Err(e) => return usage(e),
    };
    let partition = match args.partition.as_deref().map(parse_partition).transpose() {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    if partition.is_some() && args.runner == Engine::CargoTest {
        return usage("--partition needs nextest: drop `--runner cargo-test`");
    }
    if args.runner == Engine::CargoTest && !args.filters.is_empty() {
        return usage("filter expressions (-E) need nextest: drop `--runner cargo-test`, or pass name filters after `--`");
    }
    let archive = match &args.archive_file {
        Some(a) => match a.canonicalize() {
            Ok(a) if a.is_file() => Some(a),
            _ => return usage(format_args!("--archive-file {}: no such file", a.display())),
        },
        None => None,
    };
    let caller_handle = match &args.handle_json {
        Some(path) => match read_handle(path, &HandlePolicy::from_config(&config.pod)) {
            Ok(h) => Some(h),
            Err(e) => return usage(e),
        },
        None => None,
    };
    if args.keep && caller_handle.is_some() {
        return usage("--keep applies to a pod the runner starts, not to --handle-json");
    }
    let run_id = match args.run_id.clone() {
        Some(id) => match validate_run_id(&id) {
            Ok(()) => id,
            Err(why) => return usage(format_args!("--run-id {id:?}: {why}")),
        },
        None => generate_run_id(),
    };
    let results_dir = args
        .results
        .clone()
        .unwrap_or_else(|| default_results_root().join(&run_id));
    if let Err(e) = std::fs::create_dir_all(&results_dir) {
        return usage(format_args!(
            "cannot create the results folder {}: {e}",
            results_dir.display()
        ));
    }
    let results_dir = results_dir.canonicalize().unwrap_or(results_dir);
    println!("run id: {run_id}");
    println!("results: {}", results_dir.display());

    let mut log = match VerdictLog::create(&results_dir) {
        Ok(l) => l,
        Err(e) => {
            return usage(format_args!(
                "cannot create verdict.jsonl in {}: {e}",
                results_dir.display()
            ))
        }
    };
    let mut interrupt = signal::Interrupt::install();
    let run_started = Instant::now();
    let mut phases: Vec<PhaseResult> = Vec::new();
    let mut decide = |log: &mut VerdictLog, r: PhaseResult| {
        // On a terminal, each verdict as it is decided; elsewhere the
        // summary at the end says it all.
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            tests::clear_progress();
            eprintln!("{:<8} {:<4}  {}", r.phase, r.verdict.word(), r.evidence);
        }
        log.append(&r);
        phases.push(r);
    };

    // up
    let pod_dir = results_dir.join("pod");
    let _ = std::fs::create_dir_all(&pod_dir);
    let handle_file = pod_dir.join("handle.json");
    let started = Instant::now();
    tests::progress_line("up: starting the pod");
    let (handle, mut launched, up_ok) = match caller_handle {
        Some((handle, path)) => {
            let evidence = format!(
                "the caller's pod {} at {} (handle {} validated; it is never stopped)",
                handle.name(),
                handle.base_url(),
                path.display()
            );
            decide(
                &mut log,
                PhaseResult::new("up", Verdict::Pass, evidence, started.elapsed()),
            );
            (Some(handle), None, true)
        }
        None => match pod::start(&config, &suite_dir, &pod_dir.join("logs")).await {
            Ok(p) => {
                let evidence = format!(
                    "started pod {} at {} (pid {}) in {}",
                    p.handle.name(),
                    p.handle.base_url(),
                    p.pid,
                    humantime::format_duration(round_ms(p.boot_time))
                );
                decide(
                    &mut log,
                    PhaseResult::new("up", Verdict::Pass, evidence, started.elapsed()),
                );
                (Some(p.handle.clone()), Some(p), true)
            }
            Err(e) => {
                decide(
                    &mut log,
                    PhaseResult::new("up", Verdict::Fail, e, started.elapsed()),
                );
                (None, None, false)
            }
        },
    };
    if let Some(h) = &handle {
        if let Err(e) = h.write_file(&handle_file) {
            eprintln!(
                "testkit-runner: failed to write {}: {e}",
                handle_file.display()
            );
        }
    }

    // health
    let mut reachable = false;
    match &handle {
        None => decide(
            &mut log,
            PhaseResult::skip("health", "the pod did not come up"),
        ),
        Some(_) if interrupt.requested() => {
            decide(&mut log, PhaseResult::skip("health", "interrupted"))
        }
        Some(h) => {
            let started = Instant::now();
            let path = h.health().unwrap_or(&config.pod.health_path).to_owned();
            let report = pod::measure_health(h, &path).await;
            reachable = report.ok();
            let verdict = if reachable {
                Verdict::Pass
            } else {
                Verdict::Fail
            };
            decide(
                &mut log,
                PhaseResult::new("health", verdict, report.summary(), started.elapsed()),
            );
        }
    }

    // auth, and the session every test process reuses
    let mut connected = None;
    match &handle {
        Some(_) if interrupt.requested() => {
            decide(&mut log, PhaseResult::skip("auth", "interrupted"))
        }
        Some(h) if reachable => {
            let started = Instant::now();
            let report = testkit::pod::check_auth(h, Duration::from_secs(10)).await;
            if !report.ok() {
                decide(
                    &mut log,
                    PhaseResult::new("auth", Verdict::Fail, report.summary(), started.elapsed()),
                );
            } else {
                match testkit::pod::connect(h.clone(), Some(&results_dir)).await {
                    Ok(p) => {
                        let evidence = format!(
                            "{}; session opened for the tests; capabilities: {}",
                            report.summary(),
                            if p.capabilities().is_empty() {
                                "none".to_owned()
                            } else {
                                p.capabilities().join(", ")
                            }
                        );
                        decide(
                            &mut log,
                            PhaseResult::new("auth", Verdict::Pass, evidence, started.elapsed()),
                        );
                        connected = Some(p);
                    }
                    Err(e) => {
                        let evidence =
                            format!("{}; but opening the session failed: {e}", report.summary());
                        decide(
                            &mut log,
                            PhaseResult::new("auth", Verdict::Fail, evidence, started.elapsed()),
                        );
                    }
                }
            }
        }
        Some(_) => decide(
            &mut log,
            PhaseResult::skip("auth", "the pod is not healthy"),
        ),
        None => decide(
            &mut log,
            PhaseResult::skip("auth", "the pod did not come up"),
        ),
    }

    // tests
    let mut tests_outcome = None;
    let mut incomplete = !up_ok || !reachable || connected.is_none();
    if interrupt.requested() {
        decide(
            &mut log,
            PhaseResult::skip("tests", "interrupted before the tests started"),
        );
    } else if connected.is_none() {
        decide(
            &mut log,
            PhaseResult::skip("tests", "no authenticated pod to test"),
        );
    } else {
        let env = test_env(&run_id, &results_dir, &handle_file, &suite_dir);
        let spec = tests::TestsSpec {
            suite_dir: &suite_dir,
            results_dir: &results_dir,
            run_id: &run_id,
            engine: args.runner,
            archive: archive.as_deref(),
            filters: &args.filters,
            partition: partition.as_deref(),
            extra: &args.extra,
            env,
            show_output: args.show_output,
        };
        let outcome = tests::run_tests(&spec, &mut interrupt).await;
        incomplete |= outcome.incomplete;
        decide(&mut log, outcome.result.clone());
        tests_outcome = Some(outcome);
    }

    // residue
    let mut leaks = Vec::new();
    match &connected {
        None => decide(
            &mut log,
            PhaseResult::skip("residue", "no authenticated pod to sweep"),
        ),
        Some(p) => {
            let started = Instant::now();
            tests::progress_line("residue: listing every resource kind by the run id");
            let (verdict, evidence, found) =
                pod::residue(p, &kinds, &config.suite.name_prefix, &run_id).await;
            leaks = found;
            decide(
                &mut log,
                PhaseResult::new("residue", verdict, evidence, started.elapsed()),
            );
        }
    }

    // down
    let mut keep_note = None;
    match launched.take() {
        None if handle.is_some() => decide(
            &mut log,
            PhaseResult::skip(
                "down",
                "the caller's pod is left running: the runner never stops it",
            ),
        ),
        None => decide(
            &mut log,
            PhaseResult::skip(
                "down",
                format!(
                    "nothing to stop: the failed start stopped what it began; logs kept in {}",
                    pod_dir.join("logs").display()
                ),
            ),
        ),
        Some(p) if args.keep => {
            keep_note = Some(pod::keep_note(&p, &handle_file));
            decide(
                &mut log,
                PhaseResult::skip(
                    "down",
                    format!(
                        "kept running (--keep): pod {} at {}, pid {}",
                        p.handle.name(),
                        p.handle.base_url(),
                        p.pid
                    ),
                ),
            );
        }
        Some(p) => {
            let started = Instant::now();
            tests::progress_line("down: stopping the pod");
            let (verdict, evidence) = pod::stop(p).await;
            decide(
                &mut log,
                PhaseResult::new("down", verdict, evidence, started.elapsed()),
            );
        }
    }

    let interrupted = interrupt.requested();
    let failed = phases.iter().any(|p| p.verdict == Verdict::Fail);
    let code = if interrupted {
        exit::INTERRUPTED
    } else if incomplete {
        exit::INCOMPLETE
    } else if failed {
        exit::VERIFY_FAILED
    } else {
        exit::OK
    };
    log.finish(
        if code == exit::OK {
            Verdict::Pass
        } else {
            Verdict::Fail
        },
        code,
    );

    let summary = RunSummary {
        suite: &suite_dir,
        run_id: &run_id,
        results_dir: &results_dir,
        phases: &phases,
        tests: tests_outcome.as_ref().and_then(|t| t.summary.as_ref()),
        failures: tests_outcome
            .as_ref()
            .map(|t| t.failures.as_slice())
            .unwrap_or_default(),
        leaks: &leaks,
        exit_code: code,
        interrupted,
        keep_note: keep_note.as_deref(),
        took: run_started.elapsed(),
    };
    let md = results_dir.join("summary.md");
    if let Err(e) = std::fs::write(&md, testkit::redact(&summary.markdown()).as_bytes()) {
        eprintln!("testkit-runner: failed to write {}: {e}", md.display());
    }
    print!("{}", testkit::redact(&summary.text()));
    code
}

/// Reads and validates a caller's handle file. The error names the file and
/// the field at fault, never the token.
fn read_handle(path: &Path, policy: &HandlePolicy) -> Result<(PodHandle, PathBuf), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--handle-json {}: cannot read it: {e}", path.display()))?;
    let handle = PodHandle::parse(&text, policy)
        .map_err(|e| format!("--handle-json {}: {e}", path.display()))?;
    testkit::register_secret(handle.token());
    Ok((handle, path.to_owned()))
}

/// `k/n` → nextest's `count:k/n`; `count:`/`hash:` forms pass as given.
fn parse_partition(p: &str) -> Result<String, String> {
    let (scheme, rest) = match p.split_once(':') {
        Some((s @ ("count" | "hash"), rest)) => (s, rest),
        Some(_) => {
            return Err(format!(
                "--partition {p:?}: expected `k/n`, `count:k/n` or `hash:k/n`"
            ))
        }
        None => ("count", p),
    };
    let ok = rest
        .split_once('/')
        .and_then(|(k, n)| Some((k.parse::<u32>().ok()?, n.parse::<u32>().ok()?)));
    match ok {
        Some((k, n)) if k >= 1 && k <= n => Ok(format!("{scheme}:{k}/{n}")),
        _ => Err(format!(
            "--partition {p:?}: expected `k/n` with 1 <= k <= n, e.g. 1/2"
        )),
    }
}

fn validate_run_id(id: &str) -> Result<(), &'static str> {
    if id.is_empty() || id.len() > 16 {
        return Err("expected 1 to 16 characters");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err("expected only lowercase ASCII letters and digits");
    }
    Ok(())
}

/// 10 characters of `a-z0-9`, the first a letter.
fn generate_run_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut bytes = [0u8; 10];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let n = if i == 0 { 26 } else { ALPHABET.len() };
            ALPHABET[*b as usize % n] as char
        })
        .collect()
}

/// `<target dir>/testkit/runs`: `CARGO_TARGET_DIR`, else the target dir this
/// binary was built in, else the temp dir.
pub(crate) fn default_results_root() -> PathBuf {
    target_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("testkit")
        .join("runs")
}

pub(crate) fn target_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return Some(if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir().ok()?.join(dir)
        });
    }
    let exe = std::env::current_exe().ok()?;
    exe.ancestors()
        .skip(1)
        .find(|d| d.join("CACHEDIR.TAG").is_file())
        .map(Path::to_owned)
}

/// What every test process gets: the run, the results folder, the pod's
/// handle (its session is in `<results>/pod/session.json`), the suite, and a
/// PATH that finds the programs built next to the runner (`sandboxctl`).
fn test_env(
    run_id: &str,
    results_dir: &Path,
    handle_file: &Path,
    suite_dir: &Path,
) -> Vec<(String, OsString)> {
    let mut env = vec![
        ("TESTKIT_RUN_ID".to_owned(), OsString::from(run_id)),
        (
            "TESTKIT_RESULTS_DIR".to_owned(),
            results_dir.as_os_str().to_owned(),
        ),
        (
            testkit::pod::HANDLE_ENV.to_owned(),
            handle_file.as_os_str().to_owned(),
        ),
        (
            "TESTKIT_SUITE_DIR".to_owned(),
            suite_dir.as_os_str().to_owned(),
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

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn partitions() {
        assert_eq!(parse_partition("1/2").unwrap(), "count:1/2");
        assert_eq!(parse_partition("hash:2/3").unwrap(), "hash:2/3");
        assert!(parse_partition("0/2").is_err());
        assert!(parse_partition("3/2").is_err());
        assert!(parse_partition("x:1/2").is_err());
        assert!(parse_partition("1").is_err());
    }

    #[test]
    fn run_ids() {
        let id = generate_run_id();
        assert_eq!(id.len(), 10);
        assert!(validate_run_id(&id).is_ok());
        assert!(id.as_bytes()[0].is_ascii_lowercase());
        assert!(validate_run_id("Abc").is_err());
    }
}
