//! The heartbeat: every worker's `/api/health`, and taking back a worker
//! that answers again after being down (or for the first time).
//!
//! Bound: a worker is reported down once [`DOWN_AFTER`] (600 ms) passed
//! since its last successful heartbeat. A stopped, killed, frozen or
//! cut-off worker answers nothing from that moment, and its last answer
//! came at most then, so it is reported down, and its sandboxes `lost`,
//! within 600 ms (well within 1 s) of it stopping. The state is computed
//! from the time of the last success whenever it is read, so the bound
//! does not depend on when the next probe fails.

use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use tokio::time::MissedTickBehavior;

use super::forward::FORWARD_TIMEOUT;
use super::placement::{Worker, DOWN_AFTER};
use super::Gateway;
use crate::api::{Health, Sandbox, SandboxList};

/// How often each worker is probed.
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_millis(200);
/// How long one probe may take: longer than a loaded worker's answer, and
/// short enough that two failed probes fit in [`DOWN_AFTER`].
pub(crate) const HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(300);

/// Starts one heartbeat task per worker; they end with the runtime.
pub(crate) fn start(gw: &Arc<Gateway>) {
    for i in 0..gw.cluster.workers.len() {
        tokio::spawn(run(Arc::clone(gw), i));
    }
}

async fn run(gw: Arc<Gateway>, i: usize) {
    let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
    // A probe that times out takes longer than a period: the next one
    // follows it, instead of a burst making up for lost ticks.
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        beat(&gw, i).await;
    }
}

/// One probe of worker `i`, and what follows from it.
async fn beat(gw: &Gateway, i: usize) {
    let w = &gw.cluster.workers[i];
    let sent = std::time::Instant::now();
    match probe(w).await {
        Ok(health) => {
            if gw
                .cluster
                .heartbeat_ok(i, &health.name, health.uptime_ms, sent)
            {
                take_back(gw, i).await;
            }
        }
        Err((cause, refused)) => {
            // A refused connection is an answer: nothing listens there.
            let newly = if refused {
                gw.cluster.heartbeat_failed(i);
                gw.cluster.mark_down(i)
            } else {
                gw.cluster.heartbeat_failed(i)
            };
            if newly {
                eprintln!(
                    "sandboxd: gateway: worker {} ({}) is down: no heartbeat for {} at most; last: {cause}",
                    w.name,
                    w.url,
                    humantime::format_duration(DOWN_AFTER)
                );
            }
        }
    }
}

/// `GET /api/health`: 200 and `status: ok` within [`HEARTBEAT_TIMEOUT`].
/// Fails with the cause and whether the connection was refused.
async fn probe(w: &Worker) -> Result<Health, (String, bool)> {
    let failed = |e: reqwest::Error| (short(&e, HEARTBEAT_TIMEOUT), e.is_connect());
    let resp = w
        .client
        .get(format!("{}/api/health", w.url))
        .timeout(HEARTBEAT_TIMEOUT)
        .send()
        .await
        .map_err(failed)?;
    if !resp.status().is_success() {
        return Err((format!("/api/health answered {}", resp.status()), false));
    }
    let health: Health = resp.json().await.map_err(failed)?;
    if health.status != "ok" {
        return Err((format!("/api/health says {:?}", health.status), false));
    }
    Ok(health)
}

/// The innermost cause of `e` (reqwest repeats the URL at every level).
fn short(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("no answer within {}", humantime::format_duration(timeout));
    }
    let mut inner: &dyn std::error::Error = e;
    while let Some(s) = inner.source() {
        inner = s;
    }
    inner.to_string()
}

/// Re-reads worker `i`'s whole listing, then counts it live again.
async fn take_back(gw: &Gateway, i: usize) {
    let w = &gw.cluster.workers[i];
    let before = gw.cluster.seq();
    match list_all(w, gw.gate.store.token()).await {
        Ok(items) => {
            eprintln!(
                "sandboxd: gateway: worker {} ({}) is live: it holds {} sandbox(es)",
                w.name,
                w.url,
                items.len()
            );
            gw.cluster.taken_back(i, Some((before, items)));
        }
        Err(e) => {
            eprintln!(
                "sandboxd: gateway: worker {} ({}) answers its heartbeat but not its listing: {e}",
                w.name, w.url
            );
            gw.cluster.taken_back(i, None);
        }
    }
}

/// Why a worker's listing could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ListError {
    /// No answer, or not a listing: the request's error, told short.
    #[error("{0}")]
    Unanswered(String),
    #[error(
        "GET /api/sandboxes answered {0} (does the worker accept the gateway's token? use \
         --token-env on every node)"
    )]
    Refused(axum::http::StatusCode),
}

/// Every sandbox of worker `w`, page by page, with the gateway's token.
pub(crate) async fn list_all(w: &Worker, token: &str) -> Result<Vec<Sandbox>, ListError> {
    let mut items = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut req = w
            .client
            .get(format!("{}/api/sandboxes", w.url))
            .query(&[("limit", "1000")])
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .timeout(FORWARD_TIMEOUT);
        if let Some(p) = &page {
            req = req.query(&[("page_token", p)]);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ListError::Unanswered(short(&e, FORWARD_TIMEOUT)))?;
        if !resp.status().is_success() {
            return Err(ListError::Refused(resp.status()));
        }
        let list: SandboxList = resp
            .json()
            .await
            .map_err(|e| ListError::Unanswered(short(&e, FORWARD_TIMEOUT)))?;
        items.extend(list.items);
        match list.next_page_token {
            Some(next) => page = Some(next),
            None => return Ok(items),
        }
    }
}
