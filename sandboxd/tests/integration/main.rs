//! Integration tests: each test starts the real `sandboxd` binary on a free
//! loopback port with its own HOME and drives it over HTTP (or `sandboxctl`).

mod api;
mod cli;
mod confinement;
mod connections;
mod deb;
mod escape;
mod faults;
mod files;
mod gateway;
mod lifecycle;
mod processes;
mod records;
mod ui;

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::killpg;
use nix::unistd::Pid;
use reqwest::{Method, StatusCode};
use sandboxd::api::Handle;
use serde_json::Value;
use tempfile::TempDir;
use test_support::Sandboxd;

/// A running `sandboxd`; stopped with its whole group on drop.
pub struct Server {
    pod: Sandboxd,
    pub handle: Handle,
    /// Dropped after `pod`, so the home outlives the server.
    pub home: Arc<TempDir>,
    pub log: PathBuf,
    /// Authenticated client (bearer + cookie store).
    pub client: reqwest::Client,
}

impl Server {
    pub fn start(args: &[&str]) -> Server {
        Self::start_in(Arc::new(TempDir::new().unwrap()), args)
    }

    pub fn start_in(home: Arc<TempDir>, args: &[&str]) -> Server {
        Self::start_in_env(home, args, &[])
    }

    /// [`Server::start_in`] with extra environment variables.
    pub fn start_in_env(home: Arc<TempDir>, args: &[&str], env: &[(&str, &str)]) -> Server {
        let pod = Sandboxd::start_in_env(home.path(), args, env);
        let handle: Handle = serde_json::from_str(pod.handle_json()).expect("handle JSON");
        let client = authed_client(&handle.token);
        Server {
            log: pod.log_path().to_owned(),
            pod,
            handle,
            home,
            client,
        }
    }

    pub fn pid(&self) -> i32 {
        self.pod.pid()
    }

    pub fn port(&self) -> u16 {
        self.handle.port
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.handle.base_url, path)
    }

    pub fn log_text(&self) -> String {
        self.pod.log_text()
    }

    /// A request with the authenticated client; answers status and JSON (or Null).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        call(&self.client, method, &self.url(path), body).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::DELETE, path, None).await
    }

    pub async fn create(&self, name: &str) -> Value {
        let (st, v) = self
            .post("/api/sandboxes", serde_json::json!({ "name": name }))
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        v
    }

    /// Polls until `GET /api/sandboxes/{name}` is 404.
    pub async fn wait_gone(&self, name: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let (st, v) = self.get(&format!("/api/sandboxes/{name}")).await;
            if st == StatusCode::NOT_FOUND {
                return;
            }
            assert!(Instant::now() < deadline, "{name} still there: {st} {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM and wait for the exit status; a server that had to be
    /// SIGKILLed fails the test.
    pub fn terminate(&mut self) -> ExitStatus {
        let status = self.pod.stop();
        assert_ne!(
            status.signal(),
            Some(nix::libc::SIGKILL),
            "sandboxd did not exit after SIGTERM and was killed; log:\n{}",
            self.log_text()
        );
        status
    }

    /// Waits for the server to exit by itself (crash faults).
    pub fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        self.pod.wait_exit(limit)
    }
}

pub fn authed_client(token: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        format!("Bearer {token}").parse().unwrap(),
    );
    reqwest::Client::builder()
        .cookie_store(true)
        .default_headers(headers)
        .build()
        .unwrap()
}

pub fn plain_client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

pub async fn call(
    client: &reqwest::Client,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = client.request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.expect("request");
    let st = resp.status();
    let bytes = resp.bytes().await.expect("body");
    (st, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// Asserts the JSON error shape and returns the code.
pub fn err_code(v: &Value) -> &str {
    assert!(v["error"]["message"].is_string(), "not an error body: {v}");
    v["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error body: {v}"))
}

/// Whether a process group still exists (`kill(-pgid, 0)` is not ESRCH).
pub fn group_exists(pgid: i32) -> bool {
    !matches!(
        killpg(Pid::from_raw(pgid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// Polls until the group is gone (zombies reparented to init can take a few seconds to be reaped).
pub fn wait_group_gone(pgid: i32, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while group_exists(pgid) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    true
}

pub fn write_handle(dir: &Path, h: &Handle) -> PathBuf {
    let p = dir.join("handle.json");
    std::fs::write(&p, serde_json::to_string(h).unwrap()).unwrap();
    p
}
