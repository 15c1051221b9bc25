//! Command line of `sandboxd` and the fault switches.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

const FAULT_HELP: &str = "\
Fault switches (--fault NAME[=VALUE], repeatable, all off by default):
  delete-delay=DURATION  deletes finish DURATION late (the sandbox stays `deleting`)
  delete-fail=N          the first N DELETE /api/sandboxes/{name} requests answer 503
  delete-miss=N          the first N DELETE /api/sandboxes/{name} requests answer 404 and
                         delete nothing, as a delete that reads a stale cache does
  list-lag=DURATION      GET /api/sandboxes shows the state as it was DURATION ago
  drop-exec-env          exec ignores the per-call `env` (a reproducible product bug)
  crash-after=N          abort after serving N requests (health checks not counted),
                         leaving sandbox processes behind for a restart to reap
  log-credentials        log every credential a request carries (token, session cookie)
                         on stderr, as a careless service does
  drop-record-answer=N   the first N record creations are made, but their answer is lost
                         (the connection closes before it): the client cannot know the id
  keep-dirs-on-delete    a delete forgets the sandbox but leaves its directory under
                         HOME/sandboxes: the API says it is gone, the disk still holds it
  stale-file-reads       (gateway) a file read through the gateway is answered from its
                         cache of what it last read or wrote through itself: a write made
                         on the worker directly is not seen (reads go stale)
Durations use humantime syntax: 250ms, 2s, 5m.

Cluster (see --role):
  sandboxd serve --home W1 --listen 127.0.0.1:8081 --token-env SANDBOXD_TOKEN
  sandboxd serve --home G --role gateway --token-env SANDBOXD_TOKEN \\
      --worker worker-1=http://127.0.0.1:8081 --worker worker-2=http://127.0.0.1:8082
A gateway holds no sandboxes: it places each create on the live worker with the
fewest sandboxes and forwards every request about a sandbox to its worker. It
probes each worker's /api/health every 200ms (300ms timeout); a worker without a
successful probe for 600ms is `down` (reported within 1s of being stopped,
killed, frozen or cut off) and its sandboxes show `state: lost` until a probe
succeeds again and the gateway re-reads its listing. GET /api/cluster shows the
workers. A gateway ignores --max-sandboxes, --no-cgroup and the faults other than
crash-after, log-credentials and stale-file-reads: its workers apply their own.";

/// `sandboxd`: the reference sandbox gateway.
#[derive(Debug, Parser)]
#[command(
    name = "sandboxd",
    version,
    about = "A small sandbox gateway: real directories, real process groups, JSON over HTTP."
)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands of `sandboxd`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API until SIGTERM or SIGINT.
    #[command(after_help = FAULT_HELP)]
    Serve(ServeArgs),
}

/// Arguments of `sandboxd serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Directory holding all state (identity, sessions, sandboxes); created if missing.
    #[arg(long, value_name = "DIR")]
    pub home: PathBuf,
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// How long after start the raw token is accepted (sessions keep working after).
    #[arg(long, default_value = "5m", value_parser = parse_duration, value_name = "DURATION")]
    pub token_window: Duration,
    /// Maximum number of sandboxes (deleting ones count until gone); unlimited if unset.
    #[arg(long, value_name = "N")]
    pub max_sandboxes: Option<usize>,
    /// How long a client may take to send a whole request head; a connection
    /// that has not sent one by then (including an idle keep-alive one) is closed.
    #[arg(long, default_value = "10s", value_parser = parse_timeout, value_name = "DURATION")]
    pub header_timeout: Duration,
    /// Track sandbox processes by their ancestry (`/proc`) even where a cgroup
    /// v2 hierarchy is writable (by default each sandbox gets a cgroup there;
    /// as root, on a machine that mounts none, sandboxd mounts one in a mount
    /// namespace of its own).
    #[arg(long)]
    pub no_cgroup: bool,
    /// Take the bearer token from the environment variable NAME instead of the
    /// random one kept in HOME, so that every node of a cluster accepts the
    /// same token; the variable must be set and non-empty.
    #[arg(long, value_name = "NAME")]
    pub token_env: Option<String>,
    /// `worker` holds sandboxes; `gateway` holds none and forwards to its
    /// `--worker`s (see below).
    #[arg(long, value_enum, default_value_t = Role::Worker)]
    pub role: Role,
    /// A worker of this gateway, `NAME=URL` (repeatable; gateway only), e.g.
    /// `worker-1=http://127.0.0.1:8081`.
    #[arg(long = "worker", value_name = "NAME=URL", value_parser = parse_worker)]
    pub workers: Vec<WorkerSpec>,
    /// Enable a fault switch (see below).
    #[arg(long = "fault", value_name = "NAME[=VALUE]", value_parser = parse_fault)]
    pub faults: Vec<Fault>,
}

/// What a `sandboxd serve` instance does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Holds sandboxes (the default).
    Worker,
    /// Holds none: places and forwards to its workers.
    Gateway,
}

/// One `--worker NAME=URL` of a gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerSpec {
    /// A DNS label naming the worker in answers (`"worker": NAME`).
    pub name: String,
    /// Its base URL, `http://HOST:PORT`, without a trailing slash.
    pub url: String,
}

/// Why a `--worker NAME=URL` is refused. Its cause is part of its text:
/// clap prints an argument's error by its `Display` only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerSpecError {
    /// No `=`.
    #[error("invalid worker {0:?}: expected NAME=URL")]
    NoEquals(String),
    /// NAME is not a DNS label.
    #[error("invalid worker name {0:?}: expected a DNS label (a-z, 0-9, '-')")]
    Name(String),
    /// URL does not parse.
    #[error("invalid worker URL {url:?}: {cause}")]
    Url {
        /// The URL given.
        url: String,
        /// Why it does not parse (the URL parser's words: reqwest does not
        /// name its error type).
        cause: String,
    },
    /// URL is not `http(s)://HOST…`.
    #[error("invalid worker URL {0:?}: expected http://HOST:PORT")]
    NotHttp(String),
}

/// Parses `NAME=URL`.
pub fn parse_worker(s: &str) -> Result<WorkerSpec, WorkerSpecError> {
    let (name, url) = s
        .split_once('=')
        .ok_or_else(|| WorkerSpecError::NoEquals(s.to_owned()))?;
    if !crate::api::is_dns_label(name) {
        return Err(WorkerSpecError::Name(name.to_owned()));
    }
    let parsed = reqwest::Url::parse(url).map_err(|e| WorkerSpecError::Url {
        url: url.to_owned(),
        cause: e.to_string(),
    })?;
    if parsed.scheme() != "http" && parsed.scheme() != "https" || parsed.host().is_none() {
        return Err(WorkerSpecError::NotHttp(url.to_owned()));
    }
    Ok(WorkerSpec {
        name: name.to_string(),
        url: url.trim_end_matches('/').to_string(),
    })
}

/// One `--fault` switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Deletes finish this much later.
    DeleteDelay(Duration),
    /// The first N deletes answer 503.
    DeleteFail(u64),
    /// The first N deletes answer 404 and delete nothing.
    DeleteMiss(u64),
    /// Lists show the state as it was this long ago.
    ListLag(Duration),
    /// Exec ignores the per-call env.
    DropExecEnv,
    /// Abort after N requests.
    CrashAfter(u64),
    /// Log the credentials requests carry.
    LogCredentials,
    /// The first N record creations lose their answer.
    DropRecordAnswer(u64),
    /// Deletes forget the sandbox and leave its directory.
    KeepDirsOnDelete,
    /// A gateway answers file reads from its own cache.
    StaleFileReads,
}

/// All fault switches, resolved.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// `delete-delay`.
    pub delete_delay: Option<Duration>,
    /// `delete-fail`.
    pub delete_fail: u64,
    /// `delete-miss`.
    pub delete_miss: u64,
    /// `list-lag`.
    pub list_lag: Option<Duration>,
    /// `drop-exec-env`.
    pub drop_exec_env: bool,
    /// `crash-after`.
    pub crash_after: Option<u64>,
    /// `log-credentials`.
    pub log_credentials: bool,
    /// `drop-record-answer`.
    pub drop_record_answer: u64,
    /// `keep-dirs-on-delete`.
    pub keep_dirs_on_delete: bool,
    /// `stale-file-reads`.
    pub stale_file_reads: bool,
}

impl Faults {
    /// Folds the switches; a later switch of the same kind wins.
    pub fn from_list(list: &[Fault]) -> Self {
        let mut f = Faults::default();
        for x in list {
            match x {
                Fault::DeleteDelay(d) => f.delete_delay = Some(*d),
                Fault::DeleteFail(n) => f.delete_fail = *n,
                Fault::DeleteMiss(n) => f.delete_miss = *n,
                Fault::ListLag(d) => f.list_lag = Some(*d),
                Fault::DropExecEnv => f.drop_exec_env = true,
                Fault::CrashAfter(n) => f.crash_after = Some(*n),
                Fault::LogCredentials => f.log_credentials = true,
                Fault::DropRecordAnswer(n) => f.drop_record_answer = *n,
                Fault::KeepDirsOnDelete => f.keep_dirs_on_delete = true,
                Fault::StaleFileReads => f.stale_file_reads = true,
            }
        }
        f
    }
}

/// Why a duration or a `--fault` switch is refused. A cause is part of
/// the text: clap prints an argument's error by its `Display` only.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArgError {
    /// Not a duration.
    #[error("invalid duration {given:?}: {cause} (examples: 250ms, 2s, 5m)")]
    Duration {
        /// What was given.
        given: String,
        /// Why it is not a duration.
        cause: humantime::DurationError,
    },
    /// A timeout of zero.
    #[error("invalid timeout {0:?}: it must be longer than zero (examples: 500ms, 10s)")]
    ZeroTimeout(String),
    /// A fault's count is not a non-negative integer.
    #[error("fault `{fault}` needs a non-negative integer, got {given:?}")]
    Count {
        /// The fault's name.
        fault: String,
        /// What was given.
        given: String,
    },
    /// A fault that needs a value has none.
    #[error("fault `{0}` needs a value: {0}=VALUE")]
    NeedsValue(String),
    /// A fault that takes no value has one.
    #[error("fault `{0}` takes no value")]
    TakesNoValue(&'static str),
    /// No such fault.
    #[error("unknown fault {0:?}; expected one of: delete-delay=DURATION, delete-fail=N, delete-miss=N, list-lag=DURATION, drop-exec-env, crash-after=N, log-credentials, drop-record-answer=N, keep-dirs-on-delete, stale-file-reads")]
    UnknownFault(String),
}

fn parse_duration(s: &str) -> Result<Duration, ArgError> {
    humantime::parse_duration(s).map_err(|cause| ArgError::Duration {
        given: s.to_owned(),
        cause,
    })
}

fn parse_timeout(s: &str) -> Result<Duration, ArgError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(ArgError::ZeroTimeout(s.to_owned()));
    }
    Ok(d)
}

fn parse_count(name: &str, v: &str) -> Result<u64, ArgError> {
    v.parse().map_err(|_| ArgError::Count {
        fault: name.to_owned(),
        given: v.to_owned(),
    })
}

/// Parses `NAME[=VALUE]`.
pub fn parse_fault<'a>(s: &'a str) -> Result<Fault, ArgError> {
    let (name, value) = match s.split_once('=') {
        Some((n, v)) => (n, Some(v)),
        None => (s, None),
    };
    let need = |v: Option<&'a str>| v.ok_or_else(|| ArgError::NeedsValue(name.to_owned()));
    // A switch without a value: `Ok(fault)` when none was given.
    let bare = |fault: Fault, name: &'static str| match value {
        None => Ok(fault),
        Some(_) => Err(ArgError::TakesNoValue(name)),
    };
    match name {
        "delete-delay" => Ok(Fault::DeleteDelay(parse_duration(need(value)?)?)),
        "delete-fail" => Ok(Fault::DeleteFail(parse_count(name, need(value)?)?)),
        "delete-miss" => Ok(Fault::DeleteMiss(parse_count(name, need(value)?)?)),
        "list-lag" => Ok(Fault::ListLag(parse_duration(need(value)?)?)),
        "crash-after" => Ok(Fault::CrashAfter(parse_count(name, need(value)?)?)),
        "drop-record-answer" => Ok(Fault::DropRecordAnswer(parse_count(name, need(value)?)?)),
        "drop-exec-env" => bare(Fault::DropExecEnv, "drop-exec-env"),
        "log-credentials" => bare(Fault::LogCredentials, "log-credentials"),
        "keep-dirs-on-delete" => bare(Fault::KeepDirsOnDelete, "keep-dirs-on-delete"),
        "stale-file-reads" => bare(Fault::StaleFileReads, "stale-file-reads"),
        _ => Err(ArgError::UnknownFault(name.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse() {
        assert_eq!(
            parse_fault("delete-delay=250ms"),
            Ok(Fault::DeleteDelay(Duration::from_millis(250)))
        );
        assert_eq!(parse_fault("delete-fail=2"), Ok(Fault::DeleteFail(2)));
        assert_eq!(parse_fault("drop-exec-env"), Ok(Fault::DropExecEnv));
        assert_eq!(parse_fault("log-credentials"), Ok(Fault::LogCredentials));
        assert!(parse_fault("log-credentials=1").is_err());
        assert_eq!(parse_fault("stale-file-reads"), Ok(Fault::StaleFileReads));
        assert_eq!(
            parse_fault("drop-record-answer=1"),
            Ok(Fault::DropRecordAnswer(1))
        );
        assert!(parse_fault("drop-record-answer").is_err());
        assert_eq!(
            parse_fault("keep-dirs-on-delete"),
            Ok(Fault::KeepDirsOnDelete)
        );
        assert!(parse_fault("keep-dirs-on-delete=1").is_err());
        assert!(parse_fault("delete-fail").is_err());
        assert!(parse_fault("drop-exec-env=1").is_err());
        assert!(parse_fault("nope")
            .unwrap_err()
            .to_string()
            .contains("expected one of"));
        // The texts clap prints, as they were.
        assert_eq!(
            parse_fault("delete-fail=x").unwrap_err().to_string(),
            "fault `delete-fail` needs a non-negative integer, got \"x\""
        );
        assert_eq!(
            parse_fault("list-lag=1q").unwrap_err().to_string(),
            "invalid duration \"1q\": unknown time unit \"q\", supported units: ns, us/µs, ms, sec, min, hours, days, weeks, months, years (and few variations) (examples: 250ms, 2s, 5m)"
        );
        assert_eq!(
            parse_fault("delete-fail").unwrap_err().to_string(),
            "fault `delete-fail` needs a value: delete-fail=VALUE"
        );
        assert_eq!(
            parse_timeout("0s").unwrap_err().to_string(),
            "invalid timeout \"0s\": it must be longer than zero (examples: 500ms, 10s)"
        );
    }

    #[test]
    fn workers_parse() {
        assert_eq!(
            parse_worker("w-1=http://127.0.0.1:8081/"),
            Ok(WorkerSpec {
                name: "w-1".into(),
                url: "http://127.0.0.1:8081".into()
            })
        );
        assert!(parse_worker("http://x").is_err());
        assert!(parse_worker("W=http://x").is_err());
        assert!(parse_worker("w=ftp://x").is_err());
        assert_eq!(
            parse_worker("w=nope").unwrap_err().to_string(),
            "invalid worker URL \"nope\": relative URL without a base"
        );
    }
}
