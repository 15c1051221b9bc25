//! What a UI test's trace gets from its browser, while the test is traced:
//! each navigation and action of a [`Page`](super::Page) as a step with its
//! film frame (a small JPEG of the page after it, `trace-frame-NNN.jpg` in
//! the artifacts folder), the page's console messages, and the page's own
//! requests from the DevTools `Network` events (the browser's requests do
//! not go through the pod's client, so these are not traced twice).
//!
//! A test that is not traced has no [`Film`]: no frame is captured and the
//! events are dropped as they were before, so tracing off costs nothing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::console::ConsoleEntry;
use crate::engine::trace::{cap, headers, Entry, EntryKind, Http, Recorder};

/// Requests waiting for their answer; past this many (a page that never
/// gets answers), new ones are not followed.
const MAX_PENDING: usize = 500;

/// One browser's link to its test's trace.
pub(super) struct Film {
    pub(super) recorder: Recorder,
    pending: Mutex<HashMap<String, Pending>>,
}

/// A request sent and not answered yet.
struct Pending {
    started: Instant,
    /// The browser's own clock (seconds), for the duration.
    stamp: Option<f64>,
    http: Http,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Film {
    /// The film of the running test, when it is traced.
    pub(super) fn current() -> Option<Arc<Film>> {
        crate::engine::trace::active::current().map(|recorder| {
            Arc::new(Film {
                recorder,
                pending: Mutex::new(HashMap::new()),
            })
        })
    }

    /// A browser step (`goto …`, `click …`) that began at `started` and
    /// took `took`, with its frame (or why there is none).
    pub(super) fn step(
        &self,
        title: String,
        started: Instant,
        took: Duration,
        failure: Option<String>,
        frame: Result<String, String>,
    ) {
        let mut detail = failure.clone().unwrap_or_default();
        let frame = match frame {
            Ok(name) => Some(name),
            Err(why) => {
                if !detail.is_empty() {
                    detail.push('\n');
                }
                detail.push_str(&why);
                None
            }
        };
        self.recorder.push(Entry {
            at_us: self.recorder.offset(started),
            duration_us: took.as_micros() as u64,
            kind: EntryKind::Browser,
            title,
            ok: failure.is_none(),
            detail: cap(&detail),
            http: None,
            frame,
        });
    }

    /// A console message of the page, as it arrives. Redacted when the
    /// trace is written, like every entry.
    pub(super) fn console(&self, entry: &ConsoleEntry) {
        let title = cap(&format!("console.{}: {}", entry.level, entry.text));
        let ok = entry.level != "error";
        self.recorder.add(
            EntryKind::Browser,
            Instant::now(),
            Duration::ZERO,
            title,
            ok,
            String::new(),
            None,
        );
    }

    /// A DevTools `Network` event: a request sent, answered or failed.
    pub(super) fn network(&self, method: &str, params: &Value) {
        let Some(id) = params.get("requestId").and_then(Value::as_str) else {
            return;
        };
        match method {
            "Network.requestWillBeSent" => {
                // A redirect reuses the id: the answer that redirected ends
                // the previous hop.
                if let Some(answer) = params.get("redirectResponse") {
                    self.answered(id, answer, params.get("timestamp"));
                }
                self.sent(id, params);
            }
            "Network.responseReceived" => {
                if let Some(answer) = params.get("response") {
                    self.answered(id, answer, params.get("timestamp"));
                }
            }
            "Network.loadingFailed" => self.failed(id, params),
            _ => {}
        }
    }

    fn sent(&self, id: &str, params: &Value) {
        let Some(request) = params.get("request") else {
            return;
        };
        let url = str_of(request.get("url"));
        // `data:` and `blob:` URLs are the page's own bytes, not requests.
        if !url.starts_with("http") {
            return;
        }
        let http = Http {
            method: str_of(request.get("method")),
            url: cap(&url),
            request_headers: json_headers(request.get("headers")),
            ..Http::default()
        };
        let mut pending = lock(&self.pending);
        if pending.len() < MAX_PENDING {
            pending.insert(
                id.to_owned(),
                Pending {
                    started: Instant::now(),
                    stamp: params.get("timestamp").and_then(Value::as_f64),
                    http,
                },
            );
        }
    }

    fn answered(&self, id: &str, answer: &Value, stamp: Option<&Value>) {
        let Some(mut p) = lock(&self.pending).remove(id) else {
            return;
        };
        let status = answer
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok());
        p.http.status = status;
        p.http.response_headers = json_headers(answer.get("headers"));
        let code = status.map_or("?".to_owned(), |s| s.to_string());
        let title = format!("{} {} → {code}", p.http.method, path_of(&p.http.url));
        let ok = status.is_some_and(|s| s < 400);
        let took = took(&p, stamp);
        self.recorder.add(
            EntryKind::Http,
            p.started,
            took,
            title,
            ok,
            String::new(),
            Some(p.http),
        );
    }

    fn failed(&self, id: &str, params: &Value) {
        let Some(p) = lock(&self.pending).remove(id) else {
            return;
        };
        let error = str_of(params.get("errorText"));
        let title = format!("{} {} → failed", p.http.method, path_of(&p.http.url));
        let took = took(&p, params.get("timestamp"));
        self.recorder.add(
            EntryKind::Http,
            p.started,
            took,
            title,
            false,
            cap(&error),
            Some(p.http),
        );
    }
}

/// How long a request took: by the browser's clock when both ends have a
/// stamp, else since its event arrived.
fn took(p: &Pending, stamp: Option<&Value>) -> Duration {
    match (p.stamp, stamp.and_then(Value::as_f64)) {
        (Some(a), Some(b)) if b >= a => Duration::from_secs_f64(b - a),
        _ => p.started.elapsed(),
    }
}

fn str_of(v: Option<&Value>) -> String {
    v.and_then(Value::as_str).unwrap_or("").to_owned()
}

/// DevTools headers (a JSON object), credentials blanked as the client's are.
fn json_headers(v: Option<&Value>) -> Vec<(String, String)> {
    let Some(map) = v.and_then(Value::as_object) else {
        return Vec::new();
    };
    headers(
        map.iter()
            .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v.as_bytes()))),
    )
}

fn path_of(url: &str) -> &str {
    url.split_once("://")
        .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
        .unwrap_or(url)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn film() -> Film {
        Film {
            recorder: Recorder::start("t"),
            pending: Mutex::new(HashMap::new()),
        }
    }

    #[test]
    fn network_events_become_http_entries_with_credentials_blanked() {
        let f = film();
        f.network(
            "Network.requestWillBeSent",
            &json!({"requestId": "1", "timestamp": 10.0, "request": {
                "url": "http://127.0.0.1:1/api/x", "method": "GET",
                "headers": {"Authorization": "Bearer tok-1", "Accept": "*/*"}}}),
        );
        f.network(
            "Network.responseReceived",
            &json!({"requestId": "1", "timestamp": 10.25, "response": {
                "status": 200, "headers": {"Set-Cookie": "s=abc", "Content-Type": "text/html"}}}),
        );
        f.network(
            "Network.requestWillBeSent",
            &json!({"requestId": "2", "request": {"url": "http://127.0.0.1:1/gone", "method": "GET", "headers": {}}}),
        );
        f.network(
            "Network.loadingFailed",
            &json!({"requestId": "2", "errorText": "net::ERR_CONNECTION_REFUSED"}),
        );
        f.network(
            "Network.requestWillBeSent",
            &json!({"requestId": "3", "request": {"url": "data:image/png;base64,AA", "method": "GET"}}),
        );
        let t = f.recorder.snapshot();
        assert_eq!(t.entries.len(), 2, "{t:#?}");
        let ok = &t.entries[0];
        assert_eq!(ok.title, "GET /api/x → 200");
        assert_eq!(ok.duration_us, 250_000);
        let h = ok.http.as_ref().unwrap();
        let text = format!("{h:?}");
        assert!(!text.contains("tok-1") && !text.contains("s=abc"), "{text}");
        assert_eq!(t.entries[1].title, "GET /gone → failed");
        assert!(!t.entries[1].ok);
        assert_eq!(t.entries[1].detail, "net::ERR_CONNECTION_REFUSED");
    }
}
