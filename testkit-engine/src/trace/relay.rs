//! The trace proxy's connections: HTTP/1 relayed byte for byte, and
//! recorded on the way.
//!
//! Each connection a pod's client opens to the proxy gets one connection
//! to the pod, opened for its first request and closed with it: the pod
//! sees the client's connections one for one, keep-alive and close
//! included. Of each request only the head is rewritten (its target made
//! origin-form again and the proxy's own credential dropped); bodies and
//! answers pass as they arrive, so a streamed answer streams. What is read
//! is only what finds where a message ends (its head, its length or its
//! chunks): a traced request costs a second exchange on loopback and
//! little more, and nothing is turned into text unless a test records it.

use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{cap_bytes, headers, EntryKind, Http, Recorder, TEXT_CAP};

/// The largest request or answer head read; a longer one ends the connection.
const MAX_HEAD: usize = 64 * 1024;
/// The most headers a head may have.
const MAX_HEADERS: usize = 100;
/// Output gathered before it is written: a head and a small body go in one
/// write.
const FLUSH_AT: usize = 64 * 1024;

/// Where requests go: the proxy decides which test a request belongs to
/// and which origins it may reach.
pub(super) trait Routes: Send + Sync + 'static {
    /// The recorder of the test whose request carried `proxy_authorization`.
    fn recorder(&self, proxy_authorization: Option<&[u8]>) -> Option<Recorder>;
    /// Whether `origin` (`http://host:port`) is one of this process's pods.
    fn allowed(&self, origin: &str) -> bool;
}

/// Serves one connection of a pod's client until either side closes it.
pub(super) async fn serve(mut client: TcpStream, routes: &impl Routes) {
    let mut from_client = BytesMut::with_capacity(8 * 1024);
    let mut pod: Option<Upstream> = None;
    loop {
        // Between requests, a pod that closes its side closes the client's
        // too, as it would have without the proxy.
        if let Some(up) = &mut pod {
            if from_client.is_empty() {
                tokio::select! {
                    read = client.read_buf(&mut from_client) => match read {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    },
                    _ = up.closed() => return,
                }
            }
        }
        let Some(request) = read_request(&mut client, &mut from_client).await else {
            return;
        };
        let Some(origin) = request.origin() else {
            refuse(
                &mut client,
                "testkit's trace proxy forwards absolute http URLs only",
            )
            .await;
            return;
        };
        if !routes.allowed(origin) {
            refuse(
                &mut client,
                "testkit's trace proxy forwards only to the pods of its process",
            )
            .await;
            return;
        }
        let recorder = routes.recorder(request.proxy_authorization());
        let mut exchange = Exchange::new(recorder, &request);
        let up = match &mut pod {
            Some(up) if up.origin == origin => up,
            _ => match Upstream::connect(origin).await {
                Ok(up) => pod.insert(up),
                Err(e) => {
                    // An error, not an answer: the client sees its request
                    // fail, as it would have without the proxy.
                    exchange.no_answer(&format!("cannot connect to {origin}: {e}"));
                    return;
                }
            },
        };
        match relay(&mut client, &mut from_client, up, &request, &mut exchange).await {
            Ok(Next::KeepAlive) => exchange.done(),
            Ok(Next::Close) => {
                exchange.done();
                let _ = client.shutdown().await;
                return;
            }
            Ok(Next::Upgraded) => {
                exchange.done();
                let mut pod_stream = pod.take().map(|u| u.stream);
                if let Some(s) = &mut pod_stream {
                    let _ = tokio::io::copy_bidirectional(&mut client, s).await;
                }
                return;
            }
            Err(Failed::Client) => {
                exchange.done();
                return;
            }
            Err(Failed::Pod(e)) => {
                exchange.no_answer(&e);
                return;
            }
        }
    }
}

/// What the connection does after an exchange.
enum Next {
    KeepAlive,
    Close,
    Upgraded,
}

/// Why an exchange ended early: the client went away (nothing to record
/// as the pod's), or the pod failed to answer.
enum Failed {
    Client,
    Pod(String),
}

/// One request and its answer, from the request's head on.
async fn relay(
    client: &mut TcpStream,
    from_client: &mut BytesMut,
    up: &mut Upstream,
    request: &Head,
    exchange: &mut Exchange,
) -> Result<Next, Failed> {
    let mut out = BytesMut::with_capacity(request.raw.len() + 256);
    request.write_forwarded(&mut out);
    let body = request.request_framing();
    pass_body(
        body,
        client,
        from_client,
        &mut up.stream,
        &mut out,
        &mut exchange.request_body,
    )
    .await
    .map_err(|e| match e {
        Broken::Read(_) => Failed::Client,
        Broken::Write(e) => Failed::Pod(format!("the pod's connection broke: {e}")),
    })?;
    flush(&mut up.stream, &mut out)
        .await
        .map_err(|e| Failed::Pod(format!("the pod's connection broke: {e}")))?;

    // The answer: interim ones passed on, then the final one.
    let answer = loop {
        let Some(answer) = read_response(&mut up.stream, &mut up.buffer)
            .await
            .map_err(Failed::Pod)?
        else {
            return Err(Failed::Pod(
                "the pod closed the connection without answering".to_owned(),
            ));
        };
        out.extend_from_slice(&answer.raw);
        if answer.code == 101 || !(100..200).contains(&answer.code) {
            break answer;
        }
    };
    exchange.answered(&answer);
    if answer.code == 101 {
        out.extend_from_slice(&up.buffer.split());
        flush(client, &mut out).await.map_err(|_| Failed::Client)?;
        client
            .write_all(&from_client.split())
            .await
            .map_err(|_| Failed::Client)?;
        return Ok(Next::Upgraded);
    }
    let framing = answer.response_framing(&request.method);
    let pod_closes = matches!(framing, Framing::UntilClose) || answer.closes();
    pass_body(
        framing,
        &mut up.stream,
        &mut up.buffer,
        client,
        &mut out,
        &mut exchange.response_body,
    )
    .await
    .map_err(|e| match e {
        Broken::Read(e) => Failed::Pod(format!("the pod's answer broke off: {e}")),
        Broken::Write(_) => Failed::Client,
    })?;
    flush(client, &mut out).await.map_err(|_| Failed::Client)?;
    Ok(if pod_closes || request.closes() {
        Next::Close
    } else {
        Next::KeepAlive
    })
}

/// The proxy's connection to a pod.
struct Upstream {
    origin: String,
    stream: TcpStream,
    buffer: BytesMut,
}

impl Upstream {
    async fn connect(origin: &str) -> Result<Upstream, String> {
        let authority = origin.strip_prefix("http://").unwrap_or(origin);
        let stream = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect(authority))
            .await
            .map_err(|_| "no connection within 10 s".to_owned())?
            .map_err(|e| e.to_string())?;
        let _ = stream.set_nodelay(true);
        Ok(Upstream {
            origin: origin.to_owned(),
            stream,
            buffer: BytesMut::with_capacity(8 * 1024),
        })
    }

    /// Resolves when the pod closes this idle connection (or sends what
    /// nobody asked for).
    async fn closed(&mut self) {
        loop {
            if self.stream.readable().await.is_err() {
                return;
            }
            let mut probe = [0u8; 1];
            match self.stream.try_read(&mut probe) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                _ => return,
            }
        }
    }
}

/// A request or answer head, parsed: what relaying needs of it.
struct Head {
    /// The head's bytes as received.
    raw: BytesMut,
    method: String,
    /// The request's target (absolute-form, as a proxy receives it).
    target: String,
    minor_version: u8,
    code: u16,
    /// `(name, value range in raw)`.
    headers: Vec<(String, std::ops::Range<usize>)>,
}

impl Head {
    fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, r)| &self.raw[r.clone()])
    }

    fn proxy_authorization(&self) -> Option<&[u8]> {
        self.header("proxy-authorization")
    }

    /// `http://host:port` of an absolute-form target.
    fn origin(&self) -> Option<&str> {
        let rest = self.target.strip_prefix("http://")?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        (end > 0).then(|| &self.target[.."http://".len() + end])
    }

    /// The target in origin-form: what the pod would have received.
    fn path(&self) -> &str {
        let origin = self.origin().map_or(0, str::len);
        match &self.target[origin..] {
            "" => "/",
            p => p,
        }
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .any(|(_, r)| {
                self.raw[r.clone()]
                    .split(|b| *b == b',')
                    .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
            })
    }

    /// Whether the sender closes the connection after this message.
    fn closes(&self) -> bool {
        self.has_token("connection", "close")
            || (self.minor_version == 0 && !self.has_token("connection", "keep-alive"))
    }

    fn length(&self) -> Option<u64> {
        let v = self.header("content-length")?;
        std::str::from_utf8(v).ok()?.trim().parse().ok()
    }

    fn request_framing(&self) -> Framing {
        if self.has_token("transfer-encoding", "chunked") {
            Framing::Chunked
        } else {
            Framing::Length(self.length().unwrap_or(0))
        }
    }

    fn response_framing(&self, method: &str) -> Framing {
        if method == "HEAD" || self.code == 204 || self.code == 304 || self.code < 200 {
            Framing::Length(0)
        } else if self.has_token("transfer-encoding", "chunked") {
            Framing::Chunked
        } else {
            self.length().map_or(Framing::UntilClose, Framing::Length)
        }
    }

    /// The request as the pod gets it: origin-form, without the proxy's
    /// credential. `Expect` is dropped too: a relay that waited for the
    /// body would never pass on a `100 Continue` it was waiting for (and
    /// reqwest sends none).
    fn write_forwarded(&self, out: &mut BytesMut) {
        out.extend_from_slice(self.method.as_bytes());
        out.extend_from_slice(b" ");
        out.extend_from_slice(self.path().as_bytes());
        out.extend_from_slice(if self.minor_version == 0 {
            b" HTTP/1.0\r\n"
        } else {
            b" HTTP/1.1\r\n"
        });
        for (name, value) in &self.headers {
            if ["proxy-authorization", "proxy-connection", "expect"]
                .iter()
                .any(|h| name.eq_ignore_ascii_case(h))
            {
                continue;
            }
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(&self.raw[value.clone()]);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
    }

    fn header_pairs(&self, skip: &str) -> Vec<(String, String)> {
        headers(
            self.headers
                .iter()
                .filter(|(n, _)| !n.eq_ignore_ascii_case(skip))
                .map(|(n, r)| (n.as_str(), &self.raw[r.clone()])),
        )
    }
}

/// Reads a request head from the client; `None` when it closes first or
/// sends what is not HTTP/1.
async fn read_request(client: &mut TcpStream, buf: &mut BytesMut) -> Option<Head> {
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut slots);
        match req.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head {
                    method: req.method.unwrap_or_default().to_owned(),
                    target: req.path.unwrap_or_default().to_owned(),
                    minor_version: req.version.unwrap_or(1),
                    code: 0,
                    headers: ranges(buf, req.headers),
                    raw: BytesMut::new(),
                };
                return Some(Head {
                    raw: buf.split_to(len),
                    ..head
                });
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            _ => return None,
        }
        match client.read_buf(buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

/// Reads an answer head from the pod; `Ok(None)` when it closes first.
async fn read_response(pod: &mut TcpStream, buf: &mut BytesMut) -> Result<Option<Head>, String> {
    loop {
        let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut res = httparse::Response::new(&mut slots);
        match res.parse(buf) {
            Ok(httparse::Status::Complete(len)) => {
                let head = Head {
                    method: String::new(),
                    target: String::new(),
                    minor_version: res.version.unwrap_or(1),
                    code: res.code.unwrap_or(0),
                    headers: ranges(buf, res.headers),
                    raw: BytesMut::new(),
                };
                return Ok(Some(Head {
                    raw: buf.split_to(len),
                    ..head
                }));
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD => {}
            Ok(httparse::Status::Partial) => {
                return Err(format!("the pod's answer head is over {MAX_HEAD} bytes"))
            }
            Err(e) => return Err(format!("the pod's answer is not HTTP/1: {e}")),
        }
        match pod.read_buf(buf).await {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err("the pod closed the connection within its answer's head".into()),
            Ok(_) => {}
            Err(e) => return Err(format!("reading the pod's answer: {e}")),
        }
    }
}

/// Each header's name, and where its value is in `buf`: httparse's slices
/// point into it.
fn ranges(buf: &[u8], parsed: &[httparse::Header<'_>]) -> Vec<(String, std::ops::Range<usize>)> {
    let base = buf.as_ptr() as usize;
    parsed
        .iter()
        .map(|h| {
            let start = h.value.as_ptr() as usize - base;
            (h.name.to_owned(), start..start + h.value.len())
        })
        .collect()
}

/// How a message's body ends.
#[derive(Clone, Copy)]
enum Framing {
    Length(u64),
    Chunked,
    /// An answer without a length ends when the pod closes.
    UntilClose,
}

/// Which side of a copy broke.
enum Broken {
    Read(std::io::Error),
    Write(std::io::Error),
}

/// The first [`TEXT_CAP`] bytes of a body, and how long it was.
#[derive(Default)]
struct Kept {
    bytes: Vec<u8>,
    total: usize,
    /// Nothing is kept when no test records the exchange.
    wanted: bool,
}

impl Kept {
    fn add(&mut self, bytes: &[u8]) {
        self.total += bytes.len();
        if self.wanted && self.bytes.len() < TEXT_CAP + 1 {
            let room = TEXT_CAP + 1 - self.bytes.len();
            self.bytes
                .extend_from_slice(&bytes[..bytes.len().min(room)]);
        }
    }

    fn text(&self) -> String {
        let mut text = cap_bytes(&self.bytes[..self.bytes.len().min(TEXT_CAP)]);
        if self.total > TEXT_CAP {
            text.push_str(&format!("… {} bytes more", self.total - TEXT_CAP));
        }
        text
    }
}

/// Passes one body from `from` (what is already read of it in `buf`) to
/// `to` by way of `out`, keeping its payload in `kept`.
async fn pass_body(
    framing: Framing,
    from: &mut TcpStream,
    buf: &mut BytesMut,
    to: &mut TcpStream,
    out: &mut BytesMut,
    kept: &mut Kept,
) -> Result<(), Broken> {
    match framing {
        Framing::Length(n) => pass_exactly(n, from, buf, to, out, kept).await,
        Framing::UntilClose => loop {
            if !buf.is_empty() {
                kept.add(buf);
                out.extend_from_slice(&buf.split());
            }
            if more(from, buf, to, out).await? == 0 {
                return Ok(());
            }
        },
        Framing::Chunked => loop {
            let line = read_line(from, buf, to, out).await?;
            let size = std::str::from_utf8(&line)
                .ok()
                .and_then(|l| {
                    let hex = l.trim_end().split(';').next()?.trim();
                    u64::from_str_radix(hex, 16).ok()
                })
                .ok_or_else(|| Broken::Read(invalid("a chunk's size is not hexadecimal")))?;
            out.extend_from_slice(&line);
            if size == 0 {
                // Trailers, to the empty line.
                loop {
                    let trailer = read_line(from, buf, to, out).await?;
                    out.extend_from_slice(&trailer);
                    if trailer.as_ref() == b"\r\n" || trailer.as_ref() == b"\n" {
                        return Ok(());
                    }
                }
            }
            pass_exactly(size, from, buf, to, out, kept).await?;
            let end = read_line(from, buf, to, out).await?;
            out.extend_from_slice(&end);
        },
    }
}

async fn pass_exactly(
    mut n: u64,
    from: &mut TcpStream,
    buf: &mut BytesMut,
    to: &mut TcpStream,
    out: &mut BytesMut,
    kept: &mut Kept,
) -> Result<(), Broken> {
    while n > 0 {
        if buf.is_empty() && more(from, buf, to, out).await? == 0 {
            return Err(Broken::Read(invalid("the connection closed within a body")));
        }
        let take = buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
        let piece = buf.split_to(take);
        kept.add(&piece);
        out.extend_from_slice(&piece);
        n -= take as u64;
    }
    Ok(())
}

/// The next line of a chunked body, its line end included.
async fn read_line(
    from: &mut TcpStream,
    buf: &mut BytesMut,
    to: &mut TcpStream,
    out: &mut BytesMut,
) -> Result<BytesMut, Broken> {
    loop {
        if let Some(i) = buf.iter().position(|b| *b == b'\n') {
            return Ok(buf.split_to(i + 1));
        }
        if buf.len() > MAX_HEAD {
            return Err(Broken::Read(invalid("a chunk's line is too long")));
        }
        if more(from, buf, to, out).await? == 0 {
            return Err(Broken::Read(invalid("the connection closed within a body")));
        }
    }
}

/// Writes what is gathered, then reads more of `from`: nothing waits on a
/// read while output is held back.
async fn more(
    from: &mut TcpStream,
    buf: &mut BytesMut,
    to: &mut TcpStream,
    out: &mut BytesMut,
) -> Result<usize, Broken> {
    flush(to, out).await.map_err(Broken::Write)?;
    from.read_buf(buf).await.map_err(Broken::Read)
}

async fn flush(to: &mut TcpStream, out: &mut BytesMut) -> std::io::Result<()> {
    if !out.is_empty() {
        to.write_all(out).await?;
        out.clear();
    }
    if out.capacity() > 4 * FLUSH_AT {
        *out = BytesMut::with_capacity(FLUSH_AT);
    }
    Ok(())
}

fn invalid(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

/// Says why a request is not forwarded, and closes.
async fn refuse(client: &mut TcpStream, why: &str) {
    let answer = format!(
        "HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{why}",
        why.len()
    );
    let _ = client.write_all(answer.as_bytes()).await;
    let _ = client.shutdown().await;
}

/// What is recorded of one exchange, for the test it belongs to.
struct Exchange {
    recorder: Option<Recorder>,
    started: Instant,
    http: Http,
    request_body: Kept,
    response_body: Kept,
}

impl Exchange {
    fn new(recorder: Option<Recorder>, request: &Head) -> Exchange {
        let wanted = recorder.is_some();
        let http = if wanted {
            Http {
                method: request.method.clone(),
                url: request.target.clone(),
                request_headers: request.header_pairs("proxy-authorization"),
                ..Http::default()
            }
        } else {
            Http::default()
        };
        Exchange {
            recorder,
            started: Instant::now(),
            http,
            request_body: Kept {
                wanted,
                ..Kept::default()
            },
            response_body: Kept {
                wanted,
                ..Kept::default()
            },
        }
    }

    fn answered(&mut self, answer: &Head) {
        if self.recorder.is_some() {
            self.http.status = Some(answer.code);
            self.http.response_headers = answer.header_pairs("");
        }
    }

    fn title(&self, outcome: &str) -> String {
        let url = &self.http.url;
        let path = url
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or(url);
        format!("{} {path} → {outcome}", self.http.method)
    }

    /// Records the exchange, answered (or cut short by the client).
    fn done(&mut self) {
        let Some(r) = self.recorder.take() else {
            return;
        };
        let mut http = std::mem::take(&mut self.http);
        http.request_body = self.request_body.text();
        http.response_body = self.response_body.text();
        let (outcome, ok) = match http.status {
            Some(code) => (code.to_string(), code < 400),
            None => ("no answer".to_owned(), false),
        };
        self.http = http;
        let title = self.title(&outcome);
        r.add(
            EntryKind::Http,
            self.started,
            self.started.elapsed(),
            title,
            ok,
            String::new(),
            Some(std::mem::take(&mut self.http)),
        );
    }

    /// Records a request the pod never answered, with why.
    fn no_answer(&mut self, why: &str) {
        let Some(r) = self.recorder.take() else {
            return;
        };
        let mut http = std::mem::take(&mut self.http);
        http.request_body = self.request_body.text();
        http.status = None;
        self.http = http;
        let title = self.title("no answer");
        r.add(
            EntryKind::Http,
            self.started,
            self.started.elapsed(),
            title,
            false,
            why.to_owned(),
            Some(std::mem::take(&mut self.http)),
        );
    }
}
