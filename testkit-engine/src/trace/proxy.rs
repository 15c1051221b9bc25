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
//! Known limitations: `https` pods are not traced through the client (a
//! proxy sees only a tunnel), and answers are read whole before they are
//! forwarded, so a streamed answer arrives at once.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{OnceLock, RwLock};
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};

use super::{cap_bytes, headers, EntryKind, Http, Recorder};

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
            tokio::spawn(async move {
                let service = hyper::service::service_fn(forward);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Some(addr)
}

/// Hop-by-hop headers and those the forwarding client sets itself.
const NOT_FORWARDED: &[&str] = &[
    "connection",
    "proxy-connection",
    "proxy-authorization",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

type Upstream = hyper_util::client::legacy::Client<
    hyper_util::client::legacy::connect::HttpConnector,
    Full<Bytes>,
>;

/// hyper's own client rather than reqwest: the proxy forwards what it
/// received as it is, and every conversion reqwest would make is CPU time
/// each traced request pays.
fn upstream() -> &'static Upstream {
    static CLIENT: OnceLock<Upstream> = OnceLock::new();
    CLIENT.get_or_init(|| {
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.set_nodelay(true);
        http.set_connect_timeout(Some(Duration::from_secs(10)));
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build(http)
    })
}

fn recorder_of(req: &Request<Incoming>) -> Option<Recorder> {
    let id = req
        .headers()
        .get(hyper::header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.decode(b).ok()
        })
        .and_then(|user| {
            let user = String::from_utf8(user).ok()?;
            user.strip_prefix('t')?
                .split(':')
                .next()?
                .parse::<u64>()
                .ok()
        });
    match id {
        Some(id) => by_id(id),
        None => only_active(),
    }
}

async fn forward(req: Request<Incoming>) -> Result<Response<Full<Bytes>>, std::io::Error> {
    let started = Instant::now();
    let recorder = recorder_of(&req);
    let (parts, body) = req.into_parts();
    let url = parts.uri.to_string();
    if !origin_allowed(&parts.uri) {
        return Ok(Response::builder()
            .status(403)
            .body(Full::new(Bytes::from_static(
                b"testkit's trace proxy forwards only to the pods of its process",
            )))
            .unwrap_or_default());
    }
    let body = body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    let mut exchange = request_of(&parts, &url, &body);
    let outgoing = with_headers(
        Request::builder()
            .method(parts.method.clone())
            .uri(parts.uri.clone()),
        &parts.headers,
        |b, k, v| b.header(k, v),
    )
    .body(Full::new(body))
    .map_err(std::io::Error::other)?;
    let answer = match upstream().request(outgoing).await {
        Ok(answer) => answer,
        // An error, not an answer: the client sees its request fail, as it
        // would have without the proxy.
        Err(e) => return Err(no_answer(recorder.as_ref(), started, exchange, &url, &e)),
    };
    let status = answer.status();
    let (answer_parts, answer_body) = answer.into_parts();
    let bytes = answer_body
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    if let Some(r) = &recorder {
        answered(
            &mut exchange,
            status.as_u16(),
            &answer_parts.headers,
            &bytes,
        );
        let what = format!(
            "{} {} → {}",
            exchange.method,
            path_of(&url),
            status.as_u16()
        );
        let ok = status.as_u16() < 400;
        r.add(
            EntryKind::Http,
            started,
            started.elapsed(),
            what,
            ok,
            String::new(),
            Some(exchange),
        );
    }
    with_headers(
        Response::builder().status(status),
        &answer_parts.headers,
        |b, k, v| b.header(k, v),
    )
    .body(Full::new(bytes))
    .map_err(std::io::Error::other)
}

/// Records a request the pod never answered; the error to fail it with.
fn no_answer(
    recorder: Option<&Recorder>,
    started: Instant,
    exchange: Http,
    url: &str,
    e: &dyn std::fmt::Display,
) -> std::io::Error {
    let message = format!("{e:#}");
    if let Some(r) = recorder {
        let what = format!("{} {} → no answer", exchange.method, path_of(url));
        r.add(
            EntryKind::Http,
            started,
            started.elapsed(),
            what,
            false,
            message.clone(),
            Some(exchange),
        );
    }
    std::io::Error::other(message)
}

/// Whether `uri` goes to one of the pods of this process: nothing else is
/// forwarded.
fn origin_allowed(uri: &hyper::Uri) -> bool {
    let origin = match (uri.scheme_str(), uri.authority()) {
        (Some(scheme), Some(authority)) => format!("{scheme}://{authority}"),
        _ => String::new(),
    };
    ORIGINS
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&origin)
}

/// The request half of an exchange, as recorded (the proxy's own
/// credential left out).
fn request_of(parts: &hyper::http::request::Parts, url: &str, body: &Bytes) -> Http {
    Http {
        method: parts.method.to_string(),
        url: url.to_owned(),
        request_headers: headers(
            parts
                .headers
                .iter()
                .filter(|(k, _)| *k != hyper::header::PROXY_AUTHORIZATION)
                .map(|(k, v)| (k.as_str(), v.as_bytes())),
        ),
        request_body: cap_bytes(body),
        ..Http::default()
    }
}

/// The answer half of an exchange, as recorded.
fn answered(exchange: &mut Http, status: u16, answer_headers: &hyper::HeaderMap, body: &Bytes) {
    exchange.status = Some(status);
    exchange.response_headers = headers(
        answer_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes())),
    );
    exchange.response_body = cap_bytes(body);
}

/// `builder` with every header of `from` a hop may pass on.
fn with_headers<B>(
    mut builder: B,
    from: &hyper::HeaderMap,
    add: impl Fn(B, &hyper::header::HeaderName, &hyper::header::HeaderValue) -> B,
) -> B {
    for (k, v) in from {
        if !NOT_FORWARDED.contains(&k.as_str()) {
            builder = add(builder, k, v);
        }
    }
    builder
}

fn path_of(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or(url)
}
