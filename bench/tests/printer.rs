//! One test that prints `BENCH_PRINT_MB` megabytes to stdout and fails, so
//! that nextest reports its whole output in one event: what
//! `bench/run.sh runner-memory` runs under `testkit-runner`, to measure
//! what the runner holds of it. Half is written in 25 MB pieces without a
//! newline, half as lines of 100 bytes. Without `BENCH_PRINT_MB` it prints
//! nothing and passes.

use std::io::Write;
use testkit::prelude::*;

/// Prints `BENCH_PRINT_MB` megabytes, then fails.
#[testkit::test(timeout = "10m")]
async fn prints_and_fails(_cx: &mut Cx) -> testkit::Result {
    let Ok(mb) = std::env::var("BENCH_PRINT_MB") else {
        return Ok(());
    };
    let mb: usize = mb
        .parse()
        .context("BENCH_PRINT_MB must be a number of megabytes")?;
    let half = mb * 1_000_000 / 2;
    let mut out = std::io::stdout().lock();
    let block = vec![b'x'; 25_000_000];
    let mut written = 0;
    while written < half {
        let n = block.len().min(half - written);
        out.write_all(&block[..n])?;
        written += n;
    }
    out.write_all(b"\n")?;
    let line = [b'y'; 99];
    for _ in 0..half / 100 {
        out.write_all(&line)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    bail!("printed {mb} MB on purpose");
}

testkit::main!();
