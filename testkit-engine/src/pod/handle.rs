//! The pod handle: the JSON that says where a pod is and how to authenticate,
//! validated field by field before anything uses it.
//!
//! After [`PodHandle::parse`] nothing reads the raw JSON again: the handle
//! keeps one canonical form rebuilt from the validated fields.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use serde_json::{Map, Value};

/// The characters a generated token may contain.
pub const TOKEN_ALPHABET: &str = "A-Z a-z 0-9 - _ . ~ + / =";

/// What a handle may point at and must carry, from the suite's config. The
/// default allows loopback only and requires a token.
#[derive(Debug, Clone)]
pub struct HandlePolicy {
    /// Host names allowed besides loopback (compared case-insensitively).
    pub allow_remote_hosts: Vec<String>,
    /// `host:port` endpoints refused whatever else is right.
    pub protected: Vec<String>,
    /// Whether the handle must carry a `token` (the suite's auth sends
    /// one); without, a token is optional.
    pub token_required: bool,
    /// Fields that are not secrets; every other extra field is one.
    pub public_fields: Vec<String>,
}

impl Default for HandlePolicy {
    fn default() -> HandlePolicy {
        HandlePolicy {
            allow_remote_hosts: Vec::new(),
            protected: Vec::new(),
            token_required: true,
            public_fields: Vec::new(),
        }
    }
}

impl HandlePolicy {
    /// The policy of a suite's `[pod]` section.
    pub fn from_config(pod: &crate::config::PodSection) -> HandlePolicy {
        HandlePolicy {
            allow_remote_hosts: pod.allow_remote_hosts.clone(),
            protected: pod.protected.clone(),
            token_required: true,
            public_fields: pod.public_fields.clone(),
        }
    }

    /// The policy of a whole suite config: `[pod]`, and whether `[auth]`
    /// needs a token.
    pub fn from_suite(config: &crate::config::SuiteConfig) -> HandlePolicy {
        HandlePolicy {
            token_required: config.auth.needs_token(),
            ..HandlePolicy::from_config(&config.pod)
        }
    }
}

/// Whether testkit reads the handle field `key` itself (the template's
/// [`FILLED_FIELDS`](crate::template::FILLED_FIELDS)
/// and the token); any other string field is an extra (`user`,
/// `password`, a second endpoint…).
fn is_known_field(key: &str) -> bool {
    key == "token"
        || key == "cluster"
        || key == "machine"
        || key == "process"
        || key == "container"
        || crate::template::FILLED_FIELDS.contains(&key)
}

/// A handle that cannot be used: which field, and what is wrong with it.
/// The message never contains the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pod handle: {}{problem}", field.map(|f| format!("`{f}` ")).unwrap_or_default())]
pub struct HandleError {
    field: Option<&'static str>,
    problem: String,
}

impl HandleError {
    fn field(field: &'static str, problem: impl Into<String>) -> HandleError {
        HandleError {
            field: Some(field),
            problem: problem.into(),
        }
    }

    /// The field at fault, when one is.
    pub fn field_name(&self) -> Option<&'static str> {
        self.field
    }

    /// What is wrong.
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

/// A validated pod handle. Its `Debug` never shows the token.
#[derive(Clone, PartialEq, Eq)]
pub struct PodHandle {
    name: String,
    scheme: &'static str,
    host: String,
    port: u16,
    base_url: String,
    token: Option<String>,
    capabilities: Option<Vec<String>>,
    health: Option<String>,
    /// Extra string fields, with whether each is public.
    extras: BTreeMap<String, (String, bool)>,
    /// The nodes of a pod of several.
    cluster: Option<super::cluster::ClusterInfo>,
    /// How a machine pod's faults reach its QEMU and its guest.
    machine: Option<crate::machine::MachineAccess>,
    /// The process group of a pod that is one.
    process: Option<super::process::PodProcess>,
    /// The pod's container, when it is one (a pod of several is `cluster`).
    container: Option<super::container::PodContainer>,
}

impl PodHandle {
    /// Parses and validates a handle's JSON.
    pub fn parse(json: &str, policy: &HandlePolicy) -> Result<PodHandle, HandleError> {
        let value: Value = serde_json::from_str(json).map_err(|e| HandleError {
            field: None,
            // serde_json's message names a position, never the content.
            problem: format!("not valid JSON: {e}"),
        })?;
        let Value::Object(obj) = value else {
            return Err(HandleError {
                field: None,
                problem: "expected a JSON object".to_owned(),
            });
        };
        PodHandle::from_object(&obj, policy)
    }

    fn from_object(
        obj: &Map<String, Value>,
        policy: &HandlePolicy,
    ) -> Result<PodHandle, HandleError> {
        let name = name_field(obj)?;
        let url = parse_base_url(base_url_field(obj)?, policy)?;
        let port = port_field(obj, &url)?;
        let token = token_field(obj, policy)?;
        let extras = extra_fields(obj, policy)?;
        let capabilities = capabilities_field(obj)?;
        let health = health_field(obj)?;
        let cluster = cluster_field(obj, policy)?;
        let machine = machine_field(obj)?;
        let process = process_field(obj)?;
        let container = container_field(obj)?;
        Ok(PodHandle {
            name,
            scheme: url.scheme,
            base_url: format!("{}://{}:{}", url.scheme, url.host, url.port),
            host: url.host,
            port,
            token,
            capabilities,
            health,
            extras,
            cluster,
            machine,
            process,
            container,
        })
    }

    /// The same handle, of a pod made of the nodes `cluster` names.
    pub(crate) fn with_cluster(mut self, cluster: super::cluster::ClusterInfo) -> PodHandle {
        self.cluster = Some(cluster);
        self
    }

    /// The same handle, of a machine pod reached by `access`.
    pub(crate) fn with_machine(mut self, access: crate::machine::MachineAccess) -> PodHandle {
        self.machine = Some(access);
        self
    }

    /// The same handle, of a pod that is the process group `process`.
    pub(crate) fn with_process(mut self, process: super::process::PodProcess) -> PodHandle {
        self.process = Some(process);
        self
    }

    /// The same handle, of a pod that is the one container `container`.
    pub(crate) fn with_container(mut self, container: super::container::PodContainer) -> PodHandle {
        self.container = Some(container);
        self
    }

    /// The same handle, after the folder `from` that held the pod's logs
    /// was moved to `to`: the paths it names under `from` now lie under
    /// `to`.
    pub fn with_folder_moved(&self, from: &std::path::Path, to: &std::path::Path) -> PodHandle {
        let mut moved = self.clone();
        if let Some(process) = &mut moved.process {
            if let Ok(rest) = process.log.strip_prefix(from) {
                process.log = to.join(rest);
            }
        }
        moved
    }

    /// The pod's state and last `lines` lines, as a hang report gives
    /// them: of its process group, its container, its machine or each of
    /// its nodes, whichever the handle names, each part on lines of its
    /// own after a newline. What the container engine or QEMU does not
    /// say within `bound` is named as unanswered: the report of a hang
    /// must not hang. Empty when the handle names none of them. Not
    /// redacted.
    pub async fn describe(&self, lines: usize, bound: std::time::Duration) -> String {
        let mut out = String::new();
        if let Some(process) = &self.process {
            // Files and /proc, read on a thread of their own: a read that
            // blocks must not hold a worker of the runtime, whose timers
            // (the tests' timeouts among them) it drives.
            let process = process.clone();
            let said = async move {
                tokio::task::spawn_blocking(move || process.describe(lines))
                    .await
                    .unwrap_or_else(|e| format!("the pod's state could not be read: {e}"))
            };
            out.push_str(&within(said, "the pod's state: its process group and log", bound).await);
        }
        if let Some(container) = &self.container {
            let said = container.describe(lines);
            out.push_str(&within(said, "the pod's state: the container engine", bound).await);
        }
        if let Some(machine) = &self.machine {
            let said = machine.describe(lines);
            out.push_str(&within(said, "the machine's state: QEMU", bound).await);
        }
        if let Some(cluster) = &self.cluster {
            let said = async { cluster.describe_nodes(lines).await.join("\n  ") };
            out.push_str(&within(said, "the nodes' states: the container engine", bound).await);
        }
        out
    }

    /// The pod's container, when it is one container (not a cluster).
    pub fn container(&self) -> Option<&super::container::PodContainer> {
        self.container.as_ref()
    }

    /// The pod's process group, when it is one on this host.
    pub fn process(&self) -> Option<&super::process::PodProcess> {
        self.process.as_ref()
    }

    /// How to reach a machine pod's QEMU and guest, when it is one.
    pub fn machine(&self) -> Option<&crate::machine::MachineAccess> {
        self.machine.as_ref()
    }

    /// The nodes, when the pod is made of several.
    pub fn cluster(&self) -> Option<&super::cluster::ClusterInfo> {
        self.cluster.as_ref()
    }

    /// An extra field (`user`, `password`…), or a known one by name.
    pub fn field(&self, key: &str) -> Option<&str> {
        match key {
            "name" => Some(&self.name),
            "base_url" => Some(&self.base_url),
            "token" => self.token.as_deref(),
            _ => self.extras.get(key).map(|(v, _)| v.as_str()),
        }
    }

    /// Registers the token and every secret field for redaction.
    pub fn register_secrets(&self) {
        if let Some(t) = &self.token {
            crate::register_secret(t);
        }
        for (value, public) in self.extras.values() {
            if !public {
                crate::register_secret(value);
            }
        }
    }

    /// Every field as a placeholder value: `{name}`, `{base_url}`, `{port}`,
    /// `{token}` (when there is one) and each extra. `port` is its text.
    pub fn values<'a>(&'a self, port: &'a str) -> crate::template::Values<'a> {
        let mut values = crate::template::Values::new()
            .with("name", &self.name)
            .with("base_url", &self.base_url)
            .with("port", port);
        if let Some(t) = &self.token {
            values = values.with("token", t);
        }
        values.extend(
            self.extras
                .iter()
                .map(|(k, (v, _))| (k.as_str(), v.as_str())),
        )
    }

    /// The pod's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `scheme://host:port`, canonical.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The host of `base_url`: lowercase, IPv6 in brackets.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.scheme
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The token (empty when the handle has none): a secret. Register it
    /// before anything could print it.
    pub fn token(&self) -> &str {
        self.token.as_deref().unwrap_or("")
    }

    /// The capabilities the handle declares, if it declares any.
    pub fn capabilities(&self) -> Option<&[String]> {
        self.capabilities.as_deref()
    }

    /// The health path the handle declares, if any.
    pub fn health(&self) -> Option<&str> {
        self.health.as_deref()
    }

    /// The canonical JSON of the handle, token included: write it only to
    /// files of mode 0600 ([`PodHandle::write_file`]).
    pub fn to_json(&self) -> String {
        let mut obj = Map::new();
        obj.insert("name".into(), Value::from(self.name.clone()));
        obj.insert("base_url".into(), Value::from(self.base_url.clone()));
        obj.insert("port".into(), Value::from(self.port));
        if let Some(t) = &self.token {
            obj.insert("token".into(), Value::from(t.clone()));
        }
        for (k, (v, _)) in &self.extras {
            obj.insert(k.clone(), Value::from(v.clone()));
        }
        if let Some(caps) = &self.capabilities {
            obj.insert("capabilities".into(), Value::from(caps.clone()));
        }
        if let Some(h) = &self.health {
            obj.insert("health".into(), Value::from(h.clone()));
        }
        if let Some(c) = &self.cluster {
            obj.insert(
                "cluster".into(),
                serde_json::to_value(c).expect("plain data"),
            );
        }
        if let Some(m) = &self.machine {
            obj.insert(
                "machine".into(),
                serde_json::to_value(m).expect("plain data"),
            );
        }
        if let Some(p) = &self.process {
            obj.insert(
                "process".into(),
                serde_json::to_value(p).expect("plain data"),
            );
        }
        if let Some(c) = &self.container {
            obj.insert(
                "container".into(),
                serde_json::to_value(c).expect("plain data"),
            );
        }
        Value::Object(obj).to_string()
    }

    /// The handle's JSON with the token and every secret field replaced by
    /// `[REDACTED]`: what a results folder may hold.
    pub fn to_redacted_json(&self) -> String {
        let mut value: Value = serde_json::from_str(&self.to_json()).expect("our own JSON");
        if let Some(obj) = value.as_object_mut() {
            if obj.contains_key("token") {
                obj.insert("token".into(), Value::from(crate::REDACTED));
            }
            for (k, (_, public)) in &self.extras {
                if !public {
                    obj.insert(k.clone(), Value::from(crate::REDACTED));
                }
            }
        }
        value.to_string()
    }

    /// Writes [`PodHandle::to_json`] to `path` with mode 0600, atomically.
    pub fn write_file(&self, path: &std::path::Path) -> std::io::Result<()> {
        crate::files::write_private(path, self.to_json().as_bytes())
    }
}

impl fmt::Debug for PodHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PodHandle")
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("port", &self.port)
            .field("token", &crate::REDACTED)
            .field("capabilities", &self.capabilities)
            .field("extra_fields", &self.extras.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// `name`: a non-empty string without control characters.
fn name_field(obj: &Map<String, Value>) -> Result<String, HandleError> {
    match obj.get("name") {
        Some(Value::String(s)) if s.trim().is_empty() => {
            Err(HandleError::field("name", "is empty"))
        }
        Some(Value::String(s)) if s.chars().any(char::is_control) => {
            Err(HandleError::field("name", "contains control characters"))
        }
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(HandleError::field(
            "name",
            format!("must be a string, not {}", kind(other)),
        )),
        None => Err(HandleError::field("name", "is missing")),
    }
}

/// `base_url` as written, for [`parse_base_url`] to check.
fn base_url_field(obj: &Map<String, Value>) -> Result<&str, HandleError> {
    match obj.get("base_url") {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(other) => Err(HandleError::field(
            "base_url",
            format!("must be a string, not {}", kind(other)),
        )),
        None => Err(HandleError::field("base_url", "is missing")),
    }
}

/// `port`: a JSON integer from 1 to 65535, the port `base_url` says.
fn port_field(obj: &Map<String, Value>, url: &BaseUrl) -> Result<u16, HandleError> {
    let port = match obj.get("port") {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(p) if (1..=65535).contains(&p) => p as u16,
            Some(p) => {
                return Err(HandleError::field(
                    "port",
                    format!("is {p}: expected 1 to 65535"),
                ))
            }
            None => {
                return Err(HandleError::field(
                    "port",
                    format!("is {n}: expected a decimal integer from 1 to 65535"),
                ))
            }
        },
        Some(other) => {
            return Err(HandleError::field(
                "port",
                format!(
                    "must be a JSON integer from 1 to 65535, not {}",
                    kind(other)
                ),
            ))
        }
        None => return Err(HandleError::field("port", "is missing")),
    };
    if port != url.port {
        return Err(HandleError::field(
            "port",
            format!(
                "is {port} but `base_url` says port {}: they must agree",
                url.port
            ),
        ));
    }
    Ok(port)
}

/// `token`: a non-empty string of the token alphabet; missing only where
/// the policy does not require one.
fn token_field(
    obj: &Map<String, Value>,
    policy: &HandlePolicy,
) -> Result<Option<String>, HandleError> {
    match obj.get("token") {
        Some(Value::String(s)) if s.is_empty() => Err(HandleError::field("token", "is empty")),
        Some(Value::String(s)) => {
            if let Some(pos) = s.chars().position(|c| !is_token_char(c)) {
                return Err(HandleError::field(
                    "token",
                    format!(
                        "has a character outside the token alphabet ({TOKEN_ALPHABET}) at position {}",
                        pos + 1
                    ),
                ));
            }
            Ok(Some(s.clone()))
        }
        Some(other) => Err(HandleError::field(
            "token",
            format!("must be a string, not {}", kind(other)),
        )),
        None if policy.token_required => Err(HandleError::field(
            "token",
            "is missing (the suite's [auth] sends one; give the handle a token, \
             or describe the service's auth in testkit.toml)",
        )),
        None => Ok(None),
    }
}

/// Every field testkit does not read itself: a string under a placeholder
/// name, with whether the policy calls it public.
fn extra_fields(
    obj: &Map<String, Value>,
    policy: &HandlePolicy,
) -> Result<BTreeMap<String, (String, bool)>, HandleError> {
    let mut extras = BTreeMap::new();
    for (key, value) in obj {
        if is_known_field(key) {
            continue;
        }
        if !crate::template::is_placeholder_name(key) {
            return Err(HandleError {
                field: None,
                problem: format!(
                    "field {key:?} is not a valid name: extra fields are named with a-z, 0-9 and `_` (they become `{{placeholders}}`)"
                ),
            });
        }
        match value {
            Value::String(s) if !s.chars().any(char::is_control) => {
                let public = policy.public_fields.iter().any(|p| p == key);
                extras.insert(key.clone(), (s.clone(), public));
            }
            Value::String(_) => {
                return Err(HandleError {
                    field: None,
                    problem: format!("field `{key}` contains control characters"),
                })
            }
            other => {
                return Err(HandleError {
                    field: None,
                    problem: format!(
                        "field `{key}` must be a string, not {}: extra fields are strings",
                        kind(other)
                    ),
                })
            }
        }
    }
    Ok(extras)
}

/// `cluster`, when given: the nodes of a pod of several, each base URL
/// held to the policy as the pod's own is.
fn cluster_field(
    obj: &Map<String, Value>,
    policy: &HandlePolicy,
) -> Result<Option<super::cluster::ClusterInfo>, HandleError> {
    let Some(value) = obj.get("cluster").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let mut info: super::cluster::ClusterInfo =
        serde_json::from_value(value.clone()).map_err(|e| {
            HandleError::field("cluster", format!("is not a cluster's description: {e}"))
        })?;
    for (name, node) in &mut info.nodes {
        let url = parse_base_url(&node.base_url, policy).map_err(|e| {
            HandleError::field(
                "cluster",
                format!("node `{name}`: base_url {}", e.problem()),
            )
        })?;
        node.base_url = format!("{}://{}:{}", url.scheme, url.host, url.port);
    }
    if !info.nodes.contains_key(&info.entry) {
        return Err(HandleError::field(
            "cluster",
            format!(
                "names entry `{}`, which is not one of its nodes",
                info.entry
            ),
        ));
    }
    Ok(Some(info))
}

/// `machine`, when given: how a machine pod's faults reach it, its run
/// directory an absolute path.
fn machine_field(
    obj: &Map<String, Value>,
) -> Result<Option<crate::machine::MachineAccess>, HandleError> {
    let Some(value) = obj.get("machine").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let access: crate::machine::MachineAccess = serde_json::from_value(value.clone())
        .map_err(|e| HandleError::field("machine", format!("is not a machine's access: {e}")))?;
    if !access.run_dir.is_absolute() {
        return Err(HandleError::field(
            "machine",
            format!(
                "run_dir {} is not an absolute path",
                access.run_dir.display()
            ),
        ));
    }
    Ok(Some(access))
}

/// `process`, when given: the pod's process group, its log an absolute
/// path.
fn process_field(
    obj: &Map<String, Value>,
) -> Result<Option<super::process::PodProcess>, HandleError> {
    let Some(value) = obj.get("process").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let process: super::process::PodProcess =
        serde_json::from_value(value.clone()).map_err(|e| {
            HandleError::field(
                "process",
                format!("is not a process group's description (pgid, start_ticks, log): {e}"),
            )
        })?;
    if process.pgid <= 1 || !process.log.is_absolute() {
        return Err(HandleError::field(
            "process",
            format!(
                "pgid {} and log {}: give a group id above 1 and an absolute path",
                process.pgid,
                process.log.display()
            ),
        ));
    }
    Ok(Some(process))
}

/// `container`, when given: the pod's one container, found by its pod
/// label.
fn container_field(
    obj: &Map<String, Value>,
) -> Result<Option<super::container::PodContainer>, HandleError> {
    let Some(value) = obj.get("container").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let container: super::container::PodContainer =
        serde_json::from_value(value.clone()).map_err(|e| {
            HandleError::field(
                "container",
                format!("is not a container's description (pod_id, docker): {e}"),
            )
        })?;
    if container.pod_id.is_empty() {
        return Err(HandleError::field(
            "container",
            "pod_id is empty: give the pod's label value",
        ));
    }
    Ok(Some(container))
}

/// `capabilities`, when given: an array of non-empty strings without
/// whitespace.
fn capabilities_field(obj: &Map<String, Value>) -> Result<Option<Vec<String>>, HandleError> {
    match obj.get("capabilities") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            let mut caps = Vec::with_capacity(items.len());
            for item in items {
                match item {
                    Value::String(s)
                        if !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic()) =>
                    {
                        caps.push(s.clone())
                    }
                    _ => {
                        return Err(HandleError::field(
                            "capabilities",
                            "must be an array of non-empty strings without whitespace",
                        ))
                    }
                }
            }
            Ok(Some(caps))
        }
        Some(other) => Err(HandleError::field(
            "capabilities",
            format!("must be an array, not {}", kind(other)),
        )),
    }
}

/// `health`, when given: a path on the pod.
fn health_field(obj: &Map<String, Value>) -> Result<Option<String>, HandleError> {
    match obj.get("health") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.starts_with('/') && s.chars().all(|c| c.is_ascii_graphic()) => {
            Ok(Some(s.clone()))
        }
        Some(_) => Err(HandleError::field(
            "health",
            "must be a path on the pod starting with `/`, without whitespace",
        )),
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~' | '+' | '/' | '=')
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

struct BaseUrl {
    scheme: &'static str,
    host: String,
    port: u16,
}

/// Validates `base_url` by hand rather than with a URL parser, because a
/// parser normalises away what must be refused (a default port written out,
/// `user@`, a trailing path).
fn parse_base_url(raw: &str, policy: &HandlePolicy) -> Result<BaseUrl, HandleError> {
    let err = base_url_error;
    if raw.is_empty() {
        return Err(err("is empty".to_owned()));
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err("contains whitespace or control characters".to_owned()));
    }
    let (scheme, rest) = split_scheme(raw)?;
    let authority = authority_of(rest)?;
    let (host, port) = split_host_port(raw, authority)?;
    if host.is_empty() {
        return Err(err("has no host".to_owned()));
    }
    let port = parse_port(port)?;
    check_host_allowed(&host, policy)?;
    let endpoint = format!("{host}:{port}");
    if policy
        .protected
        .iter()
        .any(|p| p.eq_ignore_ascii_case(&endpoint))
    {
        return Err(err(format!(
            "points at {endpoint}, which `[pod] protected` of testkit.toml forbids"
        )));
    }
    Ok(BaseUrl { scheme, host, port })
}

/// What is wrong with `base_url`.
fn base_url_error(problem: String) -> HandleError {
    HandleError::field("base_url", problem)
}

/// The scheme (`http` or `https`, lowercase) and what follows `://`.
fn split_scheme(raw: &str) -> Result<(&'static str, &str), HandleError> {
    let err = base_url_error;
    match raw.split_once("://") {
        Some((s, rest)) if s.eq_ignore_ascii_case("http") => Ok(("http", rest)),
        Some((s, rest)) if s.eq_ignore_ascii_case("https") => Ok(("https", rest)),
        Some((s, _)) => Err(err(format!("has scheme {s:?}: expected http or https"))),
        None => Err(err(
            "is not a URL: expected http://HOST:PORT or https://HOST:PORT".to_owned(),
        )),
    }
}

/// The authority (`host:port`) of what follows the scheme, which must hold
/// neither credentials nor anything past a `/`.
fn authority_of(rest: &str) -> Result<&str, HandleError> {
    let err = base_url_error;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if authority.contains('@') {
        // Never echo the URL: it holds credentials.
        return Err(err(
            "contains credentials (`user@` or `user:password@`): put the secret in `token`"
                .to_owned(),
        ));
    }
    if !(tail.is_empty() || tail == "/") {
        return Err(err(format!(
            "has a path, query or fragment ({tail:?}): expected only scheme, host and port"
        )));
    }
    Ok(authority)
}

/// The host of `authority` (lowercase, IPv6 in brackets) and its port as
/// written, which must be there.
fn split_host_port<'a>(raw: &str, authority: &'a str) -> Result<(String, &'a str), HandleError> {
    let err = base_url_error;
    if let Some(after_bracket) = authority.strip_prefix('[') {
        let Some((inside, after)) = after_bracket.split_once(']') else {
            return Err(err("has an unclosed `[` in its host".to_owned()));
        };
        let ip: std::net::Ipv6Addr = inside
            .parse()
            .map_err(|_| err(format!("has an invalid IPv6 host [{inside}]")))?;
        let Some(port) = after.strip_prefix(':') else {
            return Err(err(format!(
                "{raw:?} has no explicit port: write it out, e.g. http://[::1]:8080"
            )));
        };
        Ok((format!("[{ip}]"), port))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => Ok((h.to_ascii_lowercase(), p)),
            None => Err(err(format!(
                "{raw:?} has no explicit port: write it out, e.g. http://127.0.0.1:8080"
            ))),
        }
    }
}

/// The port of `base_url`, written canonically: decimal, no leading zero.
fn parse_port(port: &str) -> Result<u16, HandleError> {
    let canonical_port =
        !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !port.starts_with('0');
    match port.parse::<u32>() {
        Ok(p) if canonical_port && (1..=65535).contains(&p) => Ok(p as u16),
        _ => Err(base_url_error(format!(
            "has port {port:?}: expected a decimal integer from 1 to 65535"
        ))),
    }
}

/// A valid host that is loopback, or one `[pod] allow_remote_hosts` lists.
fn check_host_allowed(host: &str, policy: &HandlePolicy) -> Result<(), HandleError> {
    let err = base_url_error;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => {
            if !bare
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
            {
                return Err(err(format!("has an invalid host {host:?}")));
            }
            host == "localhost"
        }
    };
    if !loopback
        && !policy
            .allow_remote_hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    {
        return Err(err(format!(
            "has host {host:?}, which is not loopback: list it in `[pod] allow_remote_hosts` of testkit.toml to allow it"
        )));
    }
    Ok(())
}

/// What `said` says, as a paragraph of [`PodHandle::describe`], if it is
/// said within `bound`; else that `who` did not answer.
async fn within(
    said: impl std::future::Future<Output = String>,
    who: &str,
    bound: std::time::Duration,
) -> String {
    match tokio::time::timeout(bound, said).await {
        Ok(said) => format!("\n  {said}"),
        Err(_) => format!("\n  {who} did not answer within {}s", bound.as_secs()),
    }
}
