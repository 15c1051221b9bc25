//! The recording proxy: how requests sent through a pod's client are traced.
//!
//! [`Pod::client`](crate::pod::Pod::client) hands tests a plain
//! `reqwest::Client`, and reqwest 0.12 has no request middleware: its one
//! hook, `ClientBuilder::connector_layer`, sees connections, and must answer
//! with reqwest's own opaque `Conn`, so it can neither read nor wrap the
//! bytes of a request. What a client built once can be told is a proxy. So
//! while traces are on, the pod's client is built with a `Proxy::custom`
//! that sends the pod's origin (and only it) to a forwarding proxy on
//! loopback in the test process, which records each exchange and forwards
//! it unchanged. Every request made through `pod.client()` (and through
//! `pod.send`, the resource kinds, the login) passes through it, whatever
//! the test does with the client: nothing of `client()`'s type changes.
//!
//! How a request finds its test: reqwest calls the custom proxy's function
//! when a request is sent, on the thread that sends it, to decide its
//! `Proxy-Authorization`; the harness runs each test's body and cleanup on
//! a thread of its own ([`enter`]), so the function names the thread's
//! recorder in the proxy URL's user, and the proxy reads it back from that
//! header (and strips it). A request sent from a task the test spawned is
//! credited to the process's only running test when there is one (always,
//! under nextest), and is otherwise not traced.
//!
//! What the proxy does with each connection is [`relay`]'s: HTTP/1 passed
//! byte for byte, recorded on the way.
//!
//! Known limitation: `https` pods are not traced through the client (a
//! proxy sees only a tunnel).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};

use super::{relay, Recorder};

static ENABLED: AtomicBool = AtomicBool::new(false);
static ACTIVE: RwLock<Vec<Recorder>> = RwLock::new(Vec::new());
static ORIGINS: RwLock<Vec<String>> = RwLock::new(Vec::new());
static PROXY: OnceLock<Option<SocketAddr>> = OnceLock::new();

thread_local! {
    static CURRENT: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Turns tracing of pod clients on for this process: clients built after
/// this go through the proxy. The runner never calls it.
pub fn enable() {
    ENABLED.store(true, Ordering::Relaxed);
}

/// Whether pod clients of this process are traced.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Makes `recorder` the trace of what this thread does until [`leave`].
pub fn enter(recorder: &Recorder) {
    CURRENT.with(|c| *c.borrow_mut() = Some(recorder.clone()));
    ACTIVE
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .push(recorder.clone());
}

/// Ends what [`enter`] began on this thread.
pub fn leave() {
    if let Some(r) = CURRENT.with(|c| c.borrow_mut().take()) {
        ACTIVE
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|a| a.id() != r.id());
    }
}

/// The recorder of what runs now: this thread's test, else the process's
/// only running test.
pub fn current() -> Option<Recorder> {
    CURRENT.with(|c| c.borrow().clone()).or_else(only_active)
}

fn only_active() -> Option<Recorder> {
    let active = ACTIVE.read().unwrap_or_else(|e| e.into_inner());
    match active.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    }
}

fn by_id(id: u64) -> Option<Recorder> {
    let active = ACTIVE.read().unwrap_or_else(|e| e.into_inner());
    active.iter().find(|r| r.id() == id).cloned()
}

/// `builder` with the pod at `base_url` reached through the recording
/// proxy, when tracing is [enabled] and the pod speaks plain `http`;
/// otherwise `builder` unchanged. Call it last, after any `no_proxy()`.
pub fn route(builder: reqwest::ClientBuilder, base_url: &str) -> reqwest::ClientBuilder {
    if !enabled() {
        return builder;
    }
    let Ok(pod) = reqwest::Url::parse(base_url) else {
        return builder;
    };
    if pod.scheme() != "http" {
        return builder;
    }
    let Some(addr) = *PROXY.get_or_init(start) else {
        return builder;
    };
    let origin = pod.origin().ascii_serialization();
    {
        let mut origins = ORIGINS.write().unwrap_or_else(|e| e.into_inner());
        if !origins.contains(&origin) {
            origins.push(origin.clone());
        }
    }
    builder.proxy(reqwest::Proxy::custom(move |url| {
        if url.origin().ascii_serialization() != origin {
            return None;
        }
        // Called as the request is sent, on the sending thread: the user
        // names its test. Called again when a connection is opened,
        // elsewhere: then the proxy alone, as it must still be.
        let user = current()
            .map(|r| format!("t{}:@", r.id()))
            .unwrap_or_default();
        Some(format!("http://{user}{addr}"))
    }))
}

/// Binds the proxy on loopback and serves it on the current runtime; `None`
/// (and the clients are not traced) when either is missing.
fn start() -> Option<SocketAddr> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
    listener.set_nonblocking(true).ok()?;
    let addr = listener.local_addr().ok()?;
    runtime.spawn(async move {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move { relay::serve(stream, &Process).await });
        }
    });
    Some(addr)
}

/// This process's tests and pods, as the relay asks for them.
struct Process;

impl relay::Routes for Process {
    fn recorder(&self, proxy_authorization: Option<&[u8]>) -> Option<Recorder> {
        match proxy_authorization.and_then(recorder_id) {
            Some(id) => by_id(id),
            None => only_active(),
        }
    }

    fn allowed(&self, origin: &str) -> bool {
        ORIGINS
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|o| o == origin)
    }
}

/// The recorder id [`route`] put in the proxy URL's user: `Basic
/// base64("t<id>:")`.
fn recorder_id(header: &[u8]) -> Option<u64> {
    use base64::Engine as _;
    let encoded = header.strip_prefix(b"Basic ")?;
    let user = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let user = std::str::from_utf8(&user).ok()?;
    user.strip_prefix('t')?.split(':').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    //! The proxy as tests meet it: a pod's client routed through it, a pod
    //! that is a raw socket on loopback (so that what it receives, and how
    //! it answers, is seen byte for byte).
    use std::sync::OnceLock;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;
    use crate::trace::EntryKind;

    /// One runtime for every test here: the proxy is served on the runtime
    /// of the first client routed through it, for the whole process.
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
        RUNTIME
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .unwrap()
            })
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), f).await })
            .expect("the test took over 30 s")
    }

    /// A traced client of the pod at `addr`, recording into `recorder` on
    /// this thread.
    fn traced_client(addr: std::net::SocketAddr, recorder: &Recorder) -> reqwest::Client {
        enable();
        enter(recorder);
        route(
            reqwest::Client::builder().no_proxy(),
            &format!("http://{addr}"),
        )
        .build()
        .unwrap()
    }

    /// Reads one request (head, and a body of `Content-Length`) as the pod
    /// receives it.
    async fn read_request(s: &mut TcpStream) -> Option<String> {
        let mut buf = Vec::new();
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0u8; 4096];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        Some(String::from_utf8_lossy(&buf).into_owned())
    }

    fn http_entries(r: &Recorder) -> Vec<crate::trace::Entry> {
        r.snapshot()
            .entries
            .into_iter()
            .filter(|e| e.kind == EntryKind::Http)
            .collect()
    }

    #[test]
    fn a_request_reaches_the_pod_as_sent_and_is_recorded_with_its_answer() {
        block_on(async {
            let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = pod.local_addr().unwrap();
            let seen = tokio::spawn(async move {
                let (mut s, _) = pod.accept().await.unwrap();
                let mut requests = Vec::new();
                // Two requests on one connection: keep-alive passes through.
                for n in 0..2 {
                    let request = read_request(&mut s).await.unwrap();
                    let body = format!("{{\"made\":{n}}}");
                    let answer = format!(
                        "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nset-cookie: s=pod-cookie\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    s.write_all(answer.as_bytes()).await.unwrap();
                    requests.push(request);
                }
                requests
            });
            let recorder = Recorder::start("sent_as_is");
            let client = traced_client(addr, &recorder);
            for n in 0..2 {
                let answer = client
                    .post(format!("http://{addr}/things?x={n}"))
                    .bearer_auth("relay-token")
                    .body(format!("{{\"name\":\"t{n}\"}}"))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(answer.status(), 201);
                assert_eq!(answer.text().await.unwrap(), format!("{{\"made\":{n}}}"));
            }
            leave();
            let requests = seen.await.unwrap();
            for (n, request) in requests.iter().enumerate() {
                // Origin-form, as the pod would have had it without a proxy,
                // and without the proxy's own credential.
                assert!(
                    request.starts_with(&format!("POST /things?x={n} HTTP/1.1\r\n")),
                    "{request}"
                );
                assert!(
                    !request.to_ascii_lowercase().contains("proxy-authorization"),
                    "{request}"
                );
                assert!(
                    request.contains("authorization: Bearer relay-token"),
                    "{request}"
                );
                assert!(
                    request.ends_with(&format!("{{\"name\":\"t{n}\"}}")),
                    "{request}"
                );
            }
            let entries = http_entries(&recorder);
            assert_eq!(entries.len(), 2, "{entries:#?}");
            let e = &entries[1];
            assert_eq!(e.title, "POST /things?x=1 → 201");
            assert!(e.ok);
            let http = e.http.as_ref().unwrap();
            assert_eq!(http.status, Some(201));
            assert_eq!(http.url, format!("http://{addr}/things?x=1"));
            assert_eq!(http.request_body, r#"{"name":"t1"}"#);
            assert_eq!(http.response_body, r#"{"made":1}"#);
            let header = |hs: &[(String, String)], name: &str| {
                hs.iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(
                header(&http.request_headers, "authorization").as_deref(),
                Some(crate::redact::REDACTED)
            );
            assert_eq!(header(&http.request_headers, "proxy-authorization"), None);
            assert_eq!(
                header(&http.response_headers, "set-cookie").as_deref(),
                Some(crate::redact::REDACTED)
            );
        });
    }

    #[test]
    fn a_streamed_answer_streams_through_the_proxy() {
        block_on(async {
            let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = pod.local_addr().unwrap();
            let (first_seen, wait_first) = tokio::sync::oneshot::channel::<()>();
            tokio::spawn(async move {
                let (mut s, _) = pod.accept().await.unwrap();
                read_request(&mut s).await.unwrap();
                s.write_all(
                    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n6\r\nfirst \r\n",
                )
                .await
                .unwrap();
                // The rest only once the client has the first chunk.
                let _ = wait_first.await;
                s.write_all(b"4\r\nlast\r\n0\r\n\r\n").await.unwrap();
            });
            let recorder = Recorder::start("streams");
            let client = traced_client(addr, &recorder);
            let mut answer = client
                .get(format!("http://{addr}/events"))
                .send()
                .await
                .unwrap();
            let first = tokio::time::timeout(Duration::from_secs(5), answer.chunk())
                .await
                .expect("the first chunk did not arrive before the last was sent")
                .unwrap();
            assert_eq!(first.as_deref(), Some(b"first ".as_slice()));
            first_seen.send(()).unwrap();
            let rest = answer.text().await.unwrap();
            assert_eq!(rest, "last");
            leave();
            // The exchange is recorded once the answer has ended.
            let entries = http_entries(&recorder);
            assert_eq!(entries.len(), 1, "{entries:#?}");
            assert_eq!(
                entries[0].http.as_ref().unwrap().response_body,
                "first last"
            );
        });
    }

    #[test]
    fn a_pod_that_closes_an_idle_connection_does_not_fail_the_next_request() {
        block_on(async {
            let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = pod.local_addr().unwrap();
            tokio::spawn(async move {
                // Each connection: one answer, then closed while idle.
                loop {
                    let (mut s, _) = pod.accept().await.unwrap();
                    read_request(&mut s).await.unwrap();
                    s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    drop(s);
                }
            });
            let recorder = Recorder::start("idle_close");
            let client = traced_client(addr, &recorder);
            for _ in 0..3 {
                let answer = client.get(format!("http://{addr}/")).send().await.unwrap();
                assert_eq!(answer.text().await.unwrap(), "ok");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            leave();
            assert_eq!(http_entries(&recorder).len(), 3);
        });
    }

    #[test]
    fn a_long_body_is_recorded_capped_and_passed_whole() {
        block_on(async {
            let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = pod.local_addr().unwrap();
            let big = "y".repeat(100_000);
            let answer_body = big.clone();
            tokio::spawn(async move {
                let (mut s, _) = pod.accept().await.unwrap();
                let request = read_request(&mut s).await.unwrap();
                assert!(request.ends_with(&"x".repeat(50_000)));
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n",
                    answer_body.len()
                );
                s.write_all(head.as_bytes()).await.unwrap();
                s.write_all(answer_body.as_bytes()).await.unwrap();
            });
            let recorder = Recorder::start("long");
            let client = traced_client(addr, &recorder);
            let text = client
                .put(format!("http://{addr}/blob"))
                .body("x".repeat(50_000))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            assert_eq!(text, big);
            leave();
            let http = http_entries(&recorder).remove(0).http.unwrap();
            let more = |n: usize| format!("… {n} bytes more");
            assert!(http
                .request_body
                .ends_with(&more(50_000 - crate::trace::TEXT_CAP)));
            assert!(http
                .response_body
                .ends_with(&more(100_000 - crate::trace::TEXT_CAP)));
        });
    }
}
