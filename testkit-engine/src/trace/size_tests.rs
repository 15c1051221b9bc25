//! A trace's size stays bounded whatever the test sends: real requests on
//! loopback through the traced send, as a test's pod client makes them.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::HeaderMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::active::{enter, leave};
use super::{Recorder, Trace, FILE_NAME, MAX_ENTRIES, TRIMMED_NOTE, URL_CAP};

/// What the size of a trace file must stay under, whatever the test did.
const FILE_LIMIT: u64 = 5_000_000;

/// A pod that answers every request on a connection with 200 and `body`,
/// keeping the connection.
async fn serve(pod: TcpListener, body: Vec<u8>) {
    let body = Arc::new(body);
    loop {
        let Ok((mut s, _)) = pod.accept().await else {
            return;
        };
        let body = body.clone();
        // An answer goes at once, not after the client's delayed ACK.
        let _ = s.set_nodelay(true);
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = vec![0u8; 1 << 16];
            loop {
                // Requests are GETs: a head, and no body.
                while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    buf.drain(..end + 4);
                    // One write: a head and a body in two would wait for
                    // the client's delayed ACK, 40 ms a request.
                    let mut answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    )
                    .into_bytes();
                    answer.extend_from_slice(&body);
                    if s.write_all(&answer).await.is_err() {
                        return;
                    }
                }
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
        });
    }
}

/// 2,100 requests with 16 KiB queries and 8 KiB answers (the case that
/// once wrote 63 MB): the trace file stays under 5 MB, and says what it
/// cut: each long URL its cut bytes, the entries past the budget that
/// they were trimmed, the count of those dropped.
#[test]
fn many_requests_with_long_urls_keep_the_trace_under_its_cap() {
    let requests = MAX_ENTRIES + 100;
    let recorder = Recorder::start("long_urls");
    enter(&recorder);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = pod.local_addr().unwrap();
        tokio::spawn(serve(pod, vec![b'a'; 8 << 10]));
        let client = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .build()
            .unwrap();
        let defaults = Arc::new(HeaderMap::new());
        let query = "q".repeat(16 << 10);
        for n in 0..requests {
            let request = client
                .get(format!("http://{addr}/things/{n}?x={query}"))
                .build()
                .unwrap();
            let answer = tokio::time::timeout(
                Duration::from_secs(30),
                super::http::send(&client, &defaults, request),
            )
            .await
            .expect("the pod answered within 30 s")
            .unwrap();
            assert_eq!(answer.bytes().await.unwrap().len(), 8 << 10);
        }
    });
    leave();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    recorder.snapshot().write(&path).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size < FILE_LIMIT, "trace.json is {size} bytes");
    let trace = Trace::read(&path).unwrap();
    let total = trace.entries.len() as u64 + trace.dropped;
    assert_eq!(total, requests as u64, "every request kept or counted");
    let first = &trace.entries[0];
    let http = first.http.as_ref().unwrap();
    assert!(
        http.url.len() < URL_CAP + 32 && http.url.ends_with(" bytes more"),
        "a long URL is cut and says by how much: {:?}",
        &http.url[http.url.len().saturating_sub(40)..]
    );
    assert!(first.title.ends_with("→ 200"), "{:?}", first.title);
    assert!(
        http.response_body.starts_with("aaaa"),
        "the first entries are whole"
    );
    assert!(trace.trimmed > 0, "entries past the budget are trimmed");
    let last = trace.entries.last().unwrap();
    assert_eq!(last.detail, TRIMMED_NOTE, "a trimmed entry says so");
    assert!(last.http.as_ref().unwrap().response_body.is_empty());
    assert!(trace.dropped > 0, "entries past the cap are counted");
}
