//! Sandboxes, the suite's only resource kind: creating one journals it
//! before the request, and the test's end deletes it and verifies it gone.
//! What runs and lives inside a sandbox (execs, background processes,
//! files) is reached through its [`Sandbox`].

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::Method;
use serde::{Deserialize, Serialize};
use testkit::wait::{self, Check};
use testkit::Cx;

use crate::api::{call, call_status, request, REQUEST_TIMEOUT};
use crate::{default_wait, encode, ApiError, Body, Cmd, ExecOutput, Process, ProcessInfo, SANDBOX};

/// How long a page walk may go on: a pod that keeps handing out page tokens
/// must not make a test loop forever.
const MAX_PAGES: usize = 1000;

/// What to create a sandbox with.
#[derive(Debug, Clone, Default)]
pub struct SandboxSpec {
    /// Labels.
    pub labels: BTreeMap<String, String>,
    /// Environment of every command run in it.
    pub env: BTreeMap<String, String>,
}

impl SandboxSpec {
    /// No labels, no environment.
    pub fn new() -> SandboxSpec {
        SandboxSpec::default()
    }

    /// Adds a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> SandboxSpec {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> SandboxSpec {
        self.env.insert(key.into(), value.into());
        self
    }
}

/// A sandbox as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// Its name.
    pub name: String,
    /// Its labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Its environment.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// `ready` or `deleting`.
    pub state: String,
    /// Unix milliseconds.
    pub created_at: u64,
}

/// One page of `GET /api/sandboxes`.
#[derive(Debug, Clone, Deserialize)]
pub struct SandboxPage {
    /// The sandboxes of this page.
    pub items: Vec<SandboxInfo>,
    /// The token of the next page; `None` on the last.
    pub next_page_token: Option<String>,
}

impl SandboxPage {
    /// The names on this page, in order.
    pub fn names(&self) -> Vec<String> {
        self.items.iter().map(|s| s.name.clone()).collect()
    }
}

/// A listing query: `GET /api/sandboxes?prefix=..&limit=..&label=k=v&page_token=..`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only names starting with this.
    pub prefix: Option<String>,
    /// Page size.
    pub limit: Option<usize>,
    /// `key=value` filters, all of which must match.
    pub labels: Vec<(String, String)>,
    /// Where to continue.
    pub page_token: Option<String>,
}

impl ListQuery {
    /// Everything (first page).
    pub fn new() -> ListQuery {
        ListQuery::default()
    }

    /// Only names starting with `prefix`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> ListQuery {
        self.prefix = Some(prefix.into());
        self
    }

    /// At most `limit` per page.
    pub fn limit(mut self, limit: usize) -> ListQuery {
        self.limit = Some(limit);
        self
    }

    /// Only sandboxes labelled `key=value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> ListQuery {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// The page after the one that gave `token`.
    pub fn page_token(mut self, token: impl Into<String>) -> ListQuery {
        self.page_token = Some(token.into());
        self
    }

    /// The request path.
    pub fn path(&self) -> String {
        let mut q = Vec::new();
        if let Some(p) = &self.prefix {
            q.push(format!("prefix={}", encode(p)));
        }
        if let Some(l) = self.limit {
            q.push(format!("limit={l}"));
        }
        for (k, v) in &self.labels {
            q.push(format!("label={}", encode(&format!("{k}={v}"))));
        }
        if let Some(t) = &self.page_token {
            q.push(format!("page_token={}", encode(t)));
        }
        if q.is_empty() {
            "/api/sandboxes".to_owned()
        } else {
            format!("/api/sandboxes?{}", q.join("&"))
        }
    }
}

/// A sandbox this test created; deleted and verified gone when the test ends.
#[derive(Debug, Clone)]
pub struct Sandbox {
    info: SandboxInfo,
}

impl Sandbox {
    /// Creates a sandbox with a fresh name of this test.
    pub async fn create(cx: &Cx, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        let name = cx.unique_name();
        Sandbox::create_named(cx, &name, spec).await
    }

    /// Creates a sandbox named `name` (which must carry the run id: a name
    /// from `cx.unique_name()`), journaled before the request.
    pub async fn create_named(cx: &Cx, name: &str, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        // Without a pod the test is skipped here, before anything is journaled.
        cx.pod()?;
        let body = serde_json::json!({ "name": name, "labels": spec.labels, "env": spec.env });
        let info: SandboxInfo = cx
            .create(
                SANDBOX,
                name,
                call(
                    cx,
                    Method::POST,
                    "/api/sandboxes",
                    Body::Json(body),
                    REQUEST_TIMEOUT,
                ),
            )
            .await?;
        cx.log(format_args!("created sandbox {name}"));
        Ok(Sandbox { info })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// What the create request answered.
    pub fn info(&self) -> &SandboxInfo {
        &self.info
    }

    fn path(&self, tail: &str) -> String {
        format!("/api/sandboxes/{}{tail}", encode(self.name()))
    }

    /// `GET /api/sandboxes/{name}`.
    pub async fn get(cx: &Cx, name: &str) -> anyhow::Result<SandboxInfo> {
        let path = format!("/api/sandboxes/{}", encode(name));
        call(cx, Method::GET, &path, Body::Empty, REQUEST_TIMEOUT).await
    }

    /// `GET /api/sandboxes/{name}`, with 404 as `None`.
    pub async fn find(cx: &Cx, name: &str) -> anyhow::Result<Option<SandboxInfo>> {
        match Sandbox::get(cx, name).await {
            Ok(info) => Ok(Some(info)),
            Err(e)
                if e.downcast_ref::<ApiError>()
                    .is_some_and(|a| a.status == 404) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// One page of `GET /api/sandboxes`.
    pub async fn list(cx: &Cx, query: &ListQuery) -> anyhow::Result<SandboxPage> {
        call(cx, Method::GET, &query.path(), Body::Empty, REQUEST_TIMEOUT).await
    }

    /// Every page of `query`, in order; the pages are returned separately.
    pub async fn list_pages(cx: &Cx, query: &ListQuery) -> anyhow::Result<Vec<SandboxPage>> {
        let mut pages = Vec::new();
        let mut query = query.clone();
        loop {
            let page = Sandbox::list(cx, &query).await?;
            let next = page.next_page_token.clone();
            pages.push(page);
            match next {
                Some(token) if pages.len() < MAX_PAGES => query = query.page_token(token),
                Some(_) => anyhow::bail!("the listing did not end after {MAX_PAGES} pages"),
                None => return Ok(pages),
            }
        }
    }

    /// The names of every sandbox `query` lists, over all pages.
    pub async fn list_names(cx: &Cx, query: &ListQuery) -> anyhow::Result<Vec<String>> {
        let pages = Sandbox::list_pages(cx, query).await?;
        Ok(pages.iter().flat_map(SandboxPage::names).collect())
    }

    /// `DELETE /api/sandboxes/{name}`: what the delete answered.
    pub async fn delete(cx: &Cx, name: &str) -> anyhow::Result<SandboxInfo> {
        let path = format!("/api/sandboxes/{}", encode(name));
        call(cx, Method::DELETE, &path, Body::Empty, REQUEST_TIMEOUT).await
    }

    /// Waits until `GET /api/sandboxes/{name}` answers 404.
    pub async fn wait_gone(cx: &Cx, name: &str) -> anyhow::Result<()> {
        wait::until(
            cx,
            &format!("sandbox {name} to be gone"),
            default_wait(),
            || async {
                Ok(match Sandbox::find(cx, name).await? {
                    None => Check::Done(()),
                    Some(info) => Check::pending(format!("state={}", info.state)),
                })
            },
        )
        .await?;
        Ok(())
    }

    /// Deletes this sandbox, waits until it is gone, and stops tracking it.
    pub async fn delete_and_wait(&self, cx: &Cx) -> anyhow::Result<()> {
        Sandbox::delete(cx, self.name()).await?;
        Sandbox::wait_gone(cx, self.name()).await?;
        cx.forget(SANDBOX, self.name());
        Ok(())
    }

    // -------------------------------------------------------------- exec

    /// Runs `cmd` to completion in this sandbox.
    pub async fn exec(&self, cx: &Cx, cmd: Cmd) -> anyhow::Result<ExecOutput> {
        // The command may legitimately run for its whole timeout.
        let timeout = Duration::from_millis(cmd.timeout_ms.unwrap_or(30_000)) + REQUEST_TIMEOUT;
        let mut body = serde_json::json!({ "argv": cmd.argv, "env": cmd.env });
        if let Some(ms) = cmd.timeout_ms {
            body["timeout_ms"] = ms.into();
        }
        let out: ExecOutput = call(
            cx,
            Method::POST,
            &self.path("/exec"),
            Body::Json(body),
            timeout,
        )
        .await?;
        cx.log(format_args!(
            "exec {:?}: exit_code={:?} signal={:?} timed_out={}",
            cmd.argv, out.exit_code, out.signal, out.timed_out
        ));
        Ok(out)
    }

    /// Runs `sh -c script` and fails unless it exits 0; returns its stdout.
    pub async fn sh(&self, cx: &Cx, script: &str) -> anyhow::Result<String> {
        let out = self.exec(cx, Cmd::sh(script)).await?;
        out.ensure_success(script)?;
        Ok(out.stdout)
    }

    // -------------------------------------------------------------- processes

    /// Starts `cmd` in the background (its timeout does not apply).
    pub async fn start(&self, cx: &Cx, cmd: Cmd) -> anyhow::Result<Process> {
        #[derive(Deserialize)]
        struct Started {
            pid: i32,
        }
        let body = serde_json::json!({ "argv": cmd.argv, "env": cmd.env });
        let started: Started = call(
            cx,
            Method::POST,
            &self.path("/processes"),
            Body::Json(body),
            REQUEST_TIMEOUT,
        )
        .await?;
        cx.log(format_args!("started {:?}: pid {}", cmd.argv, started.pid));
        Ok(Process::new(self.name(), started.pid))
    }

    /// The background processes of this sandbox.
    pub async fn processes(&self, cx: &Cx) -> anyhow::Result<Vec<ProcessInfo>> {
        #[derive(Deserialize)]
        struct List {
            items: Vec<ProcessInfo>,
        }
        let list: List = call(
            cx,
            Method::GET,
            &self.path("/processes"),
            Body::Empty,
            REQUEST_TIMEOUT,
        )
        .await?;
        Ok(list.items)
    }

    /// A process of this sandbox by pid (one this test did not start, too).
    pub fn process(&self, pid: i32) -> Process {
        Process::new(self.name(), pid)
    }

    // -------------------------------------------------------------- files

    fn file_path(&self, path: &str) -> String {
        self.path(&format!("/files/{}", encode(path)))
    }

    /// `PUT .../files/{path}`: the status (201 created, 204 replaced).
    pub async fn put_file(&self, cx: &Cx, path: &str, data: &[u8]) -> anyhow::Result<u16> {
        let status = call_status(
            cx,
            Method::PUT,
            &self.file_path(path),
            Body::Bytes(data.to_vec()),
        )
        .await?;
        Ok(status.as_u16())
    }

    /// `GET .../files/{path}`.
    pub async fn get_file(&self, cx: &Cx, path: &str) -> anyhow::Result<Vec<u8>> {
        let url = self.file_path(path);
        let (status, bytes) = request(cx, Method::GET, &url, Body::Empty, REQUEST_TIMEOUT).await?;
        if !status.is_success() {
            return Err(ApiError::from_answer(&Method::GET, &url, status, &bytes).into());
        }
        Ok(bytes)
    }

    /// `GET .../files/{path}` as text, with 404 as `None`.
    pub async fn find_file(&self, cx: &Cx, path: &str) -> anyhow::Result<Option<String>> {
        match self.get_file(cx, path).await {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e)
                if e.downcast_ref::<ApiError>()
                    .is_some_and(|a| a.status == 404) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// `DELETE .../files/{path}`.
    pub async fn delete_file(&self, cx: &Cx, path: &str) -> anyhow::Result<()> {
        call_status(cx, Method::DELETE, &self.file_path(path), Body::Empty).await?;
        Ok(())
    }

    /// Waits until the file at `path` exists and is not empty; returns its text.
    pub async fn wait_file(&self, cx: &Cx, path: &str) -> anyhow::Result<String> {
        let what = format!("file {path} in sandbox {}", self.name());
        let text = wait::until(cx, &what, default_wait(), || async {
            Ok(match self.find_file(cx, path).await? {
                Some(text) if !text.is_empty() => Check::Done(text),
                Some(_) => Check::pending("exists, empty"),
                None => Check::pending("404: not there yet"),
            })
        })
        .await?;
        Ok(text)
    }
}
