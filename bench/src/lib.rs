//! The I/O every benchmark test does, shared so that the testkit and the
//! `#[tokio::test]` versions run exactly the same code.

use std::io;

/// Requests per test: with the server's 100 ms per answer, about one second
/// of waiting.
pub const REQUESTS: usize = 10;

/// `REQUESTS` sequential GETs to the slow server named by `BENCH_SERVER`
/// (`127.0.0.1:PORT`), each of which must answer 200.
///
/// A client per call: a `#[tokio::test]` has its own runtime, and a client's
/// pooled connections must not outlive the runtime that opened them.
pub async fn ten_requests() -> io::Result<()> {
    let server = std::env::var("BENCH_SERVER").map_err(|_| {
        io::Error::other("BENCH_SERVER is not set: run the benchmark with bench/run.sh")
    })?;
    let url = format!("http://{server}/slow");
    let client = reqwest::Client::builder()
        .build()
        .map_err(io::Error::other)?;
    for _ in 0..REQUESTS {
        let response = client.get(&url).send().await.map_err(io::Error::other)?;
        let status = response.status();
        response.bytes().await.map_err(io::Error::other)?;
        if !status.is_success() {
            return Err(io::Error::other(format!("GET {url} answered {status}")));
        }
    }
    Ok(())
}
