//! The session: the token exchanged for a session once per run, and handed
//! on to every later test process of the run (see the [module docs](super)).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::check::{self, CAPABILITIES_PATH};
use super::{Pod, PodHandle};
use crate::files::write_private;

/// Connecting to a pod failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The session file or its lock.
    #[error("failed to {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The pod did not answer.
    #[error("failed to reach pod {name} at {url}: {message}")]
    Unreachable {
        /// The pod.
        name: String,
        /// The URL.
        url: String,
        /// The transport error, redacted.
        message: String,
    },
    /// The pod refused the token.
    #[error(
        "pod {name} refused the token (HTTP {status}: {message}); if its token window has passed, \
         a session must be handed on: start the run with `testkit-runner run`, or keep the run's \
         results folder (TESTKIT_RESULTS_DIR) so later processes find {}", session_file.display()
    )]
    Refused {
        /// The pod.
        name: String,
        /// The status.
        status: u16,
        /// The pod's explanation, redacted.
        message: String,
        /// Where a session would have been.
        session_file: PathBuf,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct SessionFile {
    version: u32,
    name: String,
    base_url: String,
    cookie: Option<String>,
    capabilities: Vec<String>,
}

/// Connects to the pod of `handle`: reuses the session handed on in
/// `<results_dir>/pod/session.json` or exchanges the token for one and hands
/// it on (see the module docs). Registers the token and session as secrets.
pub async fn connect(handle: PodHandle, results_dir: Option<&Path>) -> Result<Pod, ConnectError> {
    crate::register_secret(handle.token());
    let Some(results_dir) = results_dir else {
        let (cookie, caps) = exchange(&handle, Path::new("(none)")).await?;
        return Ok(build(handle, cookie, caps));
    };
    let dir = results_dir.join("pod");
    let io = |what, path: &Path| {
        let path = path.to_owned();
        move |source| ConnectError::Io { what, path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let lock_path = dir.join("session.lock");
    let session_path = dir.join("session.json");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io("open", &lock_path))?;
    let _lock = lock(lock_file, &lock_path).await?;

    if let Ok(text) = std::fs::read_to_string(&session_path) {
        if let Ok(saved) = serde_json::from_str::<SessionFile>(&text) {
            if saved.version == 1
                && saved.name == handle.name()
                && saved.base_url == handle.base_url()
            {
                if let Some(c) = &saved.cookie {
                    register_cookie(c);
                }
                let pod = build(
                    handle.clone(),
                    saved.cookie.clone(),
                    saved.capabilities.clone(),
                );
                let url = pod.url(CAPABILITIES_PATH);
                match pod.client.get(&url).send().await {
                    Ok(resp) if resp.status().is_success() => return Ok(pod),
                    // A stale session: exchange the token again below.
                    Ok(_) => {}
                    Err(e) => {
                        return Err(ConnectError::Unreachable {
                            name: handle.name().to_owned(),
                            url,
                            message: crate::redact(&e.to_string()).into_owned(),
                        })
                    }
                }
            }
        }
    }
    let (cookie, caps) = exchange(&handle, &session_path).await?;
    let saved = SessionFile {
        version: 1,
        name: handle.name().to_owned(),
        base_url: handle.base_url().to_owned(),
        cookie: cookie.clone(),
        capabilities: caps.clone(),
    };
    let json = serde_json::to_vec_pretty(&saved).expect("serializable");
    write_private(&session_path, &json).map_err(io("write", &session_path))?;
    Ok(build(handle, cookie, caps))
}

async fn lock(
    file: std::fs::File,
    path: &Path,
) -> Result<nix::fcntl::Flock<std::fs::File>, ConnectError> {
    use nix::fcntl::{Flock, FlockArg};
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut file = file;
    loop {
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => return Ok(lock),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                file = f;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err((_, errno)) => {
                return Err(ConnectError::Io {
                    what: "lock",
                    path: path.to_owned(),
                    source: errno.into(),
                });
            }
        }
    }
}

/// Exchanges the token for a session: one authenticated request whose
/// answer sets the session cookie and lists the capabilities.
async fn exchange(
    handle: &PodHandle,
    session_path: &Path,
) -> Result<(Option<String>, Vec<String>), ConnectError> {
    let url = format!("{}{CAPABILITIES_PATH}", handle.base_url());
    let client = check::plain_client(Duration::from_secs(30));
    let resp = client
        .get(&url)
        .bearer_auth(handle.token())
        .send()
        .await
        .map_err(|e| ConnectError::Unreachable {
            name: handle.name().to_owned(),
            url: url.clone(),
            message: crate::redact(&e.to_string()).into_owned(),
        })?;
    let status = resp.status();
    let cookies: Vec<String> = resp
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.split(';').next())
        .map(|pair| pair.trim().to_owned())
        .filter(|pair| pair.contains('='))
        .collect();
    let body = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
            .unwrap_or_else(|| body.chars().take(300).collect());
        return Err(ConnectError::Refused {
            name: handle.name().to_owned(),
            status: status.as_u16(),
            message: crate::redact(&message).into_owned(),
            session_file: session_path.to_owned(),
        });
    }
    let caps = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| {
            v.get("capabilities")?.as_array().map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    let cookie = (!cookies.is_empty()).then(|| cookies.join("; "));
    if let Some(c) = &cookie {
        register_cookie(c);
    }
    Ok((cookie, caps))
}

fn register_cookie(cookie: &str) {
    crate::register_secret(cookie);
    for pair in cookie.split(';') {
        if let Some((_, value)) = pair.split_once('=') {
            crate::register_secret(value.trim());
        }
    }
}

fn build(handle: PodHandle, cookie: Option<String>, advertised: Vec<String>) -> Pod {
    use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, COOKIE};
    let mut headers = HeaderMap::new();
    // Without a session cookie, the token itself is the credential.
    let (name, value) = match &cookie {
        Some(c) => (COOKIE, c.clone()),
        None => (AUTHORIZATION, format!("Bearer {}", handle.token())),
    };
    if let Ok(mut v) = HeaderValue::from_str(&value) {
        v.set_sensitive(true);
        headers.insert(name, v);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    let capabilities = handle
        .capabilities()
        .map(<[String]>::to_vec)
        .unwrap_or(advertised);
    Pod {
        handle,
        client,
        capabilities,
        session_cookie: cookie,
    }
}
