//! Requests through the pod's client, recorded in the process: the
//! request as it is sent, and its answer as the test reads it.
//!
//! [`send`] is what the pod's [`Client`](crate::pod::Client) sends with.
//! When no test is traced it is reqwest's `execute` and nothing else. When
//! one is, the request's head and body are copied (capped) before it goes,
//! and the answer's body is handed to the test through a tee that keeps
//! its first [`super::TEXT_CAP`] bytes as they pass: a streamed
//! answer still streams, and the exchange is recorded when the body ends
//! (or is dropped unread), with how long it took until then. What is
//! recorded is reqwest's own view: an `https` pod is traced like any
//! other, and a request that fails fails with reqwest's error.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use reqwest::header::HeaderMap;
use reqwest::ResponseBuilderExt as _;

use super::{
    cap_field, cap_window, headers, EntryKind, Http, Recorder, TEXT_CAP, TITLE_CAP, TRIMMED_NOTE,
    URL_CAP, WINDOW,
};

/// `e` without the URL it names when that URL holds credentials
/// ([`crate::redact::redact_url`] would change it): reqwest's text of an
/// error names its URL whole, and a test's failure shows that text.
fn without_credentials(e: reqwest::Error) -> reqwest::Error {
    match e.url() {
        Some(url) if crate::redact::redact_url(url.as_str()) != url.as_str() => e.without_url(),
        _ => e,
    }
}

/// Sends `request` with `client`, in the trace of the running test when
/// there is one. `defaults` are the client's default headers (its
/// credential), which reqwest adds as it sends: recorded, blanked.
pub(crate) async fn send(
    client: &reqwest::Client,
    defaults: &Arc<HeaderMap>,
    request: reqwest::Request,
) -> reqwest::Result<reqwest::Response> {
    // Pending until the answer's head is in (or the request fails, or is
    // cancelled): what a hang report names.
    let _pending = super::pending::begin_request(request.method().as_str(), request.url().as_str());
    let Some(recorder) = super::active::current() else {
        return client.execute(request).await.map_err(without_credentials);
    };
    let mut url = crate::redact::redact_url(request.url().as_str());
    cap_field(&mut url, URL_CAP);
    let mut path = match request.url().query() {
        Some(q) => crate::redact::redact_url(&format!("{}?{q}", request.url().path())),
        None => request.url().path().to_owned(),
    };
    // Room for the method and the outcome in the title.
    cap_field(&mut path, TITLE_CAP - 64);
    let mut exchange = Exchange {
        started: Instant::now(),
        took: Duration::ZERO,
        method: request.method().clone(),
        url,
        path,
        defaults: defaults.clone(),
        request_headers: request.headers().clone(),
        request_body: match request.body() {
            None => Kept::default(),
            Some(body) => match body.as_bytes() {
                Some(bytes) => Kept::of(bytes),
                None => Kept::stream(),
            },
        },
        status: None,
        response_headers: HeaderMap::new(),
        response_body: Kept::default(),
        broke: None,
        trimmed: false,
    };
    let response = match client.execute(request).await {
        Ok(response) => response,
        Err(e) => {
            let e = without_credentials(e);
            exchange.took = exchange.started.elapsed();
            exchange.broke = Some(crate::redact::redact_urls_in(&crate::errors::error_chain(
                &e,
            )));
            recorder.push_exchange(exchange);
            return Err(e);
        }
    };
    exchange.status = Some(response.status().as_u16());
    exchange.response_headers = response.headers().clone();
    let url = response.url().clone();
    let (parts, body) = http::Response::<reqwest::Body>::from(response).into_parts();
    let tee = Tee {
        body: Some(body),
        pending: Some((recorder, exchange)),
    };
    let mut answer = http::Response::builder()
        .status(parts.status)
        .version(parts.version);
    if let Some(h) = answer.headers_mut() {
        *h = parts.headers;
    }
    if let Some(x) = answer.extensions_mut() {
        *x = parts.extensions;
    }
    // The builder has nothing it could refuse: the status and headers are
    // the answer's own.
    let answer = answer
        .url(url)
        .body(reqwest::Body::wrap(tee))
        .unwrap_or_default();
    Ok(reqwest::Response::from(answer))
}

/// An exchange as it was seen: made text only when its trace is read.
pub(super) struct Exchange {
    started: Instant,
    took: Duration,
    method: reqwest::Method,
    /// The URL as sent, cut at [`URL_CAP`].
    url: String,
    /// Its path and query, cut for the title.
    path: String,
    defaults: Arc<HeaderMap>,
    request_headers: HeaderMap,
    request_body: Kept,
    status: Option<u16>,
    response_headers: HeaderMap,
    response_body: Kept,
    /// Why no answer came, or why its body broke off.
    broke: Option<String>,
    /// Kept without its headers and bodies: the trace's budget was spent.
    trimmed: bool,
}

impl Exchange {
    /// The trace's entry for this exchange, in `recorder`'s time.
    pub(super) fn entry(&self, recorder: &Recorder) -> super::Entry {
        let http = if self.trimmed {
            Http {
                method: self.method.to_string(),
                url: self.url.clone(),
                status: self.status,
                ..Http::default()
            }
        } else {
            Http {
                method: self.method.to_string(),
                url: self.url.clone(),
                status: self.status,
                request_headers: header_pairs(
                    self.defaults.iter().chain(self.request_headers.iter()),
                ),
                request_body: self.request_body.text(),
                response_headers: header_pairs(self.response_headers.iter()),
                response_body: self.response_body.text(),
            }
        };
        let outcome = self
            .status
            .map_or("no answer".to_owned(), |s| s.to_string());
        let detail = match (&self.broke, self.trimmed) {
            (_, true) => TRIMMED_NOTE.to_owned(),
            (Some(broke), false) => super::cap(broke),
            (None, false) => String::new(),
        };
        super::Entry {
            at_us: recorder.offset(self.started),
            duration_us: self.took.as_micros() as u64,
            kind: EntryKind::Http,
            title: format!("{} {} → {outcome}", http.method, self.path),
            ok: self.status.is_some_and(|s| s < 400) && self.broke.is_none(),
            detail,
            http: Some(http),
            frame: None,
        }
    }
}

impl Exchange {
    /// About what its entry's texts weigh, erring high: headers and
    /// bodies as capped.
    pub(super) fn weight(&self) -> usize {
        if self.trimmed {
            return self.url.len() + self.path.len() + TRIMMED_NOTE.len() + 32;
        }
        let headers = |h: &HeaderMap| {
            h.iter()
                .map(|(k, v)| k.as_str().len() + v.len().min(TEXT_CAP) + 8)
                .sum::<usize>()
                .min(TEXT_CAP + 64)
        };
        let body = |k: &Kept| k.total.min(TEXT_CAP) + 32;
        self.url.len()
            + self.path.len()
            + 32
            + headers(&self.defaults)
            + headers(&self.request_headers)
            + headers(&self.response_headers)
            + body(&self.request_body)
            + body(&self.response_body)
            + self
                .broke
                .as_ref()
                .map_or(0, |b| b.len().min(TEXT_CAP + 32))
    }

    /// Lets go of its headers and bodies: only its title, times and
    /// outcome are kept.
    pub(super) fn trim(&mut self) {
        self.trimmed = true;
        cap_field(&mut self.url, super::TRIMMED_TEXT_CAP);
        cap_field(&mut self.path, super::TRIMMED_TEXT_CAP);
        self.defaults = Arc::default();
        self.request_headers = HeaderMap::new();
        self.response_headers = HeaderMap::new();
        self.request_body = Kept::default();
        self.response_body = Kept::default();
    }
}

fn header_pairs<'a>(
    pairs: impl Iterator<
        Item = (
            &'a reqwest::header::HeaderName,
            &'a reqwest::header::HeaderValue,
        ),
    >,
) -> Vec<(String, String)> {
    headers(pairs.map(|(k, v)| (k.as_str(), v.as_bytes())))
}

/// The first [`WINDOW`] bytes of a body (cut to [`super::TEXT_CAP`] once
/// redacted), and how long it was.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    total: usize,
    stream: bool,
}

impl Kept {
    fn of(bytes: &[u8]) -> Kept {
        let mut kept = Kept::default();
        kept.add(bytes);
        kept
    }

    fn stream() -> Kept {
        Kept {
            stream: true,
            ..Kept::default()
        }
    }

    fn add(&mut self, data: &[u8]) {
        self.total += data.len();
        if self.bytes.len() < WINDOW {
            let room = WINDOW - self.bytes.len();
            self.bytes.extend_from_slice(&data[..data.len().min(room)]);
        }
    }

    fn text(&self) -> String {
        if self.stream {
            return "(a stream: not kept)".to_owned();
        }
        cap_window(&self.bytes, self.total)
    }
}

/// The answer's body as the test reads it, recorded on the way.
struct Tee {
    /// Taken when the tee is dropped unread: then what it holds is read
    /// for the trace.
    body: Option<reqwest::Body>,
    pending: Option<(Recorder, Exchange)>,
}

impl http_body::Body for Tee {
    type Data = Bytes;
    type Error = reqwest::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, reqwest::Error>>> {
        let Some(body) = self.body.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(&mut *body).poll_frame(cx);
        let ended = body.is_end_stream();
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some((_, exchange))) = (frame.data_ref(), self.pending.as_mut())
                {
                    exchange.response_body.add(data);
                }
                if ended {
                    self.finish(None);
                }
            }
            Poll::Ready(Some(Err(e))) => {
                let why = format!(
                    "the answer's body broke off: {}",
                    crate::redact::redact_urls_in(&crate::errors::error_chain(e))
                );
                self.finish(Some(why));
            }
            Poll::Ready(None) => self.finish(None),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.as_ref().is_none_or(|b| b.is_end_stream())
    }

    fn size_hint(&self) -> SizeHint {
        self.body
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_default()
    }
}

impl Tee {
    /// Records the exchange; `broke`: why its body ended early.
    fn finish(&mut self, broke: Option<String>) {
        if let Some((recorder, mut exchange)) = self.pending.take() {
            exchange.took = exchange.started.elapsed();
            exchange.broke = broke;
            recorder.push_exchange(exchange);
        }
    }
}

/// How long the body of an answer the test let go of unread is read for
/// its trace, at most.
const DRAIN: Duration = Duration::from_secs(2);

impl Drop for Tee {
    /// An answer the test let go of before its body ended (it looked at the
    /// status only, or `error_for_status` failed it) is what a failure's
    /// evidence most needs: its body is read on, up to the cap, for the
    /// trace, and the trace waits for it ([`Recorder::settle`]).
    fn drop(&mut self) {
        let (Some((recorder, mut exchange)), Some(mut body)) =
            (self.pending.take(), self.body.take())
        else {
            return;
        };
        exchange.took = exchange.started.elapsed();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            recorder.push_exchange(exchange);
            return;
        };
        let draining = recorder.draining();
        runtime.spawn(async move {
            let read = async {
                while exchange.response_body.bytes.len() < WINDOW {
                    match std::future::poll_fn(|cx| {
                        http_body::Body::poll_frame(Pin::new(&mut body), cx)
                    })
                    .await
                    {
                        Some(Ok(frame)) => {
                            if let Some(data) = frame.data_ref() {
                                exchange.response_body.add(data);
                            }
                        }
                        Some(Err(_)) | None => break,
                    }
                }
            };
            let _ = tokio::time::timeout(DRAIN, read).await;
            recorder.push_exchange(exchange);
            drop(draining);
        });
    }
}
