//! `sandboxctl`: the command line client of the sandboxd API.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand, ValueEnum};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::{ErrorBody, ExecResult, Handle, Sandbox, SandboxList};

/// Exit code: success.
pub const EXIT_OK: i32 = 0;
/// Exit code: the API answered with an error.
pub const EXIT_API_ERROR: i32 = 1;
/// Exit code: the server could not be reached.
pub const EXIT_UNREACHABLE: i32 = 2;
/// Exit code: bad arguments, handle or configuration.
pub const EXIT_USAGE: i32 = 64;

const EXIT_HELP: &str = "\
Exit codes:
  0   success
  1   the API answered with an error (printed on stderr)
  2   the server could not be reached
  64  usage error: bad arguments, unreadable handle, no URL or token
`sandbox exec` exits with the command's own exit code instead
(128+N when it was killed by signal N, 124 when it timed out).

Connection: --handle FILE (the JSON line `sandboxd serve` prints), or
--url/SANDBOXD_URL and --token/SANDBOXD_TOKEN (these override the handle).
The token is accepted only in its window after the server started; a session
opened by an earlier request keeps working after it: pass its cookie with
--cookie/SANDBOXD_COOKIE (`sandboxd_session=ID`, as the server set it).";

/// `sandboxctl`: drive a sandboxd instance.
#[derive(Debug, Parser)]
#[command(name = "sandboxctl", version, about = "Command line client of the sandboxd API.", after_help = EXIT_HELP)]
pub struct Ctl {
    /// Handle file: the JSON line printed by `sandboxd serve`.
    #[arg(long, global = true, value_name = "FILE")]
    handle: Option<PathBuf>,
    /// Base URL, e.g. http://127.0.0.1:8080.
    #[arg(long, global = true, env = "SANDBOXD_URL", value_name = "URL")]
    url: Option<String>,
    /// API token (never printed).
    #[arg(
        long,
        global = true,
        env = "SANDBOXD_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    token: Option<String>,
    /// Session cookie(s) to send, `name=value[; name=value]` (never printed).
    #[arg(
        long,
        global = true,
        env = "SANDBOXD_COOKIE",
        hide_env_values = true,
        value_name = "COOKIE"
    )]
    cookie: Option<String>,
    /// Output format.
    #[arg(long, global = true, value_enum, default_value = "table")]
    output: Output,
    #[command(subcommand)]
    command: Top,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Debug, Subcommand)]
enum Top {
    /// Manage sandboxes.
    #[command(subcommand)]
    Sandbox(SandboxCmd),
}

#[derive(Debug, Subcommand)]
enum SandboxCmd {
    /// Create a sandbox.
    Create(CreateArgs),
    /// List sandboxes (follows pagination).
    List(ListArgs),
    /// Show one sandbox.
    Get {
        /// Sandbox name.
        name: String,
    },
    /// Delete a sandbox (asynchronous unless --wait).
    Delete {
        /// Sandbox name.
        name: String,
        /// Wait until the sandbox is gone.
        #[arg(long)]
        wait: bool,
        /// How long --wait waits.
        #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
        wait_timeout: Duration,
    },
    /// Run a command in a sandbox and exit with its exit code.
    Exec(ExecArgs),
}

#[derive(Debug, Args)]
struct CreateArgs {
    /// Sandbox name (a DNS label).
    name: String,
    /// Label, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_kv)]
    labels: Vec<(String, String)>,
    /// Environment variable, repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_kv)]
    env: Vec<(String, String)>,
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Only sandboxes with this label, repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_kv)]
    labels: Vec<(String, String)>,
    /// Only names starting with this.
    #[arg(long)]
    prefix: Option<String>,
}

#[derive(Debug, Args)]
struct ExecArgs {
    /// Sandbox name.
    name: String,
    /// Per-call environment variable, repeatable.
    #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_kv)]
    env: Vec<(String, String)>,
    /// Kill the command after this long.
    #[arg(long, value_parser = humantime::parse_duration)]
    timeout: Option<Duration>,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "ARGV")]
    argv: Vec<String>,
}

fn parse_kv(s: &str) -> Result<(String, String), NotKeyValue> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| NotKeyValue(s.to_owned()))
}

/// A `--label` or `--env` without `=`.
#[derive(Debug, thiserror::Error)]
#[error("expected KEY=VALUE, got {0:?}")]
struct NotKeyValue(String);

/// An expected failure of `sandboxctl`, with its exit code.
#[derive(Debug, thiserror::Error)]
enum CtlError {
    #[error("{0}")]
    Usage(String),
    #[error("cannot reach {url}")]
    Unreachable {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{status}: {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error("{0}")]
    Other(String),
}

impl CtlError {
    fn exit_code(&self) -> i32 {
        match self {
            CtlError::Usage(_) => EXIT_USAGE,
            CtlError::Unreachable { .. } => EXIT_UNREACHABLE,
            CtlError::Api { .. } | CtlError::Other(_) => EXIT_API_ERROR,
        }
    }
}

struct Client {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
    cookie: Option<String>,
}

impl Client {
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<T, CtlError> {
        let url = format!("{}{}", self.base, path);
        let mut req = self.http.request(method, &url);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(cookie) = &self.cookie {
            req = req.header(reqwest::header::COOKIE, cookie);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.map_err(|source| CtlError::Unreachable {
            url: self.base.clone(),
            source,
        })?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|source| CtlError::Unreachable {
            url: self.base.clone(),
            source,
        })?;
        if !status.is_success() {
            return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
                Ok(e) => CtlError::Api {
                    status: status.as_u16(),
                    code: e.error.code,
                    message: e.error.message,
                },
                Err(_) => CtlError::Api {
                    status: status.as_u16(),
                    code: "unknown".into(),
                    message: String::from_utf8_lossy(&bytes).into_owned(),
                },
            });
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| CtlError::Other(format!("unexpected answer from the server: {e}")))
    }
}

fn connect(ctl: &Ctl) -> Result<Client, CtlError> {
    let handle: Option<Handle> = match &ctl.handle {
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| {
                CtlError::Usage(format!("cannot read the handle {}: {e}", p.display()))
            })?;
            Some(
                serde_json::from_str(text.trim())
                    .map_err(|e| CtlError::Usage(format!("invalid handle {}: {e}", p.display())))?,
            )
        }
        None => None,
    };
    let base = ctl
        .url
        .clone()
        .or_else(|| handle.as_ref().map(|h| h.base_url.clone()));
    let token = ctl
        .token
        .clone()
        .or_else(|| handle.as_ref().map(|h| h.token.clone()));
    let Some(base) = base else {
        return Err(CtlError::Usage(
            "no server: pass --handle FILE or --url / SANDBOXD_URL".into(),
        ));
    };
    // An empty value is no value: a caller that fills the variable from
    // something it may not have (a session) need not unset it.
    let token = token.filter(|t| !t.is_empty());
    let cookie = ctl.cookie.clone().filter(|c| !c.is_empty());
    if token.is_none() && cookie.is_none() {
        return Err(CtlError::Usage(
            "no token: pass --handle FILE or --token / SANDBOXD_TOKEN (or a session's --cookie / SANDBOXD_COOKIE)".into(),
        ));
    }
    if let Some(c) = &cookie {
        if reqwest::header::HeaderValue::from_str(c).is_err() {
            return Err(CtlError::Usage(
                "--cookie / SANDBOXD_COOKIE is not a valid header value: pass `name=value`, as the server set it".into(),
            ));
        }
    }
    let http = reqwest::Client::builder()
        .cookie_store(true)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| CtlError::Other(format!("cannot build the HTTP client: {e}")))?;
    Ok(Client {
        http,
        base: base.trim_end_matches('/').to_string(),
        token,
        cookie,
    })
}

fn print_json(v: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(v).expect("serialisable"));
}

fn kv(map: &BTreeMap<String, String>) -> String {
    map.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn print_sandbox(out: Output, sb: &Sandbox) {
    match out {
        Output::Json => print_json(sb),
        Output::Table => {
            println!("name:       {}", sb.name);
            println!("state:      {}", state_str(sb));
            println!("created_at: {}", sb.created_at);
            println!("labels:     {}", kv(&sb.labels));
            println!(
                "env:        {}",
                sb.env.keys().cloned().collect::<Vec<_>>().join(",")
            );
        }
    }
}

fn state_str(sb: &Sandbox) -> &'static str {
    match sb.state {
        crate::api::SandboxState::Ready => "ready",
        crate::api::SandboxState::Deleting => "deleting",
    }
}

/// Everything but RFC 3986's unreserved characters, encoded: safe in a path
/// segment and in a query.
fn enc(s: &str) -> String {
    const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(s, NOT_UNRESERVED).to_string()
}

async fn run(ctl: Ctl) -> Result<i32, CtlError> {
    let client = connect(&ctl)?;
    let out = ctl.output;
    let Top::Sandbox(cmd) = ctl.command;
    match cmd {
        SandboxCmd::Create(a) => create(&client, out, a).await?,
        SandboxCmd::List(a) => list(&client, out, &a).await?,
        SandboxCmd::Get { name } => get(&client, out, &name).await?,
        SandboxCmd::Delete {
            name,
            wait,
            wait_timeout,
        } => delete(&client, out, &name, wait, wait_timeout).await?,
        SandboxCmd::Exec(a) => return exec(&client, out, a).await,
    }
    Ok(EXIT_OK)
}

/// `sandbox create`.
async fn create(client: &Client, out: Output, a: CreateArgs) -> Result<(), CtlError> {
    let body = serde_json::json!({
        "name": a.name,
        "labels": a.labels.into_iter().collect::<BTreeMap<_, _>>(),
        "env": a.env.into_iter().collect::<BTreeMap<_, _>>(),
    });
    let sb: Sandbox = client
        .call(reqwest::Method::POST, "/api/sandboxes", Some(body))
        .await?;
    print_sandbox(out, &sb);
    Ok(())
}

/// `sandbox list`.
async fn list(client: &Client, out: Output, a: &ListArgs) -> Result<(), CtlError> {
    let items = list_all(client, a).await?;
    match out {
        Output::Json => print_json(&serde_json::json!({ "items": items })),
        Output::Table => {
            let w = items.iter().map(|s| s.name.len()).max().unwrap_or(4).max(4);
            println!(
                "{:<w$}  {:<8}  {:<13}  LABELS",
                "NAME", "STATE", "CREATED_AT"
            );
            for sb in &items {
                println!(
                    "{:<w$}  {:<8}  {:<13}  {}",
                    sb.name,
                    state_str(sb),
                    sb.created_at,
                    kv(&sb.labels)
                );
            }
        }
    }
    Ok(())
}

/// Every sandbox `a` selects, page after page.
async fn list_all(client: &Client, a: &ListArgs) -> Result<Vec<Sandbox>, CtlError> {
    let mut items = Vec::new();
    let mut page: Option<String> = None;
    loop {
        let mut q = vec!["limit=1000".to_string()];
        for (k, v) in &a.labels {
            q.push(format!("label={}", enc(&format!("{k}={v}"))));
        }
        if let Some(p) = &a.prefix {
            q.push(format!("prefix={}", enc(p)));
        }
        if let Some(p) = &page {
            q.push(format!("page_token={}", enc(p)));
        }
        let l: SandboxList = client
            .call(
                reqwest::Method::GET,
                &format!("/api/sandboxes?{}", q.join("&")),
                None,
            )
            .await?;
        items.extend(l.items);
        match l.next_page_token {
            Some(t) => page = Some(t),
            None => break,
        }
    }
    Ok(items)
}

/// `sandbox get`.
async fn get(client: &Client, out: Output, name: &str) -> Result<(), CtlError> {
    let sb: Sandbox = client
        .call(
            reqwest::Method::GET,
            &format!("/api/sandboxes/{}", enc(name)),
            None,
        )
        .await?;
    print_sandbox(out, &sb);
    Ok(())
}

/// `sandbox delete`, waiting for the sandbox to be gone when `wait`.
async fn delete(
    client: &Client,
    out: Output,
    name: &str,
    wait: bool,
    wait_timeout: Duration,
) -> Result<(), CtlError> {
    let path = format!("/api/sandboxes/{}", enc(name));
    let sb: Sandbox = client.call(reqwest::Method::DELETE, &path, None).await?;
    if wait {
        wait_gone(client, &path, name, wait_timeout).await?;
    }
    match out {
        Output::Json => print_json(
            &serde_json::json!({ "name": sb.name, "state": if wait { "deleted" } else { "deleting" } }),
        ),
        Output::Table => {
            println!("{} {}", sb.name, if wait { "deleted" } else { "deleting" })
        }
    }
    Ok(())
}

/// Polls the sandbox at `path` until it is gone (404), for `wait_timeout`
/// at most.
async fn wait_gone(
    client: &Client,
    path: &str,
    name: &str,
    wait_timeout: Duration,
) -> Result<(), CtlError> {
    let deadline = Instant::now() + wait_timeout;
    loop {
        match client
            .call::<Sandbox>(reqwest::Method::GET, path, None)
            .await
        {
            Err(CtlError::Api { status: 404, .. }) => return Ok(()),
            Err(e) => return Err(e),
            Ok(_) if Instant::now() >= deadline => {
                return Err(CtlError::Other(format!(
                    "sandbox {name} still exists after {}",
                    humantime::format_duration(wait_timeout)
                )))
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// `sandbox exec`: the command's exit code (124 when it timed out, 128+N
/// when signal N killed it).
async fn exec(client: &Client, out: Output, a: ExecArgs) -> Result<i32, CtlError> {
    let mut body = serde_json::json!({
        "argv": a.argv,
        "env": a.env.into_iter().collect::<BTreeMap<_, _>>(),
    });
    if let Some(t) = a.timeout {
        body["timeout_ms"] = Value::from(t.as_millis().max(1) as u64);
    }
    let r: ExecResult = client
        .call(
            reqwest::Method::POST,
            &format!("/api/sandboxes/{}/exec", enc(&a.name)),
            Some(body),
        )
        .await?;
    let code = if r.timed_out {
        124
    } else if let Some(c) = r.exit_code {
        c
    } else {
        128 + r.signal.unwrap_or(0)
    };
    match out {
        Output::Json => print_json(&r),
        Output::Table => {
            use std::io::Write;
            print!("{}", r.stdout);
            eprint!("{}", r.stderr);
            if r.timed_out {
                eprintln!("sandboxctl: the command timed out and was killed");
            }
            let _ = std::io::stdout().flush();
        }
    }
    Ok(code)
}

/// Entry point of the `sandboxctl` binary: parses `args` and returns the exit code.
pub fn main_impl(args: impl IntoIterator<Item = std::ffi::OsString>) -> i32 {
    let ctl = match Ctl::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { EXIT_USAGE } else { EXIT_OK };
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandboxctl: error: cannot start the runtime: {e}");
            return EXIT_API_ERROR;
        }
    };
    match rt.block_on(run(ctl)) {
        Ok(code) => code,
        Err(e) => {
            // The error, then each cause once.
            let mut text = e.to_string();
            let mut cause = std::error::Error::source(&e);
            while let Some(c) = cause {
                text.push_str(&format!(": {c}"));
                cause = c.source();
            }
            eprintln!("sandboxctl: error: {text}");
            e.exit_code()
        }
    }
}
