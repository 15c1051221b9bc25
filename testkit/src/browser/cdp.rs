//! The Chrome DevTools protocol over a pipe (`--remote-debugging-pipe`):
//! Chromium reads commands from its fd 3 and writes answers and events to its
//! fd 4, one JSON message per NUL-terminated frame. No port, no websocket:
//! nothing to discover or race for, and end of file on fd 4 is the browser
//! gone.
//!
//! A reader thread answers each pending call and hands events to a sink; a
//! writer thread sends frames, so that a browser that stops reading makes
//! calls time out instead of blocking the test's thread.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;

/// What receives the browser's events: the method and its params.
pub(super) type EventSink = Box<dyn Fn(&str, &Value) + Send + Sync>;

type Answer = Result<Value, String>;

#[derive(Default)]
struct State {
    pending: HashMap<u64, oneshot::Sender<Answer>>,
    /// Set once the pipe is closed; no call is accepted after.
    closed: bool,
}

/// One browser's DevTools connection.
pub(super) struct Connection {
    frames: Mutex<mpsc::Sender<Vec<u8>>>,
    next_id: AtomicU64,
    state: Arc<Mutex<State>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Talks to a browser through `to_browser` (its fd 3) and `from_browser`
    /// (its fd 4).
    pub(super) fn new(to_browser: File, from_browser: File, events: EventSink) -> Connection {
        let state = Arc::new(Mutex::new(State::default()));
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let mut writer = to_browser;
        std::thread::Builder::new()
            .name("testkit-cdp-write".into())
            .spawn(move || {
                for frame in rx {
                    if writer.write_all(&frame).is_err() {
                        break;
                    }
                }
            })
            .expect("failed to start a thread");
        let reader_state = state.clone();
        std::thread::Builder::new()
            .name("testkit-cdp-read".into())
            .spawn(move || read_loop(from_browser, &reader_state, &events))
            .expect("failed to start a thread");
        Connection {
            frames: Mutex::new(tx),
            next_id: AtomicU64::new(1),
            state,
        }
    }

    /// Sends `method` with `params` (to the page `session`, or to the browser
    /// itself) and waits up to `limit` for the answer.
    pub(super) async fn call(
        &self,
        session: Option<&str>,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> anyhow::Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut state = lock(&self.state);
            if state.closed {
                anyhow::bail!("failed to send {method}: the browser has closed its DevTools pipe (it exited or crashed)");
            }
            state.pending.insert(id, tx);
        }
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        let mut frame = serde_json::to_vec(&message)?;
        frame.push(0);
        if lock(&self.frames).send(frame).is_err() {
            lock(&self.state).pending.remove(&id);
            anyhow::bail!("failed to send {method}: the DevTools pipe is closed");
        }
        match tokio::time::timeout(limit, rx).await {
            Err(_) => {
                lock(&self.state).pending.remove(&id);
                anyhow::bail!(
                    "the browser did not answer {method} within {}",
                    humantime::format_duration(limit)
                )
            }
            Ok(Err(_)) => anyhow::bail!(
                "the browser closed its DevTools pipe before answering {method} (it exited or crashed)"
            ),
            Ok(Ok(Err(message))) => anyhow::bail!("the browser refused {method}: {message}"),
            Ok(Ok(Ok(value))) => Ok(value),
        }
    }
}

fn read_loop(mut from_browser: File, state: &Mutex<State>, events: &EventSink) {
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut scanned = 0;
    loop {
        match from_browser.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        // Frames end with NUL; a screenshot's frame spans many reads, so only
        // the new bytes are searched.
        while let Some(end) = buf[scanned..].iter().position(|&b| b == 0) {
            let end = scanned + end;
            if let Ok(message) = serde_json::from_slice::<Value>(&buf[..end]) {
                dispatch(message, state, events);
            }
            buf.drain(..=end);
            scanned = 0;
        }
        scanned = buf.len();
    }
    let mut state = lock(state);
    state.closed = true;
    // Dropping the senders fails every pending call at once.
    state.pending.clear();
}

fn dispatch(message: Value, state: &Mutex<State>, events: &EventSink) {
    if let Some(id) = message.get("id").and_then(Value::as_u64) {
        let Some(tx) = lock(state).pending.remove(&id) else {
            return;
        };
        let answer = match message.get("error") {
            Some(error) => Err(error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string())),
            None => Ok(message.get("result").cloned().unwrap_or(Value::Null)),
        };
        let _ = tx.send(answer);
    } else if let Some(method) = message.get("method").and_then(Value::as_str) {
        events(method, message.get("params").unwrap_or(&Value::Null));
    }
}
