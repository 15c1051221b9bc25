//! The session: the credential a run's tests send, obtained once and handed
//! on to every later test process of the run (see the [module docs](super)).
//!
//! How the credential is obtained and sent is the suite's `[auth]`: the
//! handle's token as it is, or a login request that turns the handle's
//! credentials (a token, a user and a password…) into a cookie session or a
//! short-lived token. When the service answers one of `[auth] expired`, the
//! first process to notice logs in again and every other process of the run
//! picks the new credential up from the session file (its `generation`
//! tells a newer credential from the one that expired).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, COOKIE, SET_COOKIE};
use serde::{Deserialize, Serialize};

use super::check::plain_client;
use super::{Pod, PodHandle};
use crate::config::{AuthSection, CapabilitiesSection, LoginSection, SendAs, SuiteConfig};
use crate::files::write_private;
use crate::template::RequestTemplate;

/// How long one auth request may take.
const AUTH_TIMEOUT: Duration = Duration::from_secs(30);

/// Connecting to a pod failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The session file or its lock.
    #[error("failed to {what} {}: {cause}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        cause: std::io::Error,
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
    /// The pod refused the credentials.
    #[error("pod {name} refused the credentials: {request} answered {status}: {message}; {hint}")]
    Refused {
        /// The pod.
        name: String,
        /// The request, as the suite's config names it.
        request: String,
        /// The status.
        status: u16,
        /// The pod's explanation, redacted.
        message: String,
        /// What to check.
        hint: String,
    },
    /// An answer that is not what the suite's config says it is.
    #[error("pod {name}: {request}: {problem}")]
    Unexpected {
        /// The pod.
        name: String,
        /// The request.
        request: String,
        /// What is wrong, with the key of `testkit.toml` to check.
        problem: String,
    },
    /// A template of `[auth]` or `[capabilities]` that the handle cannot fill.
    #[error("pod {name}: {problem}")]
    Template {
        /// The pod.
        name: String,
        /// Which placeholder, and the ones there are.
        problem: String,
    },
}

/// What a run's tests send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub(super) enum Credential {
    /// Nothing beyond what `[auth] send` makes of the handle (basic, none).
    Handle,
    /// A token, sent as `[auth] send` says.
    Token(String),
    /// Cookies (`a=1; b=2`) from a login answer.
    Cookie(String),
}

impl Credential {
    /// The secrets it is made of: a token; cookies whole and each value.
    fn secrets(&self) -> Vec<&str> {
        match self {
            Credential::Handle => Vec::new(),
            Credential::Token(t) => vec![t.as_str()],
            Credential::Cookie(c) => std::iter::once(c.as_str())
                .chain(
                    c.split(';')
                        .filter_map(|pair| pair.split_once('='))
                        .map(|(_, value)| value.trim()),
                )
                .collect(),
        }
    }

    fn register_secrets(&self) {
        for secret in self.secrets() {
            crate::register_secret(secret);
        }
    }

    /// Appends a credential this process obtained to the run's ledger in
    /// `dir`, its secrets dir: the other processes of the run (the runner,
    /// which copies the pod's logs, among them) never saw it, and must
    /// redact it too.
    fn record(&self, dir: Option<&Path>) -> Result<(), ConnectError> {
        let Some(dir) = dir else {
            return Ok(());
        };
        for secret in self.secrets() {
            crate::redact::record_secret(dir, secret).map_err(|source| ConnectError::Io {
                what: "record a credential in",
                path: dir.join(crate::redact::LEDGER_FILE),
                cause: source,
            })?;
        }
        Ok(())
    }
}

/// The session file: schema 2 (1 was sandboxd's cookie alone).
#[derive(Debug, Serialize, Deserialize)]
struct SessionFile {
    version: u32,
    name: String,
    base_url: String,
    credential: Credential,
    /// Bumped by every login: a process that saw generation `n` expire and
    /// finds a higher one takes it instead of logging in again.
    generation: u64,
    capabilities: Vec<String>,
}

const SESSION_VERSION: u32 = 2;

/// The live credential of a connected pod and the client that sends it.
#[derive(Debug)]
pub(super) struct Live {
    pub generation: u64,
    pub client: super::Client,
    /// What the client sends with every request, for a browser.
    pub headers: Vec<(String, String)>,
}

/// What a [`Pod`] needs to log in again.
#[derive(Debug)]
pub(super) struct Access {
    pub auth: AuthSection,
    pub session_dir: Option<PathBuf>,
}

/// Connects to the pod of `handle` as the suite's `config` says: reuses the
/// credential handed on in `<session_dir>/session.json` (the run's
/// [`secrets_dir`](crate::run::secrets_dir), never its results folder), or
/// obtains one and hands it on. Registers every secret it sees.
pub async fn connect(
    handle: PodHandle,
    config: &SuiteConfig,
    session_dir: Option<&Path>,
) -> Result<Pod, ConnectError> {
    handle.register_secrets();
    let access = Access {
        auth: config.auth.clone(),
        session_dir: session_dir.map(Path::to_owned),
    };
    let Some(dir) = access.session_dir.clone() else {
        let credential = obtain(&handle, &access.auth).await?;
        let capabilities =
            capabilities(&handle, &access.auth, &config.capabilities, &credential).await?;
        return Ok(build(handle, access, credential, 1, capabilities));
    };
    let _lock = SessionLock::take(&dir).await?;
    let session_path = dir.join("session.json");
    if let Some(saved) = read_session(&session_path, &handle) {
        saved.credential.register_secrets();
        let pod = build(
            handle.clone(),
            Access {
                auth: access.auth.clone(),
                session_dir: access.session_dir.clone(),
            },
            saved.credential,
            saved.generation,
            saved.capabilities,
        );
        // A session the pod no longer accepts is replaced below.
        if still_accepted(&pod).await? {
            return Ok(pod);
        }
    }
    let credential = obtain(&handle, &access.auth).await?;
    credential.record(Some(&dir))?;
    let capabilities =
        capabilities(&handle, &access.auth, &config.capabilities, &credential).await?;
    let generation = read_generation(&session_path) + 1;
    write_session(
        &session_path,
        &handle,
        &credential,
        generation,
        &capabilities,
    )?;
    Ok(build(handle, access, credential, generation, capabilities))
}

/// Logs in again after `seen` (a generation) expired: takes a newer
/// credential another process already obtained, or obtains one and hands it
/// on. Returns the live state to use.
pub(super) async fn renew(pod: &Pod, seen: u64) -> Result<(), ConnectError> {
    let access = &pod.access;
    if access.auth.login.is_none() {
        return Err(ConnectError::Refused {
            name: pod.name().to_owned(),
            request: access.auth.probe.clone().unwrap_or_default(),
            status: access.auth.expired.first().copied().unwrap_or(401),
            message: "the credential expired".to_owned(),
            hint: "the suite's [auth] has no [auth.login] to obtain a new one: give the handle a \
                   credential that lasts the run, or describe the login in testkit.toml"
                .to_owned(),
        });
    }
    let (credential, generation) = match &access.session_dir {
        None => (obtain(&pod.handle, &access.auth).await?, seen + 1),
        Some(dir) => {
            let _lock = SessionLock::take(dir).await?;
            let session_path = dir.join("session.json");
            match read_session(&session_path, &pod.handle) {
                Some(saved) if saved.generation > seen => {
                    saved.credential.register_secrets();
                    (saved.credential, saved.generation)
                }
                saved => {
                    let credential = obtain(&pod.handle, &access.auth).await?;
                    credential.record(Some(dir))?;
                    let generation = saved.map_or(seen, |s| s.generation).max(seen) + 1;
                    write_session(
                        &session_path,
                        &pod.handle,
                        &credential,
                        generation,
                        &pod.capabilities,
                    )?;
                    (credential, generation)
                }
            }
        }
    };
    let (client, headers) = client_for(&pod.handle, &access.auth, &credential);
    let mut live = pod.live.write().unwrap_or_else(|e| e.into_inner());
    if live.generation < generation {
        *live = Live {
            generation,
            client,
            headers,
        };
    }
    Ok(())
}

fn read_session(path: &Path, handle: &PodHandle) -> Option<SessionFile> {
    let text = std::fs::read_to_string(path).ok()?;
    let saved: SessionFile = serde_json::from_str(&text).ok()?;
    (saved.version == SESSION_VERSION
        && saved.name == handle.name()
        && saved.base_url == handle.base_url())
    .then_some(saved)
}

fn read_generation(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("generation")?.as_u64())
        .unwrap_or(0)
}

fn write_session(
    path: &Path,
    handle: &PodHandle,
    credential: &Credential,
    generation: u64,
    capabilities: &[String],
) -> Result<(), ConnectError> {
    let saved = SessionFile {
        version: SESSION_VERSION,
        name: handle.name().to_owned(),
        base_url: handle.base_url().to_owned(),
        credential: credential.clone(),
        generation,
        capabilities: capabilities.to_vec(),
    };
    let json = serde_json::to_vec_pretty(&saved).expect("serializable");
    write_private(path, &json).map_err(|source| ConnectError::Io {
        what: "write",
        path: path.to_owned(),
        cause: source,
    })
}

/// The run's session lock: the first process logs in, the others wait and
/// reuse what it wrote.
struct SessionLock {
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl SessionLock {
    async fn take(dir: &Path) -> Result<SessionLock, ConnectError> {
        use nix::fcntl::{Flock, FlockArg};
        let io = |what, path: &Path| {
            let path = path.to_owned();
            move |source| ConnectError::Io {
                what,
                path,
                cause: source,
            }
        };
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        let path = dir.join("session.lock");
        let mut file = crate::files::open_lock_file(&path).map_err(io("open", &path))?;
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => return Ok(SessionLock { _lock: lock }),
                Err((f, nix::errno::Errno::EWOULDBLOCK)) if Instant::now() < deadline => {
                    file = f;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err((_, errno)) => return Err(io("lock", &path)(errno.into())),
            }
        }
    }
}

/// Whether the pod still accepts a handed-on credential: the probe answers
/// 2xx. Without a probe (a service without auth) there is nothing to expire.
async fn still_accepted(pod: &Pod) -> Result<bool, ConnectError> {
    let Some(probe) = &pod.access.auth.probe else {
        return Ok(true);
    };
    let (request, url) = request_of(pod.handle(), probe, pod.access.auth.probe_body.clone())?;
    let port = pod.handle().port().to_string();
    let body = request
        .render_body(&pod.handle().values(&port))
        .map_err(|problem| ConnectError::Template {
            name: pod.name().to_owned(),
            problem: format!("[auth] probe_body: {problem}"),
        })?;
    let mut sent = pod.client().request(request.method().clone(), &url);
    if let Some(body) = body {
        sent = sent
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
    }
    match sent.send().await {
        Ok(resp) => Ok(resp.status().is_success()),
        Err(e) => Err(ConnectError::Unreachable {
            name: pod.name().to_owned(),
            url,
            message: crate::redact(&e.to_string()).into_owned(),
        }),
    }
}

/// The credential `auth` makes of `handle`: the handle's own, or what its
/// login request answers.
async fn obtain(handle: &PodHandle, auth: &AuthSection) -> Result<Credential, ConnectError> {
    let Some(login) = &auth.login else {
        return Ok(match handle.field("token") {
            Some(t) if !matches!(auth.send, SendAs::Basic | SendAs::Nothing) => {
                Credential::Token(t.to_owned())
            }
            _ => Credential::Handle,
        });
    };
    let (builder, url) = login_request(handle, auth, login)?;
    let resp = builder
        .send()
        .await
        .map_err(|e| unreachable(handle, &url, &e))?;
    let answer = LoginAnswer::read(resp).await;
    if !answer.status.is_success() {
        return Err(login_refused(handle, login, &answer));
    }
    let credential = credential_of(handle, login, answer)?;
    credential.register_secrets();
    Ok(credential)
}

/// The login request of `[auth.login]`, filled from the handle and carrying
/// the handle's credential as the login's `send` says, and its URL.
fn login_request(
    handle: &PodHandle,
    auth: &AuthSection,
    login: &LoginSection,
) -> Result<(reqwest::RequestBuilder, String), ConnectError> {
    let (request, url) = request_of(handle, &login.request, login.body.clone())?;
    let port = handle.port().to_string();
    let body = request
        .render_body(&handle.values(&port))
        .map_err(|problem| ConnectError::Template {
            name: handle.name().to_owned(),
            problem: format!("[auth.login] body: {problem}"),
        })?;
    let send = login.send.unwrap_or(auth.send);
    let mut headers = HeaderMap::new();
    let handle_credential = match (send, handle.field("token")) {
        (SendAs::Basic | SendAs::Nothing, _) | (_, None) => Credential::Handle,
        (_, Some(t)) => Credential::Token(t.to_owned()),
    };
    apply(&mut headers, handle, auth, send, &handle_credential);
    let mut builder = plain_client(AUTH_TIMEOUT)
        .request(request.method().clone(), &url)
        .headers(headers);
    if let Some(body) = body {
        builder = builder
            .header(
                reqwest::header::CONTENT_TYPE,
                crate::template::body_content_type(&body),
            )
            .body(body);
    }
    Ok((builder, url))
}

/// What a login request answered.
struct LoginAnswer {
    status: reqwest::StatusCode,
    /// The `name=value` pair of each `Set-Cookie`.
    cookies: Vec<String>,
    text: String,
}

impl LoginAnswer {
    async fn read(resp: reqwest::Response) -> LoginAnswer {
        let status = resp.status();
        let cookies: Vec<String> = resp
            .headers()
            .get_all(SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(|v| v.split(';').next())
            .map(|pair| pair.trim().to_owned())
            .filter(|pair| pair.contains('='))
            .collect();
        let text = resp.text().await.unwrap_or_default();
        LoginAnswer {
            status,
            cookies,
            text,
        }
    }
}

/// The error of a login that answered other than 2xx: the pod's message,
/// and what to check.
fn login_refused(handle: &PodHandle, login: &LoginSection, answer: &LoginAnswer) -> ConnectError {
    let text = &answer.text;
    let message = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_owned))
        .unwrap_or_else(|| text.chars().take(300).collect());
    ConnectError::Refused {
        name: handle.name().to_owned(),
        request: format!("[auth.login] {}", login.request),
        status: answer.status.as_u16(),
        message: crate::redact(&message).into_owned(),
        hint: format!(
            "check the handle's credentials and [auth.login] in testkit.toml; a pod that \
             accepts its token only for a while needs the session handed on: run the suite \
             with `testkit-runner run`, or give every process the same run id (TESTKIT_RUN_ID) \
             so later ones find {}",
            Path::new("<the run's secrets dir>/session.json").display()
        ),
    }
}

/// The credential a successful login answered: the token at
/// `auth.login.token`, else its cookies.
fn credential_of(
    handle: &PodHandle,
    login: &LoginSection,
    answer: LoginAnswer,
) -> Result<Credential, ConnectError> {
    let unexpected = |problem: String| ConnectError::Unexpected {
        name: handle.name().to_owned(),
        request: login.request.clone(),
        problem,
    };
    match &login.token {
        Some(pointer) => {
            let value: serde_json::Value = serde_json::from_str(&answer.text).map_err(|e| {
                unexpected(format!(
                    "answered something that is not JSON ({e}), but `auth.login.token` says the token is at {pointer:?}"
                ))
            })?;
            match value.pointer(pointer).and_then(|t| t.as_str()) {
                Some(t) if !t.is_empty() => Ok(Credential::Token(t.to_owned())),
                _ => Err(unexpected(format!(
                    "answered JSON without a string at {pointer:?} (`auth.login.token`)"
                ))),
            }
        }
        None if answer.cookies.is_empty() => Err(unexpected(
            "answered without a Set-Cookie, but `auth.login.cookie = true` says the \
             session is a cookie"
                .to_owned(),
        )),
        None => Ok(Credential::Cookie(answer.cookies.join("; "))),
    }
}

/// The capabilities: the handle's, else the config's list, else the
/// config's endpoint, else none.
async fn capabilities(
    handle: &PodHandle,
    auth: &AuthSection,
    caps: &CapabilitiesSection,
    credential: &Credential,
) -> Result<Vec<String>, ConnectError> {
    if let Some(declared) = handle.capabilities() {
        return Ok(declared.to_vec());
    }
    if !caps.list.is_empty() {
        return Ok(caps.list.clone());
    }
    let Some(request) = &caps.request else {
        return Ok(Vec::new());
    };
    let (template, url) = request_of(handle, request, None)?;
    let (client, _) = client_for(handle, auth, credential);
    let unexpected = |problem: String| ConnectError::Unexpected {
        name: handle.name().to_owned(),
        request: format!("[capabilities] {request}"),
        problem,
    };
    let resp = client
        .request(template.method().clone(), &url)
        .send()
        .await
        .map_err(|e| unreachable(handle, &url, &e))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(unexpected(format!(
            "answered {status} with the credential: {}",
            crate::redact(&text.chars().take(300).collect::<String>())
        )));
    }
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| unexpected(format!("answered something that is not JSON: {e}")))?;
    let array = value
        .pointer(&caps.pointer)
        .and_then(|a| a.as_array())
        .ok_or_else(|| {
            unexpected(format!(
                "answered JSON without an array at {:?} (`capabilities.pointer`)",
                caps.pointer
            ))
        })?;
    Ok(array
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect())
}

fn unreachable(handle: &PodHandle, url: &str, e: &reqwest::Error) -> ConnectError {
    ConnectError::Unreachable {
        name: handle.name().to_owned(),
        url: url.to_owned(),
        message: crate::redact(&e.to_string()).into_owned(),
    }
}

/// A request of the config, filled from the handle, and its URL.
fn request_of(
    handle: &PodHandle,
    text: &str,
    body: Option<String>,
) -> Result<(RequestTemplate, String), ConnectError> {
    let template = RequestTemplate::parse(text)
        .map_err(|p| ConnectError::Template {
            name: handle.name().to_owned(),
            problem: p.to_string(),
        })?
        .with_body(body);
    let port = handle.port().to_string();
    let path = template
        .render_path(&handle.values(&port))
        .map_err(|problem| ConnectError::Template {
            name: handle.name().to_owned(),
            problem: problem.to_string(),
        })?;
    let url = format!("{}{path}", handle.base_url());
    Ok((template, url))
}

/// Puts `credential` on `headers` as `send` says.
fn apply(
    headers: &mut HeaderMap,
    handle: &PodHandle,
    auth: &AuthSection,
    send: SendAs,
    credential: &Credential,
) {
    let mut set = |name: HeaderName, value: String| {
        if let Ok(mut v) = HeaderValue::from_str(&value) {
            v.set_sensitive(true);
            headers.insert(name, v);
        }
    };
    match credential {
        Credential::Cookie(c) => set(COOKIE, c.clone()),
        Credential::Token(t) => match send {
            SendAs::Bearer => set(AUTHORIZATION, format!("Bearer {t}")),
            SendAs::Header => {
                if let Some(name) = auth
                    .header
                    .as_deref()
                    .and_then(|h| HeaderName::from_bytes(h.as_bytes()).ok())
                {
                    set(name, format!("{}{t}", auth.prefix));
                }
            }
            SendAs::Cookie => set(
                COOKIE,
                format!("{}={t}", auth.cookie.as_deref().unwrap_or("token")),
            ),
            SendAs::Basic | SendAs::Nothing => {}
        },
        Credential::Handle => {
            if send == SendAs::Basic {
                use base64::Engine as _;
                let pair = format!(
                    "{}:{}",
                    handle.field("user").unwrap_or_default(),
                    handle.field("password").unwrap_or_default()
                );
                let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
                crate::register_secret(&encoded);
                set(AUTHORIZATION, format!("Basic {encoded}"));
            }
        }
    }
}

/// A client that sends `credential` with every request, and those headers.
pub(super) fn client_for(
    handle: &PodHandle,
    auth: &AuthSection,
    credential: &Credential,
) -> (super::Client, Vec<(String, String)>) {
    let mut headers = HeaderMap::new();
    apply(&mut headers, handle, auth, auth.send, credential);
    let pairs = headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    let client = reqwest::Client::builder()
        .default_headers(headers.clone())
        .connect_timeout(Duration::from_secs(10))
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    (super::Client::new(client, headers), pairs)
}

fn build(
    handle: PodHandle,
    access: Access,
    credential: Credential,
    generation: u64,
    capabilities: Vec<String>,
) -> Pod {
    let (client, headers) = client_for(&handle, &access.auth, &credential);
    Pod {
        handle,
        capabilities,
        live: Arc::new(std::sync::RwLock::new(Live {
            generation,
            client,
            headers,
        })),
        access: Arc::new(access),
        run_id: String::new(),
    }
}
