//! The browser phase: a test's own headless Chromium (Debian's package),
//! driven over the DevTools protocol, and the evidence it leaves.
//!
//! `cx.browser()` starts Chromium in a fresh profile (a temporary folder of
//! its own) and in a process group of its own, journals the group for the
//! test process's reaper, signs the page in the way the API client is (the
//! pod's session cookie, else its bearer token), and opens the pod's base
//! URL. When the test ends, whatever happened:
//!
//! 1. a failed test gets a screenshot of the moment (`failure.png`) and the
//!    page's console (`console.log`) in its artifacts folder;
//! 2. each browser is asked to close, and its whole process tree must be gone
//!    within the teardown cap (`TESTKIT_BROWSER_TEARDOWN`, 10 s); past it,
//!    the tree is killed and the test fails with `browser teardown timed
//!    out` (failure kind `browser_teardown`);
//! 3. a test that opened a browser and saved no screenshot fails
//!    (`no_screenshot`): no evidence, no pass.
//!
//! A traced test's trace also gets each navigation and action with a frame
//! of the page after it, the page's console and its requests (see
//! `film.rs`).
//!
//! A test process killed outright leaves its browsers to its reaper, which
//! ends every group still on record ([`crate::resource`]'s groups journal).
//!
//! Transport: Chromium's `--remote-debugging-pipe` (fds 3 and 4, NUL-framed
//! JSON), so there is no port to find and no websocket stack to compile.
//!
//! Compiled only with the `browser` feature.

mod cdp;
mod console;
mod film;
mod launch;
mod page;

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

/// How long SIGKILLed browser processes get to disappear.
const KILL_WAIT: Duration = Duration::from_secs(10);

/// How long the failure evidence (screenshot, console) may take per page.
const EVIDENCE_LIMIT: Duration = Duration::from_secs(10);

/// A browser a test opened, as its teardown needs it.
struct Open {
    index: u32,
    child: tokio::process::Child,
    pgid: i32,
    profile: PathBuf,
    /// `TESTKIT_BROWSER_TAG`'s value in every process of this browser.
    tag: String,
    conn: Arc<cdp::Connection>,
    /// `None` until the browser has a page.
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
        let setting = settings.chromium.clone();
        // Finding may mean installing, or waiting for another process to.
        let program = tokio::task::spawn_blocking(move || launch::chromium(setting.as_deref()))
            .await
            .map_err(anyhow::Error::msg)?
            .map_err(anyhow::Error::msg)?;
        let index = self.opened.fetch_add(1, Ordering::SeqCst) + 1;
        let profile = new_profile(index)?;
        let (log_path, log_file) = browser_log(artifacts_dir, index)?;
        // The profile's folder name is unique to this browser: its tag too.
        let tag = profile
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let started = launch::start(&program, &profile, &tag, log_file).map_err(|e| {
            let _ = std::fs::remove_dir_all(&profile);
            anyhow::anyhow!("failed to start {}: {e}", program.display())
        })?;
        self.journal_group(run, &started, &profile, &tag);
        self.log.push(format!(
            "browser {index}: {} (process group {})",
            program.display(),
            started.pgid
        ));
        let console = Arc::new(Mutex::new(Vec::new()));
        // Taken here, on the test's thread: the events arrive on the
        // DevTools reader's, which knows no test.
        let film = film::Film::current();
        let conn = Arc::new(cdp::Connection::new(
            started.to_browser,
            started.from_browser,
            self.console_sink(index, &console, film.clone()),
        ));
        // Registered before the page is set up: from here on the teardown
        // ends it, whatever fails below.
        lock(&self.open).push(Open {
            index,
            child: started.child,
            pgid: started.pgid,
            profile,
            tag,
            conn: conn.clone(),
            page: None,
        });
        let failed = |e: anyhow::Error| {
            anyhow::anyhow!(
                "failed to set up the browser: {e:#}; its output is in {}",
                log_path.display()
            )
        };
        let session = attach(&conn).await.map_err(failed)?;
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

    /// Journals the browser's process group for the reaper; failing to is
    /// only said in the test's log.
    fn journal_group(
        &self,
        run: &'static Run,
        started: &launch::Started,
        profile: &Path,
        tag: &str,
    ) {
        let what = format!("Chromium of {}", self.log_name());
        if let Err(e) = crate::tracker::own_group(
            run,
            &what,
            started.pgid,
            started.start_ticks,
            Some(profile),
            Some((launch::TAG_VAR, tag)),
        ) {
            self.log.push(format!(
                "could not journal the browser (group {}) for the reaper: {e}",
                started.pgid
            ));
        }
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

    fn log_name(&self) -> String {
        format!("test process {}", std::process::id())
    }

    /// Ends every browser of the test (after saving the failure evidence when
    /// `failed`), each under `cap`, and verifies its process tree gone.
    pub(crate) async fn finish(
        &self,
        run: &'static Run,
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
            // The page's last handle goes with the browser.
            drop(o.page.take());
            match end(&mut o, cap).await {
                Ok(()) => {
                    self.log
                        .push(format!("browser {}: ended and verified gone", o.index));
                    crate::engine::resource::groups::release_group(
                        crate::globals::journal(run).path(),
                        "Chromium",
                        o.pgid,
                    );
                    let _ = std::fs::remove_dir_all(&o.profile);
                }
                Err(End::TimedOut(why)) => {
                    self.log.push(format!("browser {}: {why}", o.index));
                    crate::engine::resource::groups::release_group(
                        crate::globals::journal(run).path(),
                        "Chromium",
                        o.pgid,
                    );
                    let _ = std::fs::remove_dir_all(&o.profile);
                    failures.push(why);
                }
                Err(End::Survived(why)) => {
                    // Left on record: the reaper tries again when this
                    // process ends.
                    self.log.push(format!("browser {}: {why}", o.index));
                    failures.push(why);
                }
            }
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

/// The file browser `index` writes its output to, in the test's artifacts
/// folder, created.
fn browser_log(artifacts_dir: &Path, index: u32) -> crate::Result<(PathBuf, std::fs::File)> {
    std::fs::create_dir_all(artifacts_dir)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", artifacts_dir.display()))?;
    let log_path = artifacts_dir.join(numbered("chromium", index, "log"));
    let log_file = std::fs::File::create(&log_path)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", log_path.display()))?;
    Ok((log_path, log_file))
}

/// `name.ext` for the first browser, `name-<n>.ext` for the others.
fn numbered(name: &str, index: u32, ext: &str) -> String {
    if index == 1 {
        format!("{name}.{ext}")
    } else {
        format!("{name}-{index}.{ext}")
    }
}

/// A fresh, private profile folder.
fn new_profile(index: u32) -> crate::Result<PathBuf> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "testkit-chromium-{}-{index}-{nanos:08x}",
        std::process::id()
    ));
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .recursive(true)
        .create(&dir)
        .map_err(|e| {
            anyhow::anyhow!("failed to create a browser profile {}: {e}", dir.display())
        })?;
    Ok(dir)
}

/// Opens a page in the browser; its DevTools session id.
async fn attach(conn: &cdp::Connection) -> crate::Result<String> {
    // The first call waits for the browser to start reading its pipe.
    let target = conn
        .call(
            None,
            "Target.createTarget",
            json!({ "url": "about:blank" }),
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

enum End {
    /// Killed after the cap; verified gone.
    TimedOut(String),
    /// Something outlived SIGKILL.
    Survived(String),
}

/// Closes one browser and verifies its process tree gone: the leader must
/// exit within `cap` of being asked to close, or the tree is killed and the
/// teardown timed out. What lingers after a clean exit (helpers shutting
/// down, the crash handler) is ended too, without counting as a timeout.
async fn end(o: &mut Open, cap: Duration) -> Result<(), End> {
    let deadline = tokio::time::Instant::now() + cap;
    // Taken first: a descendant orphaned by the leader's exit is still ours.
    let known = |tree: &mut Vec<(i32, u64)>| {
        for p in crate::engine::process::with_env(launch::TAG_VAR, &o.tag) {
            if !tree.iter().any(|t| t.0 == p.0) {
                tree.push(p);
            }
        }
    };
    let mut tree = crate::engine::process::tree_of(o.pgid);
    known(&mut tree);
    let _ =
        tokio::time::timeout_at(deadline, o.conn.call(None, "Browser.close", json!({}), cap)).await;
    let exited = tokio::time::timeout_at(deadline, o.child.wait())
        .await
        .is_ok();
    known(&mut tree);
    if exited {
        let linger = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .max(Duration::from_secs(1));
        if crate::engine::process::wait_drained(o.pgid, &tree, linger)
            .await
            .is_ok()
        {
            return Ok(());
        }
        return match crate::engine::process::kill_tree(o.pgid, &tree, KILL_WAIT).await {
            Ok(()) => Ok(()),
            Err(left) => Err(End::Survived(format!(
                "Chromium (process group {}) exited, but processes {left:?} of it survived SIGKILL",
                o.pgid
            ))),
        };
    }
    let processes = tree.len();
    let killed = crate::engine::process::kill_tree(o.pgid, &tree, KILL_WAIT).await;
    let _ = o.child.wait().await;
    let what = format!(
        "browser teardown timed out: Chromium (process group {}) was still running {} after it was asked to close",
        o.pgid,
        humantime::format_duration(cap)
    );
    match killed {
        Ok(()) => Err(End::TimedOut(format!(
            "{what}; killed its {processes} process(es), verified gone"
        ))),
        Err(left) => Err(End::Survived(format!(
            "{what}; processes {left:?} survived SIGKILL"
        ))),
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
