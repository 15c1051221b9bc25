//! `testkit-runner`: boots a pod, runs a suite, sweeps for residue, tears the
//! pod down and verifies it.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(testkit_runner::main_impl())
}
