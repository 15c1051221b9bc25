//! One traced test making many requests with long URLs through the pod's
//! client (the slow server's `/fast`, answered at once): what `bench/run.sh
//! trace-size` measures, its `trace.json`'s size and the test process's
//! peak memory. `BENCH_TRACE_REQUESTS` requests (3,000 unless told), each
//! with a 16 KiB query.

use testkit::prelude::*;

/// Sends the requests, each with a 16 KiB query; every answer is read.
#[testkit::test(trace = "on", timeout = "10m")]
async fn long_urls(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let requests: usize = std::env::var("BENCH_TRACE_REQUESTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3000);
    let query = "q".repeat(16 * 1024);
    for i in 0..requests {
        let answer = pod
            .client()
            .get(pod.url(&format!("/fast?i={i}&q={query}")))
            .send()
            .await?;
        let status = answer.status();
        answer.bytes().await?;
        ensure!(status.is_success(), "GET /fast answered {status}");
    }
    Ok(())
}

testkit::main!();
