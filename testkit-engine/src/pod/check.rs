//! Measured checks of a pod: health (unauthenticated) and auth (accepted with
//! the credential, refused without).

use std::time::{Duration, Instant};

use serde::Serialize;

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

/// An auth check: the suite's `[auth] probe`, with the credential and
/// without it.
#[derive(Debug, Clone, Serialize)]
pub struct AuthReport {
    /// The request checked, as `testkit.toml` names it, and its URL.
    pub probe: String,
    /// The URL.
    pub url: String,
    /// The request with the credential.
    pub with_token: Probe,
    /// The same request without it.
    pub without_token: Probe,
    /// What counts as refused (`[auth] refused`).
    pub refused: Vec<u16>,
}

impl AuthReport {
    /// Accepted with the credential (2xx), refused without (`[auth] refused`).
    pub fn ok(&self) -> bool {
        self.with_token
            .status
            .is_some_and(|s| (200..300).contains(&s))
            && self
                .without_token
                .status
                .is_some_and(|s| self.refused.contains(&s))
    }

    /// One line for people.
    pub fn summary(&self) -> String {
        let refused = self
            .refused
            .iter()
            .map(u16::to_string)
            .collect::<Vec<_>>()
            .join(" or ");
        format!(
            "{} ({}): with the credential {}; without {} (refused means {refused})",
            self.probe,
            self.url,
            self.with_token.summary(),
            self.without_token.summary()
        )
    }
}

/// A client without credentials that gives up after `timeout`: for probes.
pub fn plain_client(timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(timeout)
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

async fn probe(request: reqwest::RequestBuilder) -> Probe {
    let start = Instant::now();
    measured(request.send().await, start)
}

/// The probe of an answer (or of its absence) to a request sent at `start`.
fn measured(answer: reqwest::Result<reqwest::Response>, start: Instant) -> Probe {
    match answer {
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

/// The suite's `[auth] probe` sent with the pod's credential, then without
/// it. `None` when the suite's auth has no probe (a service without auth).
pub async fn check_auth(pod: &super::Pod, timeout: Duration) -> Option<AuthReport> {
    let auth = pod.auth();
    let probe_text = auth.probe.clone()?;
    let template = crate::template::RequestTemplate::parse(&probe_text)
        .ok()?
        .with_body(auth.probe_body.clone());
    let port = pod.port().to_string();
    let values = pod.handle().values(&port);
    let rendered = template.render_path(&values).and_then(|path| {
        template
            .render_body(&values)
            .map(|body| (pod.url(&path), body))
    });
    let (url, body) = match rendered {
        Ok(rendered) => rendered,
        Err(problem) => {
            let failed = Probe {
                status: None,
                elapsed: Duration::ZERO,
                error: Some(problem.to_string()),
            };
            return Some(AuthReport {
                probe: probe_text,
                url: String::new(),
                with_token: failed.clone(),
                without_token: failed,
                refused: auth.refused.clone(),
            });
        }
    };
    let method = template.method().clone();
    let with_body = |request: reqwest::RequestBuilder| match &body {
        Some(body) => request
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.clone()),
        None => request,
    };
    let start = Instant::now();
    let with_token = measured(
        pod.send(|c| {
            let request = c.request(method.clone(), &url).timeout(timeout);
            match &body {
                Some(body) => request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone()),
                None => request,
            }
        })
        .await,
        start,
    );
    let without_token = probe(with_body(plain_client(timeout).request(method, &url))).await;
    Some(AuthReport {
        probe: probe_text,
        url,
        with_token,
        without_token,
        refused: auth.refused.clone(),
    })
}
