//! What the pod lock costs each test: every test of a run takes it, shared
//! (exclusive for an `exclusive` test), before its body and lets go of it
//! after its cleanup. Takes and lets go of a shared lock 20,000 times in a
//! fresh folder, in five rounds, and prints the median time of one.
//!
//!     cargo run --bin lock-cost        # from bench/

use std::time::Instant;

use testkit_engine::pod::lock;
use testkit_engine::report::LockMode;

const TIMES: u32 = 20_000;
const ROUNDS: usize = 5;

fn main() -> std::process::ExitCode {
    let dir = std::env::temp_dir().join(format!("testkit-lock-cost-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("lock-cost: cannot create {}: {e}", dir.display());
        return std::process::ExitCode::FAILURE;
    }
    let mut each = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        for _ in 0..TIMES {
            match lock::acquire(&dir, LockMode::Shared, || {}) {
                Ok(held) => drop(held.release()),
                Err(e) => {
                    eprintln!("lock-cost: {e}");
                    let _ = std::fs::remove_dir_all(&dir);
                    return std::process::ExitCode::FAILURE;
                }
            }
        }
        each.push(started.elapsed() / TIMES);
    }
    let _ = std::fs::remove_dir_all(&dir);
    each.sort();
    let shown: Vec<String> = each.iter().map(|d| format!("{d:?}")).collect();
    println!(
        "the pod lock, shared, taken and let go: {:?} each (median of {ROUNDS} rounds of {TIMES}: {})",
        each[ROUNDS / 2],
        shown.join(" ")
    );
    std::process::ExitCode::SUCCESS
}
