//! The browser phase: the run's headless Chromium (Debian's package),
//! shared by every UI test of the run, each test in a browser context of its
//! own (its own cookies, storage and cache), driven over the DevTools
//! protocol, and the evidence it leaves.
//!
//! `cx.browser()` finds the run's browser, or starts it (see `shared.rs`
//! for who starts and who ends it), opens a connection of the test's own to
//! it, creates a browser context and a page in it, signs the page in the way
//! the API client is (the pod's session cookie, else its bearer token), and
//! opens the pod's base URL. When the test ends, whatever happened:
//!
//! 1. a failed test gets a screenshot of the moment (`failure.png`) and the
//!    page's console (`console.log`) in its artifacts folder;
//! 2. each of its browser contexts is disposed (its pages with it) and
//!    verified gone from the browser within the teardown cap
//!    (`TESTKIT_BROWSER_TEARDOWN`, 10 s); past it, the test fails with
//!    `browser teardown timed out` (failure kind `browser_teardown`). A
//!    test closes its own contexts and nothing else: the browser is the
//!    run's;
//! 3. a test that opened a browser and saved no screenshot fails
//!    (`no_screenshot`): no evidence, no pass.
//!
//! A traced test's trace also gets each navigation and action with a frame
//! of the page after it, the page's console and its requests (see
//! `film.rs`).
//!
//! A test process killed outright loses its connection: the browser
//! disposes of the contexts it made (`disposeOnDetach`).
//!
//! Transport: the browser's DevTools WebSocket on loopback (`ws.rs`), so
//! that test processes other than the one that started it can use it.
//!
//! Compiled only with the `browser` feature.

mod cdp;
mod console;
mod film;
mod launch;
mod page;
mod shared;
mod ws;

pub(crate) use shared::finish_process;

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

pub use console::ConsoleEntry;
pub use launch::INSTALL_HINT;
pub use page::Page;

use crate::engine::pod::Pod;
use crate::engine::report::{FailureKind, Outcome, TestRecord};
use crate::engine::run::Run;
use crate::engine::settings::var;
use crate::log::Log;

/// How long the failure evidence (screenshot, console) may take per page.
const EVIDENCE_LIMIT: Duration = Duration::from_secs(10);

/// A browser context a test opened, as its teardown needs it.
struct Open {
    index: u32,
    /// The run's browser it lives in.
    browser: crate::engine::browser::Record,
    conn: Arc<cdp::Connection>,
    /// `None` until the browser made it.
    context: Option<String>,
    /// `None` until the context has a page.
    page: Option<Page>,
}

/// The browsers of one test, and their evidence.
pub(crate) struct Browsers {
    log: Log,
    open: Mutex<Vec<Open>>,
    screenshots: Arc<Mutex<Vec<PathBuf>>>,
    opened: AtomicU32,
}

/// What a test's browsers left for its record.
#[derive(Debug, Default)]
pub(crate) struct BrowserSummary {
    pub(crate) opened: u32,
    pub(crate) screenshots: Vec<PathBuf>,
    /// Why the teardown failed, when it did: `browser teardown timed out…`.
    pub(crate) teardown_failure: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The skip of a test that opens a browser while the phase is turned off.
pub(crate) fn check_enabled() -> crate::Result {
    let settings = crate::globals::settings().map_err(crate::globals::Shared)?;
    if settings.browser_off {
        return Err(crate::Skip::new(format!(
            "browser tests are turned off ({}=off)",
            var::BROWSER
        ))
        .into());
    }
    Ok(())
}

impl Browsers {
    pub(crate) fn new(log: Log) -> Browsers {
        Browsers {
            log,
            open: Mutex::new(Vec::new()),
            screenshots: Arc::new(Mutex::new(Vec::new())),
            opened: AtomicU32::new(0),
        }
    }

    /// Starts a browser for the test and opens the pod's base URL in it,
    /// signed in when `signed_in`.
    pub(crate) async fn open(
        &self,
        run: &'static Run,
        pod: &Pod,
        artifacts_dir: &Path,
        signed_in: bool,
    ) -> crate::Result<Page> {
        let settings = crate::globals::settings().map_err(crate::globals::Shared)?;
        let (setting, install) = (settings.chromium.clone(), settings.install);
        // Finding may mean installing, or waiting for another process to.
        let program =
            tokio::task::spawn_blocking(move || launch::chromium(setting.as_deref(), install))
                .await
                .map_err(anyhow::Error::msg)?
                .map_err(anyhow::Error::msg)?;
        let index = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
        let console = Arc::new(Mutex::new(Vec::new()));
        // Taken here, on the test's thread: the events arrive on the
        // DevTools reader's, which knows no test.
        let film = film::Film::current();
        let connect = |found: &shared::Found| {
            cdp::Connection::connect(
                &found.record.ws_url,
                self.console_sink(index, &console, film.clone()),
            )
            .map_err(|e| {
                anyhow::anyhow!(
                    "failed to connect to the run's browser {} at {}: {e}; its output is in {}",
                    found.record.number,
                    found.record.ws_url,
                    found.log.display()
                )
            })
        };
        let mut found = shared::acquire(run, &program, None).await?;
        let conn = match connect(&found) {
            Ok(conn) => conn,
            // One found running may be dying (a crash a moment ago): the
            // test gets a browser started again, as after any crash.
            Err(e) if !found.started => {
                self.log
                    .push(format!("browser {index}: {e:#}: starting another"));
                found = shared::acquire(run, &program, Some(&found.record)).await?;
                connect(&found)?
            }
            Err(e) => return Err(e),
        };
        let conn = Arc::new(conn);
        let log_path = found.log.clone();
        self.log.push(format!(
            "browser {index}: {} the run's Chromium {} (pid {}), output in {}",
            if found.started { "started" } else { "shares" },
            found.record.number,
            found.record.pid,
            log_path.display()
        ));
        // Registered before the context is made: from here on the
        // teardown closes what was made, whatever fails below.
        lock(&self.open).push(Open {
            index,
            browser: found.record,
            conn: conn.clone(),
            context: None,
            page: None,
        });
        let failed = |e: anyhow::Error| {
            anyhow::anyhow!(
                "failed to set up the browser: {e:#}; its output is in {}",
                log_path.display()
            )
        };
        let context = new_context(&conn).await.map_err(failed)?;
        if let Some(o) = lock(&self.open).iter_mut().find(|o| o.index == index) {
            o.context = Some(context.clone());
        }
        let session = attach(&conn, &context).await.map_err(failed)?;
        let page = Page {
            shared: Arc::new(page::Shared {
                conn,
                session,
                base_url: pod.base_url().to_owned(),
                artifacts_dir: artifacts_dir.to_owned(),
                console,
                screenshots: self.screenshots.clone(),
                log: self.log.clone(),
                film,
            }),
        };
        if let Some(o) = lock(&self.open).iter_mut().find(|o| o.index == index) {
            o.page = Some(page.clone());
        }
        prepare(&page, pod, signed_in).await.map_err(failed)?;
        Ok(page)
    }

    /// What the DevTools connection of browser `index` does with its events:
    /// console entries go to `console`, errors to the test's log too, and
    /// console and network events to the test's trace when it is traced.
    fn console_sink(
        &self,
        index: u32,
        console: &Arc<Mutex<Vec<ConsoleEntry>>>,
        film: Option<Arc<film::Film>>,
    ) -> cdp::EventSink {
        let sink_console = console.clone();
        let sink_log = self.log.clone();
        Box::new(move |method: &str, params: &Value| {
            if let Some(entry) = console::console_entry(method, params) {
                if entry.level == "error" {
                    sink_log.push(format!("browser {index} console {entry}"));
                }
                if let Some(film) = &film {
                    film.console(&entry);
                }
                lock(&sink_console).push(entry);
            } else if let Some(film) = &film {
                film.network(method, params);
            }
        })
    }

    /// Closes every browser context of the test (after saving the failure
    /// evidence when `failed`), each under `cap`, and verifies it gone
    /// from the browser. The browser itself is the run's: left running.
    pub(crate) async fn finish(
        &self,
        _run: &'static Run,
        failed: bool,
        cap: Duration,
    ) -> BrowserSummary {
        let open: Vec<Open> = std::mem::take(&mut *lock(&self.open));
        let mut failures = Vec::new();
        for mut o in open {
            if failed {
                if let Some(page) = &o.page {
                    self.evidence(page, o.index).await;
                }
            }
            // The page's last handle goes with its context.
            drop(o.page.take());
            match close(&o, cap).await {
                Ok(how) => self.log.push(format!("browser {}: {how}", o.index)),
                Err(why) => {
                    self.log.push(format!("browser {}: {why}", o.index));
                    failures.push(why);
                }
            }
            o.conn.close();
        }
        BrowserSummary {
            opened: self.opened.load(Ordering::SeqCst),
            screenshots: lock(&self.screenshots).clone(),
            teardown_failure: (!failures.is_empty()).then(|| failures.join("; ")),
        }
    }

    /// A failed test's evidence: a screenshot of the moment and the console.
    async fn evidence(&self, page: &Page, index: u32) {
        let name = if index == 1 {
            "failure".to_owned()
        } else {
            format!("failure-{index}")
        };
        match tokio::time::timeout(EVIDENCE_LIMIT, page.screenshot(&name)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => self
                .log
                .push(format!("browser {index}: no failure screenshot: {e:#}")),
            Err(_) => self
                .log
                .push(format!("browser {index}: the failure screenshot timed out")),
        }
        let console: String = page.console().iter().map(|e| format!("{e}\n")).collect();
        let file = numbered("console", index, "log");
        match page::save(&page.shared.artifacts_dir, &file, console.as_bytes()) {
            Ok(path) => self.log.push(format!(
                "browser {index}: console saved: {}",
                path.display()
            )),
            Err(e) => self.log.push(format!("browser {index}: {e:#}")),
        }
    }
}

/// `name.ext` for the first browser, `name-<n>.ext` for the others.
fn numbered(name: &str, index: u32, ext: &str) -> String {
    if index == 1 {
        format!("{name}.{ext}")
    } else {
        format!("{name}-{index}.{ext}")
    }
}

/// A browser context of the test's own: its cookies, storage and cache.
/// Disposed by the browser should the test's connection end without the
/// teardown (a killed test process).
async fn new_context(conn: &cdp::Connection) -> crate::Result<String> {
    let made = conn
        .call(
            None,
            "Target.createBrowserContext",
            json!({ "disposeOnDetach": true }),
            page::CALL_LIMIT,
        )
        .await?;
    made.get("browserContextId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the browser made a context without an id"))
}

/// Opens a page in the browser context `context`; its DevTools session id.
async fn attach(conn: &cdp::Connection, context: &str) -> crate::Result<String> {
    let target = conn
        .call(
            None,
            "Target.createTarget",
            json!({ "url": "about:blank", "browserContextId": context }),
            page::CALL_LIMIT,
        )
        .await?;
    let target_id = target
        .get("targetId")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("the browser opened a page without a target id"))?;
    let attached = conn
        .call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": target_id, "flatten": true }),
            page::CALL_LIMIT,
        )
        .await?;
    attached
        .get("sessionId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the browser attached to the page without a session"))
}

/// Turns on the events the page reports, signs it in, loads the pod's base URL.
async fn prepare(page: &Page, pod: &Pod, signed_in: bool) -> crate::Result {
    for domain in [
        "Page.enable",
        "Runtime.enable",
        "Log.enable",
        "Network.enable",
    ] {
        page.call(domain, json!({})).await?;
    }
    if signed_in {
        sign_in(page, pod).await?;
    }
    page.goto("/").await
}

/// Gives the page the API client's credential, as the suite's `[auth]`
/// sends it: session cookies as cookies of the pod's origin, any other
/// header on every request.
async fn sign_in(page: &Page, pod: &Pod) -> crate::Result {
    let call = |method: &'static str, params: Value| page.call(method, params);
    let mut extra = serde_json::Map::new();
    for (name, value) in pod.credential_headers() {
        if name.eq_ignore_ascii_case("cookie") {
            for pair in value.split(';') {
                let Some((name, value)) = pair.trim().split_once('=') else {
                    continue;
                };
                call(
                    "Network.setCookie",
                    json!({ "name": name, "value": value, "url": pod.base_url(), "httpOnly": true }),
                )
                .await?;
            }
        } else {
            extra.insert(name, Value::from(value));
        }
    }
    if !extra.is_empty() {
        call("Network.setExtraHTTPHeaders", json!({ "headers": extra })).await?;
    }
    Ok(())
}

/// Disposes of the test's browser context (its pages with it) within
/// `cap` and verifies the browser no longer has it; what happened, or why
/// the teardown failed. A browser that is gone took the context with it.
async fn close(o: &Open, cap: Duration) -> Result<String, String> {
    let Some(context) = &o.context else {
        return Ok("no context was made".to_owned());
    };
    let gone = |what: &str| {
        format!(
            "{what}: the run's browser {} (pid {}) is gone, and the context with it",
            o.browser.number, o.browser.pid
        )
    };
    if o.conn.is_closed() || !o.browser.is_running() {
        return Ok(gone("not closed"));
    }
    let deadline = tokio::time::Instant::now() + cap;
    let disposed = tokio::time::timeout_at(
        deadline,
        o.conn.call(
            None,
            "Target.disposeBrowserContext",
            json!({ "browserContextId": context }),
            cap,
        ),
    )
    .await;
    let listed = tokio::time::timeout_at(
        deadline,
        o.conn
            .call(None, "Target.getBrowserContexts", json!({}), cap),
    )
    .await;
    match (disposed, listed) {
        (Ok(Ok(_)), Ok(Ok(list))) => {
            let still = list
                .get("browserContextIds")
                .and_then(Value::as_array)
                .is_some_and(|ids| ids.iter().any(|id| id.as_str() == Some(context)));
            if still {
                Err(format!(
                    "browser teardown failed: the browser still lists context {context} after disposing of it"
                ))
            } else {
                Ok(format!("context {context} ended and verified gone"))
            }
        }
        _ if !o.browser.is_running() => Ok(gone("closing")),
        (Err(_), _) | (_, Err(_)) => Err(format!(
            "browser teardown timed out: the test's browser context was not closed and verified gone within {}",
            humantime::format_duration(cap)
        )),
        (Ok(Err(e)), _) | (_, Ok(Err(e))) => Err(format!(
            "browser teardown failed: the context was not closed: {e:#}"
        )),
    }
}

/// Puts the browsers' evidence in the record, and fails a test whose
/// browser teardown timed out, or that opened a browser and saved no
/// screenshot. A cleanup failure stays the failure kind; the browser's
/// problem is added to its message.
pub(crate) fn judge(summary: &BrowserSummary, record: &mut TestRecord) {
    record.browsers = summary.opened;
    record.screenshots = summary
        .screenshots
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    record.browser_teardown_timed_out = summary.teardown_failure.is_some();
    let problem = match &summary.teardown_failure {
        Some(why) => Some((FailureKind::BrowserTeardown, why.clone())),
        None if summary.opened > 0
            && summary.screenshots.is_empty()
            && record.outcome == Outcome::Passed =>
        {
            Some((
                FailureKind::NoScreenshot,
                format!(
                    "the test opened {} browser(s) and saved no screenshot: a browser test must \
                     leave evidence; call `page.screenshot(\"name\")` where the page shows what it proves",
                    summary.opened
                ),
            ))
        }
        None => None,
    };
    let Some((kind, message)) = problem else {
        return;
    };
    let message = crate::redact(&message).into_owned();
    if record.failure_kind == Some(FailureKind::Cleanup) {
        let body = record.message.take().unwrap_or_default();
        record.message = Some(format!("{body}\n\nalso: {message}"));
        return;
    }
    let message = match record.message.take() {
        Some(body) if record.outcome != Outcome::Passed => {
            format!("{message}\n\nthe test body also failed: {body}")
        }
        _ => message,
    };
    record.fail(kind, message);
}
