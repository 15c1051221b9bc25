//! The sweeper role: a test binary started by `testkit-runner` to sweep the
//! Rust kinds only it links (`TESTKIT_RUN_AS=sweeper`).

use testkit_engine::resource::{sweep, Kinds, SweepReport};

/// `TESTKIT_RUN_AS=sweeper`: sweeps the run's resources of the Rust kinds
/// `kinds` and prints the report as one JSON line.
pub(crate) async fn sweeper_main(kinds_wanted: &[String]) -> std::process::ExitCode {
    let (report, code) = sweeper_report(kinds_wanted).await;
    println!("{}", serde_json::to_string(&report).unwrap_or_default());
    // Connecting to the pod routed stdout through redaction: drain it, or
    // the report is lost when the process exits.
    crate::globals::finish_pod();
    code
}

async fn sweeper_report(kinds_wanted: &[String]) -> (SweepReport, std::process::ExitCode) {
    let fail = |problem: String| {
        (
            SweepReport::failed(problem),
            std::process::ExitCode::FAILURE,
        )
    };
    let (run, kinds, config) = match (
        crate::globals::run(),
        crate::globals::kinds(),
        crate::globals::config(),
    ) {
        (Ok(r), Ok(k), Ok(c)) => (r, k, c),
        (Err(e), _, _) => return fail(e.to_string()),
        (_, Err(e), _) => return fail(e.to_string()),
        (_, _, Err(e)) => return fail(e.to_string()),
    };
    crate::globals::init_pod().await;
    let pod = match crate::globals::pod() {
        Ok(p) => p,
        Err(e) => return fail(format!("no pod to sweep: {e}")),
    };
    let mut only = Kinds::default();
    for name in kinds_wanted {
        match kinds.get(name) {
            Some(k) if !k.is_elsewhere() => only.insert(k.clone()),
            _ => {
                return fail(format!(
                    "this test binary registers no Rust kind `{name}` (testkit::resource_kind!)"
                ))
            }
        }
    }
    let report = sweep(pod, &only, &config.suite.name_prefix, &run.id).await;
    (report, std::process::ExitCode::SUCCESS)
}
