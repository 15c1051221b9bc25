//! [`Page`]: one tab of a test's browser, and what a test does with it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use super::cdp::Connection;
use super::console::ConsoleEntry;
use super::film::Film;
use crate::log::Log;

/// How long one DevTools call may take.
pub(super) const CALL_LIMIT: Duration = Duration::from_secs(30);

/// How long a film frame may take: a trace's frame is not worth holding
/// a test up for.
const FRAME_LIMIT: Duration = Duration::from_secs(5);

/// A film frame's width at most, in pixels: enough to see what the page
/// showed, small enough for many in one report.
const FRAME_WIDTH: f64 = 480.0;

/// How long [`Page::goto`] and [`Page::wait_for`] wait, unless told.
const WAIT_LIMIT: Duration = Duration::from_secs(15);

pub(super) struct Shared {
    pub(super) conn: Arc<Connection>,
    pub(super) session: String,
    pub(super) base_url: String,
    pub(super) artifacts_dir: PathBuf,
    pub(super) console: Arc<Mutex<Vec<ConsoleEntry>>>,
    pub(super) screenshots: Arc<Mutex<Vec<PathBuf>>>,
    pub(super) log: Log,
    /// The test's trace, when it is traced.
    pub(super) film: Option<Arc<Film>>,
}

/// A page in a test's own headless Chromium: authenticated against the pod
/// like the API client, opened at its base URL. Cheap to clone; the harness
/// ends the browser when the test ends, whatever happened.
///
/// ```no_run
/// # async fn f(cx: &testkit::Cx) -> testkit::Result {
/// let page = cx.browser().await?;
/// page.wait_for("the sandbox list", "document.querySelector('#sandbox-list') !== null").await?;
/// page.screenshot("list").await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Page {
    pub(super) shared: Arc<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A selector as a JavaScript string literal.
fn js_string(s: &str) -> String {
    Value::from(s).to_string()
}

impl Page {
    pub(super) async fn call(&self, method: &str, params: Value) -> crate::Result<Value> {
        self.shared
            .conn
            .call(Some(&self.shared.session), method, params, CALL_LIMIT)
            .await
    }

    /// The pod's base URL followed by `path`.
    pub fn url_of(&self, path: &str) -> String {
        format!("{}{path}", self.shared.base_url)
    }

    /// Opens `path` of the pod (or an absolute URL) and waits until the page
    /// has loaded.
    pub async fn goto(&self, path: &str) -> crate::Result {
        let url = if path.contains("://") {
            path.to_owned()
        } else {
            self.url_of(path)
        };
        let started = Instant::now();
        let result = self.navigate(&url).await;
        self.traced(|| format!("goto {url}"), started, result).await
    }

    async fn navigate(&self, url: &str) -> crate::Result {
        let answer = self.call("Page.navigate", json!({ "url": url })).await?;
        if let Some(error) = answer.get("errorText").and_then(Value::as_str) {
            anyhow::bail!("failed to open {url}: {error}");
        }
        self.wait_for(
            &format!("{url} to load"),
            "document.readyState === 'complete'",
        )
        .await?;
        Ok(())
    }

    /// Reloads the page and waits until it has loaded.
    pub async fn reload(&self) -> crate::Result {
        let started = Instant::now();
        let result = async {
            self.call("Page.reload", json!({})).await?;
            self.wait_for("the page to reload", "document.readyState === 'complete'")
                .await?;
            Ok(())
        }
        .await;
        self.traced(|| "reload".to_owned(), started, result).await
    }

    /// `result` of the step `title` that began at `started`, recorded in
    /// the test's trace with a frame of the page after it, when the test is
    /// traced.
    async fn traced(
        &self,
        title: impl FnOnce() -> String,
        started: Instant,
        result: crate::Result,
    ) -> crate::Result {
        let Some(film) = &self.shared.film else {
            return result;
        };
        let took = started.elapsed();
        let frame = match film.recorder.next_frame() {
            Some(n) => self.frame(n).await,
            None => Err(format!(
                "no frame: the test's {} frames are taken",
                crate::engine::trace::MAX_FRAMES
            )),
        };
        let failure = result.as_ref().err().map(|e| format!("{e:#}"));
        film.step(title(), started, took, failure, frame);
        result
    }

    /// Captures film frame `n`: the viewport as a small JPEG, saved in the
    /// artifacts folder; its file name, or why there is none.
    async fn frame(&self, n: u32) -> Result<String, String> {
        let call = |method: &'static str, params: Value| {
            self.shared
                .conn
                .call(Some(&self.shared.session), method, params, FRAME_LIMIT)
        };
        let no = |e: anyhow::Error| format!("no frame: {e:#}");
        let metrics = call("Page.getLayoutMetrics", json!({})).await.map_err(no)?;
        let view = |k: &str| {
            metrics
                .pointer(&format!("/cssVisualViewport/{k}"))
                .and_then(Value::as_f64)
                .unwrap_or(0.0)
        };
        let (width, height) = (view("clientWidth").max(1.0), view("clientHeight").max(1.0));
        // The clip's scale shrinks the image as the browser encodes it:
        // nothing is sent that is then thrown away.
        let clip = json!({ "x": view("pageX"), "y": view("pageY"), "width": width,
            "height": height, "scale": (FRAME_WIDTH / width).min(1.0) });
        let answer = call(
            "Page.captureScreenshot",
            json!({ "format": "jpeg", "quality": 40, "clip": clip }),
        )
        .await
        .map_err(no)?;
        use base64::Engine as _;
        let jpeg = answer
            .get("data")
            .and_then(Value::as_str)
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
            .ok_or("no frame: the browser sent no image")?;
        let name = crate::engine::trace::frame_name(n);
        save(&self.shared.artifacts_dir, &name, &jpeg).map_err(no)?;
        Ok(name)
    }

    /// Evaluates `expression` in the page (awaiting it when it is a promise)
    /// and returns its value as JSON.
    pub async fn eval_value(&self, expression: &str) -> crate::Result<Value> {
        let answer = self
            .call(
                "Runtime.evaluate",
                json!({
                    "expression": expression,
                    "awaitPromise": true,
                    "returnByValue": true,
                    "userGesture": true,
                }),
            )
            .await?;
        if let Some(details) = answer.get("exceptionDetails") {
            let why = details
                .pointer("/exception/description")
                .and_then(Value::as_str)
                .or_else(|| details.get("text").and_then(Value::as_str))
                .unwrap_or("an exception");
            anyhow::bail!("the page threw evaluating `{expression}`: {why}");
        }
        Ok(answer
            .pointer("/result/value")
            .cloned()
            .unwrap_or(Value::Null))
    }

    /// [`eval_value`](Self::eval_value), deserialized into `T`.
    pub async fn eval<T: DeserializeOwned>(&self, expression: &str) -> crate::Result<T> {
        let value = self.eval_value(expression).await?;
        serde_json::from_value(value.clone()).map_err(|e| {
            anyhow::anyhow!("`{expression}` gave {value}, which is not what was expected: {e}")
        })
    }

    /// Polls `expression` until it is truthy (up to 15 s); returns its last
    /// value. The error names `what` and the last value seen.
    pub async fn wait_for(&self, what: &str, expression: &str) -> crate::Result<Value> {
        self.wait_for_within(what, expression, WAIT_LIMIT).await
    }

    /// [`wait_for`](Self::wait_for) with a limit of its own.
    pub async fn wait_for_within(
        &self,
        what: &str,
        expression: &str,
        limit: Duration,
    ) -> crate::Result<Value> {
        let start = Instant::now();
        loop {
            let last = match self.eval_value(expression).await {
                Ok(v) if truthy(&v) => return Ok(v),
                Ok(v) => v.to_string(),
                // A navigation in progress destroys the context: look again.
                Err(e) => format!("{e:#}"),
            };
            if start.elapsed() >= limit {
                anyhow::bail!(
                    "timed out after {} waiting for {what} (`{expression}`); last saw: {last}",
                    humantime::format_duration(limit)
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Whether an element matches the CSS `selector`.
    pub async fn exists(&self, selector: &str) -> crate::Result<bool> {
        self.eval(&format!(
            "document.querySelector({}) !== null",
            js_string(selector)
        ))
        .await
    }

    /// The trimmed text of the first element matching `selector`.
    pub async fn text(&self, selector: &str) -> crate::Result<String> {
        let value = self
            .eval_value(&format!(
                "(() => {{ const e = document.querySelector({}); return e ? e.textContent.trim() : null; }})()",
                js_string(selector)
            ))
            .await?;
        match value {
            Value::String(s) => Ok(s),
            _ => anyhow::bail!(
                "no element matches `{selector}` on {}",
                self.location().await
            ),
        }
    }

    /// Clicks the first element matching `selector`.
    pub async fn click(&self, selector: &str) -> crate::Result {
        let started = Instant::now();
        let result = self.on_element(selector, "e.click()").await;
        self.traced(|| format!("click {selector}"), started, result)
            .await
    }

    /// Types `text` into the input matching `selector`, replacing its value,
    /// as a user would (input and change events fire).
    pub async fn fill(&self, selector: &str, text: &str) -> crate::Result {
        let started = Instant::now();
        let result = self
            .on_element(
                selector,
                &format!(
                    "e.focus(); e.value = {}; e.dispatchEvent(new Event('input', {{ bubbles: true }})); \
                     e.dispatchEvent(new Event('change', {{ bubbles: true }}))",
                    js_string(text)
                ),
            )
            .await;
        // The text may be a password: only its length is traced.
        let title = || format!("fill {selector} ({} characters)", text.chars().count());
        self.traced(title, started, result).await
    }

    async fn on_element(&self, selector: &str, action: &str) -> crate::Result {
        let found: bool = self
            .eval(&format!(
                "(() => {{ const e = document.querySelector({}); if (!e) return false; {action}; return true; }})()",
                js_string(selector)
            ))
            .await?;
        if !found {
            anyhow::bail!(
                "no element matches `{selector}` on {}",
                self.location().await
            );
        }
        Ok(())
    }

    /// The page's current URL.
    pub async fn location(&self) -> String {
        self.eval::<String>("location.href")
            .await
            .unwrap_or_else(|e| format!("(unknown: {e:#})"))
    }

    /// Saves a PNG of the page as `<name>.png` in the test's artifacts
    /// folder, lists it in the test's record and JUnit, and returns its
    /// path. `name` is letters, digits, `-`, `_` and `.`.
    pub async fn screenshot(&self, name: &str) -> crate::Result<PathBuf> {
        let valid = !name.is_empty()
            && name.len() <= 100
            && !name.starts_with('.')
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            anyhow::bail!(
                "invalid screenshot name {name:?}: use letters, digits, `-`, `_` and `.` (at most 100, not starting with `.`)"
            );
        }
        // The whole page, beyond the viewport; a page whose layout has no
        // width yet (a bare error answer) cannot be taken that way, and is
        // taken as the viewport shows it.
        let answer = match self
            .call(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await
        {
            Ok(answer) => answer,
            Err(e) if format!("{e:#}").contains("0 width") => {
                self.call(
                    "Page.captureScreenshot",
                    json!({ "format": "png", "captureBeyondViewport": false }),
                )
                .await?
            }
            Err(e) => return Err(e),
        };
        let data = answer
            .get("data")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow::anyhow!("the browser sent a screenshot without data"))?;
        use base64::Engine as _;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| {
                anyhow::anyhow!("the browser sent a screenshot that is not base64: {e}")
            })?;
        let path = save(&self.shared.artifacts_dir, &format!("{name}.png"), &png)?;
        let mut shots = lock(&self.shared.screenshots);
        if !shots.contains(&path) {
            shots.push(path.clone());
        }
        self.shared
            .log
            .push(format!("screenshot saved: {}", path.display()));
        Ok(path)
    }

    /// Everything the page's console said so far, uncaught exceptions and
    /// the browser's own log (failed loads) included.
    pub fn console(&self) -> Vec<ConsoleEntry> {
        lock(&self.shared.console).clone()
    }

    /// The console's entries of level `error`.
    pub fn console_errors(&self) -> Vec<ConsoleEntry> {
        self.console()
            .into_iter()
            .filter(|e| e.level == "error")
            .collect()
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// Writes `bytes` to `dir/file`, creating `dir`.
pub(super) fn save(dir: &Path, file: &str, bytes: &[u8]) -> crate::Result<PathBuf> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("failed to create {}: {e}", dir.display()))?;
    let path = dir.join(file);
    std::fs::write(&path, bytes)
        .map_err(|e| anyhow::anyhow!("failed to write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthiness_is_javascripts() {
        assert!(!truthy(&json!(null)) && !truthy(&json!(false)) && !truthy(&json!(0)));
        assert!(!truthy(&json!("")) && truthy(&json!("x")) && truthy(&json!([])));
    }
}
