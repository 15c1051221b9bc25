//! Measured checks of a pod: health (unauthenticated) and auth (accepted with
//! the token, refused without).

use std::time::{Duration, Instant};

use serde::Serialize;

use super::handle::PodHandle;

/// The endpoint used to check auth and to open a session: it needs
/// authentication, changes nothing, and lists the pod's capabilities.
pub const CAPABILITIES_PATH: &str = "/api/capabilities";

/// One measured request.
#[derive(Debug, Clone, Serialize)]
pub struct Probe {
    /// The status code, when an answer came.
    pub status: Option<u16>,
    /// How long it took.
    pub elapsed: Duration,
    /// The transport error, when no answer came.
    pub error: Option<String>,
}

impl Probe {
    fn summary(&self) -> String {
        match (self.status, &self.error) {
            (Some(s), _) => format!("answered {s} in {:.1?}", self.elapsed),
            (None, Some(e)) => format!("failed after {:.1?}: {e}", self.elapsed),
            (None, None) => format!("no answer after {:.1?}", self.elapsed),
        }
    }
}

/// A health check.
#[derive(Debug, Clone, Serialize)]
pub struct HealthReport {
    /// The URL checked.
    pub url: String,
    /// The request.
    pub probe: Probe,
}

impl HealthReport {
    /// Whether it answered 2xx.
    pub fn ok(&self) -> bool {
        self.probe.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        format!("{} {}", self.url, self.probe.summary())
    }
}

/// An auth check.
#[derive(Debug, Clone, Serialize)]
pub struct AuthReport {
    /// The request with the token.
    pub with_token: Probe,
    /// The same request without it.
    pub without_token: Probe,
}

impl AuthReport {
    /// Accepted with the token (2xx), refused without (401 or 403).
    pub fn ok(&self) -> bool {
        self.with_token
            .status
            .is_some_and(|s| (200..300).contains(&s))
            && self
                .without_token
                .status
                .is_some_and(|s| s == 401 || s == 403)
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        format!(
            "with the token: {}; without: {}",
            self.with_token.summary(),
            self.without_token.summary()
        )
    }
}

pub(crate) fn plain_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

async fn probe(request: reqwest::RequestBuilder) -> Probe {
    let start = Instant::now();
    match request.send().await {
        Ok(resp) => Probe {
            status: Some(resp.status().as_u16()),
            elapsed: start.elapsed(),
            error: None,
        },
        // The error may quote the URL, never the token (a header).
        Err(e) => Probe {
            status: None,
            elapsed: start.elapsed(),
            error: Some(crate::redact(&e.to_string()).into_owned()),
        },
    }
}

/// `GET base_url + path` without credentials, bounded by `timeout`.
pub async fn check_health(base_url: &str, path: &str, timeout: Duration) -> HealthReport {
    let url = format!("{base_url}{path}");
    let probe = probe(plain_client(timeout).get(&url)).await;
    HealthReport { url, probe }
}

/// `GET /api/capabilities` with the token, then without it.
pub async fn check_auth(handle: &PodHandle, timeout: Duration) -> AuthReport {
    let client = plain_client(timeout);
    let url = format!("{}{CAPABILITIES_PATH}", handle.base_url());
    let with_token = probe(client.get(&url).bearer_auth(handle.token())).await;
    let without_token = probe(client.get(&url)).await;
    AuthReport {
        with_token,
        without_token,
    }
}
