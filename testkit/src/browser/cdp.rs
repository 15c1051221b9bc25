//! The Chrome DevTools protocol over the browser's WebSocket (see `ws.rs`):
//! one JSON message per text message. Each test has a connection of its
//! own to the run's browser, so the events it gets are those of its own
//! pages; the end of the connection is the browser gone (or the test's
//! teardown closing it).
//!
//! A reader thread answers each pending call and hands events to a sink; a
//! writer thread sends frames, so that a browser that stops reading makes
//! calls time out instead of blocking the test's thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::oneshot;

use super::ws;

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
    frames: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
    next_id: AtomicU64,
    state: Arc<Mutex<State>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Connection {
    /// Connects to the browser's DevTools WebSocket at `url`.
    pub(super) fn connect(url: &str, events: EventSink) -> std::io::Result<Connection> {
        let (mut sender, mut receiver) = ws::connect(url)?;
        let state = Arc::new(Mutex::new(State::default()));
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        std::thread::Builder::new()
            .name("testkit-cdp-write".into())
            .spawn(move || {
                for message in rx {
                    if sender.send(&message).is_err() {
                        break;
                    }
                }
                // Every sender dropped: the connection's end.
                sender.close();
            })?;
        let reader_state = state.clone();
        std::thread::Builder::new()
            .name("testkit-cdp-read".into())
            .spawn(move || {
                while let Some(message) = receiver.next() {
                    if let Ok(message) = serde_json::from_slice::<Value>(&message) {
                        dispatch(message, &reader_state, &events);
                    }
                }
                let mut state = lock(&reader_state);
                state.closed = true;
                // Dropping the senders fails every pending call at once.
                state.pending.clear();
            })?;
        Ok(Connection {
            frames: Mutex::new(Some(tx)),
            next_id: AtomicU64::new(1),
            state,
        })
    }

    /// Closes the connection: calls after it fail, the browser lives on.
    pub(super) fn close(&self) {
        lock(&self.frames).take();
    }

    /// Whether the connection has ended (the browser closed it or is gone).
    pub(super) fn is_closed(&self) -> bool {
        lock(&self.state).closed
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
                anyhow::bail!("failed to send {method}: the browser has closed its DevTools connection (it exited or crashed)");
            }
            state.pending.insert(id, tx);
        }
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = Value::from(session);
        }
        let frame = serde_json::to_vec(&message)?;
        let sent = lock(&self.frames)
            .as_ref()
            .is_some_and(|tx| tx.send(frame).is_ok());
        if !sent {
            lock(&self.state).pending.remove(&id);
            anyhow::bail!("failed to send {method}: the DevTools connection is closed");
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
                "the browser closed its DevTools connection before answering {method} (it exited or crashed)"
            ),
            Ok(Ok(Err(message))) => anyhow::bail!("the browser refused {method}: {message}"),
            Ok(Ok(Ok(value))) => Ok(value),
        }
    }
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
