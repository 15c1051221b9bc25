//! Witnesses: residue the product forgot. A sweep asks the product's own
//! listing, which cannot show what the product itself lost track of (a
//! half-deleted sandbox's directory, an orphaned disk). A witness
//! (`[witnesses.<name>]` of `testkit.toml`) looks at the layer below: a
//! command run on this machine, or a request to a debug listing. Each name
//! it reports that carries the run id is residue, which nothing here can
//! delete: it is named, never swept.
//!
//! A witness that could not look is never taken for one that found
//! nothing: it is [`WitnessOutcome::Failed`], and what is left below the
//! API is unknown.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::kind::{error_chain, Kinds};
use super::names::Naming;
use crate::config::WitnessSection;
use crate::pod::Pod;
use crate::template::{RequestTemplate, Values};

/// Where the pod's HOME is, for a witness that uses `{home}`.
#[derive(Debug, Clone)]
pub enum PodHome<'a> {
    /// On this machine, at this path: a pod the runner started as a process.
    Here(&'a Path),
    /// Not on this machine, or not known here; why, as a clause
    /// (`the pod is a container: its HOME is inside it`).
    Unknown(String),
}

/// What witnesses are checked against: the pod, the run, and where the
/// pod's HOME is.
pub struct WitnessSite<'a> {
    pod: &'a Pod,
    name_prefix: &'a str,
    run_id: &'a str,
    home: PodHome<'a>,
    public_fields: &'a [String],
    namings: Vec<Naming>,
    env: Vec<(String, OsString)>,
    dir: Option<&'a Path>,
}

impl<'a> WitnessSite<'a> {
    /// The run `run_id` (names `<name_prefix>-<run id>-…`) against `pod`,
    /// whose HOME is unknown until [`WitnessSite::home`] says.
    pub fn new(pod: &'a Pod, name_prefix: &'a str, run_id: &'a str) -> WitnessSite<'a> {
        WitnessSite {
            pod,
            name_prefix,
            run_id,
            home: PodHome::Unknown("the pod's HOME is not known here".to_owned()),
            public_fields: &[],
            namings: vec![Naming::default()],
            env: Vec::new(),
            dir: None,
        }
    }

    /// Where the pod's HOME is.
    pub fn home(mut self, home: PodHome<'a>) -> Self {
        self.home = home;
        self
    }

    /// The handle fields that are not secrets (`[pod] public_fields`): they
    /// are placeholders too.
    pub fn public_fields(mut self, fields: &'a [String]) -> Self {
        self.public_fields = fields;
        self
    }

    /// The suite's kinds: a name carries the run id in the alphabet of any
    /// of them (`_`-separated names too), as well as in the default one.
    pub fn namings_of(mut self, kinds: &Kinds) -> Self {
        for naming in kinds.iter().map(|k| k.naming()) {
            if !self.namings.contains(&naming) {
                self.namings.push(naming);
            }
        }
        self
    }

    /// More environment for a command witness (the run's, as its tests get).
    pub fn env(mut self, env: Vec<(String, OsString)>) -> Self {
        self.env = env;
        self
    }

    /// The directory a command witness runs in (the suite's).
    pub fn dir(mut self, dir: &'a Path) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Calls `f` with every placeholder a witness's `env` or `body` may
    /// use: those of [`Self::with_values`], and every handle field, its
    /// secrets too.
    fn with_secret_values<R>(&self, f: impl FnOnce(&Values<'_>) -> R) -> R {
        let port = self.pod.port().to_string();
        self.with_values(|public| {
            let handle = self.pod.handle();
            let values = handle.values(&port).extend(public.pairs().iter().copied());
            f(&values)
        })
    }

    /// Calls `f` with every placeholder a witness may use, filled.
    fn with_values<R>(&self, f: impl FnOnce(&Values<'_>) -> R) -> R {
        let handle = self.pod.handle();
        let port = self.pod.port().to_string();
        let prefix = Naming::default().run_prefix(self.name_prefix, self.run_id);
        let home = match &self.home {
            PodHome::Here(path) => Some(path.to_string_lossy().into_owned()),
            PodHome::Unknown(_) => None,
        };
        let mut values = Values::new()
            .with("name", handle.name())
            .with("base_url", handle.base_url())
            .with("port", &port)
            .with("run", self.run_id)
            .with("prefix", &prefix);
        if let Some(home) = &home {
            values = values.with("home", home);
        }
        for field in self.public_fields {
            if let Some(value) = handle.field(field) {
                values = values.with(field, value);
            }
        }
        f(&values)
    }

    /// Whether a line a witness reported names something of the run: a
    /// word of it (a path's last part, a name among others) is a name
    /// `<name_prefix>-<run id>-…` in one of the suite's alphabets.
    fn carries_run_id(&self, line: &str) -> bool {
        self.namings.iter().any(|naming| {
            let sep = naming.separator();
            line.split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == sep))
                .any(|word| {
                    // The name may follow a part of the word of its own
                    // (`disk-ct-run-…`): try from each separator on.
                    std::iter::once(word)
                        .chain(word.match_indices(sep).map(|(i, _)| &word[i + 1..]))
                        .any(|w| naming.carries_run_id(w, self.name_prefix, self.run_id))
                })
        })
    }
}

/// What one witness found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WitnessReport {
    /// Its name, from `[witnesses.<name>]`.
    pub witness: String,
    /// What it lists (`what`).
    pub what: String,
    /// What looking came to.
    pub outcome: WitnessOutcome,
}

/// What looking below the API came to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WitnessOutcome {
    /// It looked: how many names it listed, and those that carry the run id.
    Listed {
        /// Every name it reported.
        listed: usize,
        /// The names that carry the run id: residue.
        residue: Vec<String>,
    },
    /// It could not look (the command failed, the request was refused, the
    /// answer could not be read): what is left below the API is unknown.
    Failed(String),
    /// It cannot look at this pod (it needs the pod's HOME, and the pod's
    /// HOME is not on this machine): why.
    DoesNotApply(String),
}

impl WitnessReport {
    /// `sandbox directories (witness home-dirs)`: how messages name it.
    pub fn label(&self) -> String {
        format!("{} (witness {})", self.what, self.witness)
    }

    /// The names it found that carry the run id.
    pub fn residue(&self) -> &[String] {
        match &self.outcome {
            WitnessOutcome::Listed { residue, .. } => residue,
            _ => &[],
        }
    }

    /// Whether it could not look: what is left below the API is unknown.
    pub fn failed(&self) -> bool {
        matches!(self.outcome, WitnessOutcome::Failed(_))
    }

    /// One sentence for a verdict's evidence.
    pub fn summary(&self) -> String {
        let label = self.label();
        match &self.outcome {
            WitnessOutcome::Listed { listed, residue } if residue.is_empty() => {
                format!("{label}: {listed} listed, none carries the run id")
            }
            WitnessOutcome::Listed { listed, residue } => format!(
                "{label}: {} of the {listed} listed {} the run id below the API, where the \
                 product's own listing no longer shows {} and no sweep can delete {}: {}",
                residue.len(),
                if residue.len() == 1 {
                    "carries"
                } else {
                    "carry"
                },
                if residue.len() == 1 { "it" } else { "them" },
                if residue.len() == 1 { "it" } else { "them" },
                residue.join(", ")
            ),
            WitnessOutcome::Failed(why) => {
                format!("{label} could not look: {why}; what is left below the API is unknown")
            }
            WitnessOutcome::DoesNotApply(why) => format!("{label} does not apply: {why}"),
        }
    }
}

/// Checks every witness, in name order, one at a time (each within its
/// `timeout`).
pub async fn check_witnesses(
    witnesses: &BTreeMap<String, WitnessSection>,
    site: &WitnessSite<'_>,
) -> Vec<WitnessReport> {
    let mut reports = Vec::new();
    for (name, witness) in witnesses {
        reports.push(WitnessReport {
            witness: name.clone(),
            what: witness.what.clone(),
            outcome: check_one(witness, site).await,
        });
    }
    reports
}

async fn check_one(witness: &WitnessSection, site: &WitnessSite<'_>) -> WitnessOutcome {
    if witness.uses_home() {
        if let PodHome::Unknown(why) = &site.home {
            return WitnessOutcome::DoesNotApply(format!("it uses `{{home}}`, and {why}"));
        }
    }
    let listed = match (&witness.command, &witness.request) {
        (Some(command), _) => run_command(command, &witness.env, witness.timeout, site).await,
        (None, Some(request)) => {
            let names = witness.names.as_deref().unwrap_or_default();
            let body = witness.body.as_deref();
            send_request(request, body, names, witness.timeout, site).await
        }
        (None, None) => Err(LookFailed::Neither),
    };
    match listed {
        Ok(names) => {
            let listed = names.len();
            // A name reported twice (two processes in one directory) is one.
            let mut residue: Vec<String> = names
                .into_iter()
                .filter(|n| site.carries_run_id(n))
                .collect();
            residue.sort();
            residue.dedup();
            WitnessOutcome::Listed { listed, residue }
        }
        Err(why) => WitnessOutcome::Failed(why.to_string()),
    }
}

/// Why a witness could not look. Each is said in the residue verdict, so
/// each names what was run or sent (redacted) and, where it helps, what to
/// raise.
#[derive(Debug, thiserror::Error)]
enum LookFailed {
    #[error("it has neither `command` nor `request`")]
    Neither,
    #[error(transparent)]
    Template(#[from] crate::template::TemplateError),
    #[error("its command is empty")]
    EmptyCommand,
    #[error("`{shown}` could not be started: {cause}")]
    Start {
        shown: String,
        cause: std::io::Error,
    },
    #[error("`{shown}` did not finish within {} (raise the witness's `timeout`)", humantime::format_duration(*.timeout))]
    CommandTimeout { shown: String, timeout: Duration },
    #[error("`{shown}` failed ({status}): {stderr}")]
    CommandFailed {
        shown: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("`names` {0:?} is not a JSON pointer with one `/*`")]
    NamesPointer(String),
    /// The transport's error, its causes joined (reqwest's chain).
    #[error("{sent} failed: {chain}")]
    Send { sent: String, chain: String },
    #[error("{sent} was not answered within {} (raise the witness's `timeout`)", humantime::format_duration(*.timeout))]
    RequestTimeout { sent: String, timeout: Duration },
    #[error("{sent} answered {status}: {body}")]
    Status {
        sent: String,
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("{sent} answered something that is not JSON: {cause}")]
    NotJson {
        sent: String,
        cause: serde_json::Error,
    },
    #[error("{sent} answered JSON without an array at {array:?} (`names`)")]
    NoArray { sent: String, array: String },
    #[error("{sent} answered an item without a string at {field:?} (`names`)")]
    NoName { sent: String, field: String },
}

/// Runs the command, its placeholders filled; its stdout's non-empty lines.
async fn run_command(
    command: &[String],
    env: &BTreeMap<String, String>,
    timeout: Duration,
    site: &WitnessSite<'_>,
) -> Result<Vec<String>, LookFailed> {
    let args = command
        .iter()
        .map(|a| site.with_values(|v| crate::template::fill(a, v, crate::template::verbatim)))
        .collect::<Result<Vec<String>, crate::template::TemplateError>>()?;
    let env = env
        .iter()
        .map(|(k, t)| {
            site.with_secret_values(|v| crate::template::fill(t, v, crate::template::verbatim))
                .map(|v| (k.as_str(), v))
        })
        .collect::<Result<Vec<(&str, String)>, crate::template::TemplateError>>()?;
    let shown = crate::redact(&args.join(" ")).into_owned();
    let Some((program, rest)) = args.split_first() else {
        return Err(LookFailed::EmptyCommand);
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(rest)
        .envs(site.env.iter().map(|(k, v)| (k.as_str(), v.as_os_str())))
        .envs(env.iter().map(|(k, v)| (*k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = site.dir {
        cmd.current_dir(dir);
    }
    let output = match tokio::time::timeout(timeout, cmd.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(cause)) => return Err(LookFailed::Start { shown, cause }),
        Err(_) => return Err(LookFailed::CommandTimeout { shown, timeout }),
    };
    if !output.status.success() {
        return Err(LookFailed::CommandFailed {
            shown,
            status: output.status,
            stderr: shorten(&String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect())
}

/// Sends the request, with its body if any, with the pod's credential;
/// the names at `names`.
async fn send_request(
    request: &str,
    body: Option<&str>,
    names: &str,
    timeout: Duration,
    site: &WitnessSite<'_>,
) -> Result<Vec<String>, LookFailed> {
    let template = RequestTemplate::parse(request)?.with_body(body.map(str::to_owned));
    let body = site.with_secret_values(|v| template.render_body(v))?;
    let (array, field) = crate::template::split_item_pointer(names)
        .ok_or_else(|| LookFailed::NamesPointer(names.to_owned()))?;
    let path = site.with_values(|v| template.render_path(v))?;
    let sent = crate::redact(&format!("{} {path}", template.method())).into_owned();
    let url = site.pod.url(&path);
    let answer = async {
        let response = site
            .pod
            .send(|c| {
                let sent = c.request(template.method().clone(), &url).timeout(timeout);
                match &body {
                    Some(body) => sent
                        .header(
                            reqwest::header::CONTENT_TYPE,
                            crate::template::body_content_type(body),
                        )
                        .body(body.clone()),
                    None => sent,
                }
            })
            .await?;
        let status = response.status();
        Ok::<_, reqwest::Error>((status, response.text().await?))
    };
    let (status, body) = match tokio::time::timeout(timeout, answer).await {
        Ok(Ok(answer)) => answer,
        Ok(Err(e)) => {
            return Err(LookFailed::Send {
                sent,
                chain: error_chain(&e),
            })
        }
        Err(_) => return Err(LookFailed::RequestTimeout { sent, timeout }),
    };
    if !status.is_success() {
        return Err(LookFailed::Status {
            sent,
            status,
            body: shorten(&body),
        });
    }
    let json: serde_json::Value = match serde_json::from_str(&body) {
        Ok(json) => json,
        Err(cause) => return Err(LookFailed::NotJson { sent, cause }),
    };
    let Some(items) = json.pointer(&array).and_then(|a| a.as_array()) else {
        return Err(LookFailed::NoArray { sent, array });
    };
    items
        .iter()
        .map(|item| {
            item.pointer(&field)
                .and_then(|n| n.as_str())
                .map(str::to_owned)
                .ok_or_else(|| LookFailed::NoName {
                    sent: sent.clone(),
                    field: field.clone(),
                })
        })
        .collect()
}

/// `text` trimmed and cut at 300 bytes, redacted.
fn shorten(text: &str) -> String {
    let text = crate::redact(text.trim()).into_owned();
    if text.len() <= 300 {
        return text;
    }
    let mut end = 300;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SuiteConfig;

    fn witnesses(text: &str) -> BTreeMap<String, WitnessSection> {
        SuiteConfig::parse(text, Path::new("/s/testkit.toml"))
            .unwrap()
            .witnesses
    }

    /// A sandboxd with `args`, the default config, and its handle.
    fn sandboxd(args: &[&str]) -> (test_support::Sandboxd, SuiteConfig, crate::pod::PodHandle) {
        let sandboxd = test_support::Sandboxd::start(args);
        let config = SuiteConfig::default();
        let handle = crate::pod::PodHandle::parse(
            sandboxd.handle_json(),
            &crate::pod::HandlePolicy::from_suite(&config),
        )
        .unwrap();
        (sandboxd, config, handle)
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// A sandbox the product forgot (fault `keep-dirs-on-delete`) is named
    /// by a witness that lists HOME; a name of another run, or of none, is
    /// not; the product's own listing (a request witness) no longer shows it.
    #[test]
    fn a_witness_names_what_the_product_forgot_and_nothing_of_other_runs() {
        let (sandboxd, config, handle) = sandboxd(&["--fault", "keep-dirs-on-delete"]);
        let ours = "ct-wit1-abcdef-01";
        let theirs = ["ct-wit1x-abcdef-01", "disk-of-ct-wit1", "other"];
        let found = witnesses(
            r#"
            [witnesses.home-dirs]
            what = "sandbox directories"
            command = ["ls", "{home}/sandboxes"]
            [witnesses.listing]
            what = "listed sandboxes"
            request = "GET /api/sandboxes?prefix={prefix}&limit=1000"
            names = "/items/*/name"
            [witnesses.broken]
            what = "things"
            command = ["sh", "-c", "echo {prefix}zz-01; echo no such place >&2; exit 3"]
            "#,
        );
        block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            let client = pod.client();
            for name in std::iter::once(ours).chain(theirs) {
                let r = client
                    .post(pod.url("/api/sandboxes"))
                    .json(&serde_json::json!({ "name": name }))
                    .send()
                    .await
                    .unwrap();
                assert!(r.status().is_success(), "{name}: {}", r.status());
            }
            let r = client
                .delete(pod.url(&format!("/api/sandboxes/{ours}")))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            let gone = async {
                while client
                    .get(pod.url(&format!("/api/sandboxes/{ours}")))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    != 404
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            };
            tokio::time::timeout(Duration::from_secs(10), gone)
                .await
                .unwrap();
            let site = WitnessSite::new(&pod, "ct", "wit1").home(PodHome::Here(sandboxd.home()));
            let reports = check_witnesses(&found, &site).await;
            let by = |w: &str| reports.iter().find(|r| r.witness == w).unwrap();
            let home = by("home-dirs");
            assert_eq!(home.residue(), [ours], "{home:?}");
            assert_eq!(
                home.summary(),
                format!(
                    "sandbox directories (witness home-dirs): 1 of the 4 listed carries the run id \
                     below the API, where the product's own listing no longer shows it and no \
                     sweep can delete it: {ours}"
                )
            );
            assert_eq!(
                by("listing").outcome,
                WitnessOutcome::Listed {
                    listed: 0,
                    residue: vec![]
                }
            );
            let broken = by("broken");
            assert!(broken.failed(), "{broken:?}");
            let said = broken.summary();
            assert!(
                said.contains("exit status: 3")
                    && said.contains("no such place")
                    && said.ends_with("what is left below the API is unknown"),
                "{said}"
            );
            // Without the pod's HOME, a witness that needs it says so, and
            // one that does not still looks.
            let elsewhere = WitnessSite::new(&pod, "ct", "wit1")
                .home(PodHome::Unknown("the pod is a container".to_owned()));
            let reports = check_witnesses(&found, &elsewhere).await;
            assert_eq!(
                reports[1].summary(),
                "sandbox directories (witness home-dirs) does not apply: it uses `{home}`, \
                 and the pod is a container"
            );
            assert!(matches!(reports[2].outcome, WitnessOutcome::Listed { .. }));
        });
    }

    /// A witness that needs a secret gets it without `jq` reading
    /// `$TESTKIT_POD_HANDLE`: a command in its `env` (here the product's
    /// CLI, given the pod's token, lists what the run left), a request in
    /// its `body` (a `POST` query to a loopback server that answers only
    /// when the body carries the handle's password).
    #[test]
    fn a_witness_gets_secret_fields_in_its_env_and_a_post_body() {
        let (_sandboxd, config, handle) = sandboxd(&[]);
        let ours = "ct-wit3-abcdef-01";
        let cli = witnesses(&format!(
            r#"
            [witnesses.cli]
            what = "sandboxes the CLI lists"
            command = ["{}", "sandbox", "list", "--prefix", "{{prefix}}"]
            env = {{ SANDBOXD_URL = "{{base_url}}", SANDBOXD_TOKEN = "{{token}}" }}
            "#,
            test_support::sandboxctl_bin().display()
        ));
        block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            let r = pod
                .client()
                .post(pod.url("/api/sandboxes"))
                .json(&serde_json::json!({ "name": ours }))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success(), "{}", r.status());
            let site = WitnessSite::new(&pod, "ct", "wit3");
            let reports = check_witnesses(&cli, &site).await;
            // A line of the CLI's table, which names it.
            let residue = reports[0].residue();
            assert!(
                residue.len() == 1 && residue[0].starts_with(ours),
                "{:?}",
                reports[0]
            );
        });

        // A query service: POST /query with the password in the body.
        let password = "pw-7f3a9c2e1b";
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            use std::io::Write;
            let (mut conn, _) = listener.accept().unwrap();
            let (head, body) = test_support::http::read_request(&mut conn);
            let text = format!("{head}\r\n\r\n{body}");
            let answer = if text.starts_with("POST /query ")
                && text.contains(&format!("\"auth\": \"{password}\""))
                && text.contains("run = 'wit4'")
            {
                "{\"rows\": [{\"name\": \"ct-wit4-abcdef-01\"}, {\"name\": \"other\"}]}"
            } else {
                "{\"error\": \"unauthorized\"}"
            };
            let status = if answer.contains("rows") {
                "200 OK"
            } else {
                "401 Unauthorized"
            };
            write!(
                conn,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            )
            .unwrap();
            text
        });
        let config =
            SuiteConfig::parse("[auth]\nsend = \"none\"\n", Path::new("/s/testkit.toml")).unwrap();
        let handle = crate::pod::PodHandle::parse(
            &serde_json::json!({
                "name": "query-svc",
                "base_url": format!("http://127.0.0.1:{port}"),
                "port": port,
                "password": password,
            })
            .to_string(),
            &crate::pod::HandlePolicy::from_suite(&config),
        )
        .unwrap();
        let query = witnesses(
            r#"
            [witnesses.rows]
            what = "rows"
            request = "POST /query"
            body = '''{"q": "SELECT name FROM t WHERE run = '{run}'", "auth": "{password}"}'''
            names = "/rows/*/name"
            "#,
        );
        block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            let site = WitnessSite::new(&pod, "ct", "wit4");
            let reports = check_witnesses(&query, &site).await;
            assert_eq!(
                reports[0].residue(),
                ["ct-wit4-abcdef-01"],
                "{:?}",
                reports[0]
            );
        });
        let request = server.join().unwrap();
        assert!(request.contains("application/json"), "{request}");
    }

    #[test]
    fn a_witness_that_does_not_finish_in_time_could_not_look() {
        let (_sandboxd, config, handle) = sandboxd(&[]);
        let slow = witnesses(
            "[witnesses.slow]\nwhat = \"disks\"\ncommand = [\"sleep\", \"5\"]\ntimeout = \"200ms\"\n",
        );
        block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            let site = WitnessSite::new(&pod, "ct", "wit2");
            let started = std::time::Instant::now();
            let reports = check_witnesses(&slow, &site).await;
            assert!(started.elapsed() < Duration::from_secs(3));
            assert_eq!(
                reports[0].outcome,
                WitnessOutcome::Failed(
                    "`sleep 5` did not finish within 200ms (raise the witness's `timeout`)"
                        .to_owned()
                )
            );
        });
    }
}
