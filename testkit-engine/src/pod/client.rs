//! The pod's HTTP client: reqwest's, with every request a traced test
//! sends recorded in its trace.
//!
//! Why a wrapper and not a recording proxy: reqwest has no request hook
//! in the process (its connector layer must answer with reqwest's opaque
//! connection type), and a proxy on loopback makes each request a second
//! HTTP exchange through the kernel, which in the dev profile cost more
//! than a tenth of an I/O-bound test's time. Here a traced request costs a
//! copy of its head, and an untraced one nothing. `Client` and
//! `RequestBuilder` have reqwest's methods, by the same names and with the
//! same arguments, and answer with reqwest's `Response` and `Error`, so
//! `pod.client().get(url).send().await?` reads as with reqwest.
//! reqwest-middleware would give the same shape, with its own error type
//! in every answer; reqwest's is what suites already handle.

use std::fmt::Display;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{IntoUrl, Method};

/// An HTTP client of the pod, carrying its credential: a `reqwest::Client`
/// whose requests are recorded in the trace of the test that sends them
/// (the book: `book/src/traces.md#traces`). Cloning it is cheap. [`Client::reqwest`] is
/// the client underneath, for what this type does not offer; what is sent
/// through it is not traced.
#[derive(Clone, Debug)]
pub struct Client {
    inner: reqwest::Client,
    /// The headers reqwest adds to each request (the credential): in the
    /// trace, blanked, as they were sent.
    defaults: std::sync::Arc<HeaderMap>,
}

impl Client {
    pub(crate) fn new(inner: reqwest::Client, defaults: HeaderMap) -> Client {
        Client {
            inner,
            defaults: std::sync::Arc::new(defaults),
        }
    }

    /// A `GET` of `url`.
    pub fn get<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::GET, url)
    }

    /// A `POST` to `url`.
    pub fn post<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::POST, url)
    }

    /// A `PUT` to `url`.
    pub fn put<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::PUT, url)
    }

    /// A `PATCH` of `url`.
    pub fn patch<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::PATCH, url)
    }

    /// A `DELETE` of `url`.
    pub fn delete<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::DELETE, url)
    }

    /// A `HEAD` of `url`.
    pub fn head<U: IntoUrl>(&self, url: U) -> RequestBuilder {
        self.request(Method::HEAD, url)
    }

    /// A request of `method` to `url`.
    pub fn request<U: IntoUrl>(&self, method: Method, url: U) -> RequestBuilder {
        RequestBuilder {
            inner: self.inner.request(method, url),
            defaults: self.defaults.clone(),
        }
    }

    /// Sends a request built elsewhere (`RequestBuilder::build`).
    pub async fn execute(&self, request: reqwest::Request) -> reqwest::Result<reqwest::Response> {
        crate::trace::http::send(&self.inner, &self.defaults, request).await
    }

    /// The reqwest client underneath, carrying the credential: what is
    /// sent through it is not traced.
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.inner
    }
}

/// A request being built: reqwest's `RequestBuilder`, sent through the
/// pod's [`Client`].
#[must_use = "a request is sent only by `send`"]
#[derive(Debug)]
pub struct RequestBuilder {
    inner: reqwest::RequestBuilder,
    defaults: std::sync::Arc<HeaderMap>,
}

impl RequestBuilder {
    fn map(self, f: impl FnOnce(reqwest::RequestBuilder) -> reqwest::RequestBuilder) -> Self {
        RequestBuilder {
            inner: f(self.inner),
            defaults: self.defaults,
        }
    }

    /// Adds a header.
    pub fn header<K, V>(self, key: K, value: V) -> Self
    where
        HeaderName: TryFrom<K>,
        <HeaderName as TryFrom<K>>::Error: Into<http::Error>,
        HeaderValue: TryFrom<V>,
        <HeaderValue as TryFrom<V>>::Error: Into<http::Error>,
    {
        self.map(|b| b.header(key, value))
    }

    /// Adds headers.
    pub fn headers(self, headers: HeaderMap) -> Self {
        self.map(|b| b.headers(headers))
    }

    /// Sends `Authorization: Bearer <token>` (over the pod's own credential).
    pub fn bearer_auth<T: Display>(self, token: T) -> Self {
        self.map(|b| b.bearer_auth(token))
    }

    /// Sends `Authorization: Basic …` (over the pod's own credential).
    pub fn basic_auth<U: Display, P: Display>(self, username: U, password: Option<P>) -> Self {
        self.map(|b| b.basic_auth(username, password))
    }

    /// The body, as it is.
    pub fn body<T: Into<reqwest::Body>>(self, body: T) -> Self {
        self.map(|b| b.body(body))
    }

    /// The body, `value` as JSON, with `Content-Type: application/json`.
    pub fn json<T: serde::Serialize + ?Sized>(self, value: &T) -> Self {
        self.map(|b| b.json(value))
    }

    /// The body, `value` URL-encoded as a form.
    pub fn form<T: serde::Serialize + ?Sized>(self, value: &T) -> Self {
        self.map(|b| b.form(value))
    }

    /// Adds `value` to the URL's query.
    pub fn query<T: serde::Serialize + ?Sized>(self, value: &T) -> Self {
        self.map(|b| b.query(value))
    }

    /// Fails the request if no answer has come, body included, within
    /// `timeout`.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.map(|b| b.timeout(timeout))
    }

    /// The HTTP version to send with.
    pub fn version(self, version: reqwest::Version) -> Self {
        self.map(|b| b.version(version))
    }

    /// A copy, unless the body is a stream.
    pub fn try_clone(&self) -> Option<Self> {
        Some(RequestBuilder {
            inner: self.inner.try_clone()?,
            defaults: self.defaults.clone(),
        })
    }

    /// The request, not sent.
    pub fn build(self) -> reqwest::Result<reqwest::Request> {
        self.inner.build()
    }

    /// Sends the request: reqwest's answer, or its error.
    pub async fn send(self) -> reqwest::Result<reqwest::Response> {
        let (client, request) = self.inner.build_split();
        crate::trace::http::send(&client, &self.defaults, request?).await
    }
}

#[cfg(test)]
mod tests {
    //! The pod's client as tests meet it, the pod a raw socket on loopback
    //! (so that what it receives, and how it answers, is seen byte for
    //! byte).
    use std::time::Duration;

    use reqwest::header::{HeaderMap, HeaderValue};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::Client;
    use crate::trace::active::{enter, leave};
    use crate::trace::{EntryKind, Recorder};

    /// Runs `f` on this thread, as the harness runs a test's body.
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async { tokio::time::timeout(Duration::from_secs(30), f).await })
            .expect("the test took over 30 s")
    }

    /// A pod's client that sends `authorization: Bearer default-token`
    /// with every request, recording into `recorder` on this thread.
    fn traced_client(recorder: &Recorder) -> Client {
        enter(recorder);
        let mut defaults = HeaderMap::new();
        defaults.insert(
            reqwest::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer default-token"),
        );
        let inner = reqwest::Client::builder()
            .no_proxy()
            .default_headers(defaults.clone())
            .build()
            .unwrap();
        Client::new(inner, defaults)
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
    fn a_request_is_sent_as_built_and_recorded_with_its_answer() {
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
            let client = traced_client(&recorder);
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
                // As the test built it: its own path and credential, and
                // nothing a proxy would add.
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
            // The client's own credential, which reqwest adds as it sends,
            // is in the trace as sent: blanked.
            let authorizations = http
                .request_headers
                .iter()
                .filter(|(k, _)| k.eq_ignore_ascii_case("authorization"))
                .count();
            assert_eq!(authorizations, 2, "{:?}", http.request_headers);
            assert_eq!(
                header(&http.response_headers, "set-cookie").as_deref(),
                Some(crate::redact::REDACTED)
            );
        });
    }

    #[test]
    fn a_streamed_answer_streams_and_is_recorded_when_it_ends() {
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
            let client = traced_client(&recorder);
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
            let client = traced_client(&recorder);
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

    #[test]
    fn a_request_nobody_answers_fails_with_reqwests_error_and_is_recorded() {
        block_on(async {
            // A port nobody listens on: bound, then let go of.
            let addr = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap();
            let recorder = Recorder::start("refused");
            let client = traced_client(&recorder);
            let error = client
                .get(format!("http://{addr}/gone"))
                .send()
                .await
                .expect_err("nobody listens there");
            assert!(error.is_connect(), "{error:?}");
            leave();
            let entries = http_entries(&recorder);
            assert_eq!(entries.len(), 1, "{entries:#?}");
            assert_eq!(entries[0].title, "GET /gone → no answer");
            assert!(!entries[0].ok);
            assert!(
                entries[0].detail.contains("error sending request"),
                "{entries:#?}"
            );
        });
    }

    #[test]
    fn an_answer_let_go_of_unread_has_its_body_in_the_trace() {
        // The harness's shape: the test's future on its thread, spawned
        // tasks on the runtime's workers, the trace settled after.
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let recorder = Recorder::start("unread");
        let status = runtime.block_on(async {
            let pod = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = pod.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = pod.accept().await.unwrap();
                read_request(&mut s).await.unwrap();
                let body = "conflict: the name is taken";
                s.write_all(b"HTTP/1.1 409 Conflict\r\ncontent-length: 27\r\n\r\n")
                    .await
                    .unwrap();
                // The body comes after the test has let go of the answer.
                tokio::time::sleep(Duration::from_millis(100)).await;
                s.write_all(body.as_bytes()).await.unwrap();
                tokio::time::sleep(Duration::from_secs(1)).await;
            });
            let client = traced_client(&recorder);
            let answer = client
                .put(format!("http://{addr}/names/x"))
                .send()
                .await
                .unwrap();
            let status = answer.status();
            drop(answer);
            leave();
            status
        });
        assert_eq!(status, 409);
        recorder.settle(Duration::from_secs(5));
        let entries = http_entries(&recorder);
        assert_eq!(entries.len(), 1, "{entries:#?}");
        assert_eq!(entries[0].title, "PUT /names/x → 409");
        assert_eq!(
            entries[0].http.as_ref().unwrap().response_body,
            "conflict: the name is taken"
        );
    }
}
