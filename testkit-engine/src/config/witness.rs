//! `[witnesses.<name>]` of `testkit.toml`: a look at the layer below the
//! product's API (a directory, a process table, a debug listing), for
//! residue the product itself forgot and its own listing cannot show.
//!
//! ```toml
//! [witnesses.home-dirs]
//! what = "sandbox directories"               # a noun for messages
//! command = ["ls", "{home}/sandboxes"]       # run on this machine: a name a line, or
//! # request = "GET /internal/debug/dirs"     # sent with the pod's credential,
//! # names = "/items/*/name"                  # the names in its answer
//! timeout = "30s"                            # optional (1ms to 24h)
//! ```
//!
//! Placeholders: `{run}`, `{prefix}` (`<name_prefix>-<run id>-`, as for
//! resource kinds), `{home}` (the pod's HOME, when the runner started the
//! pod as a process on this machine) and the handle's public fields
//! (`{name}`, `{base_url}`, `{port}`, `[pod] public_fields`). A command's
//! `env` and a request's `body`, which no other process of the machine
//! sees, take every handle field, its secrets too:
//!
//! ```toml
//! [witnesses.keys]
//! what = "stored keys"
//! command = ["kvctl", "keys", "--prefix", "{prefix}"]
//! env = { KV_PASSWORD = "{password}" }      # a secret, off the command line
//!
//! [witnesses.rows]
//! what = "rows"
//! request = "POST /query"
//! body = '''{"q": "SELECT name FROM t WHERE run = '{run}'", "auth": "{password}"}'''
//! names = "/rows/*/name"
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

/// How long a witness may take, unless it says.
pub const DEFAULT_WITNESS_TIMEOUT: Duration = Duration::from_secs(30);

/// The placeholders every witness may use, besides `[pod] public_fields`.
pub const WITNESS_PLACEHOLDERS: &[&str] = &["run", "prefix", "home", "name", "base_url", "port"];

/// `[witnesses.<name>]`: one way of looking below the API. Exactly one of
/// `command` and `request`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct WitnessSection {
    /// What it lists, as a noun for messages: `"sandbox directories"`.
    #[serde(default)]
    pub what: String,
    /// A program and its arguments, run on this machine; its stdout is one
    /// name a line.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// A request template, sent with the pod's credential.
    #[serde(default)]
    pub request: Option<String>,
    /// With `request`: the JSON pointer, with one `*` over an array, of the
    /// names in its answer (`"/items/*/name"`).
    #[serde(default)]
    pub names: Option<String>,
    /// With `command`: its environment, each a template of every
    /// placeholder and every handle field, secrets too (an environment is
    /// not shown by `ps`, as a command line is).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// With `request`: its body (JSON unless it starts otherwise), a
    /// template of every placeholder and every handle field, secrets too.
    #[serde(default)]
    pub body: Option<String>,
    /// How long running the command, or the request, may take.
    #[serde(default = "default_timeout", with = "super::humantime_serde_compat")]
    pub timeout: Duration,
}

fn default_timeout() -> Duration {
    DEFAULT_WITNESS_TIMEOUT
}

/// What is wrong with a witness: the key below `witnesses.<name>` (`None`:
/// the table as a whole), and why, saying how to mend it.
pub(super) type WitnessProblem = (Option<&'static str>, String);

impl WitnessSection {
    /// Whether the witness needs the pod's HOME, which only a pod the
    /// runner started as a process on this machine has.
    pub fn uses_home(&self) -> bool {
        let mut texts: Vec<&str> = self.command.iter().flatten().map(String::as_str).collect();
        texts.extend(self.request.as_deref());
        texts
            .iter()
            .any(|t| crate::template::placeholders(t).contains(&"home"))
    }

    pub(super) fn validate(&self, name: &str, public: &[String]) -> Result<(), WitnessProblem> {
        let valid_name = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !valid_name {
            return Err((
                None,
                "has an invalid name: expected letters, digits, `_` and `-`".to_owned(),
            ));
        }
        if self.what.trim().is_empty() {
            return Err((
                Some("what"),
                "is missing: say what the witness lists, as a noun for messages, e.g. \
                 what = \"sandbox directories\""
                    .to_owned(),
            ));
        }
        match (&self.command, &self.request) {
            (Some(_), Some(_)) => Err((
                None,
                "has both `command` and `request`: a witness is one of the two; make the \
                 other a witness of its own"
                    .to_owned(),
            )),
            (None, None) => Err((
                None,
                "has neither `command` nor `request`: give a command that prints a name a \
                 line (command = [\"ls\", \"{home}/data\"]) or a request and where its \
                 names are (request = \"GET /debug/items\", names = \"/items/*/name\")"
                    .to_owned(),
            )),
            (Some(command), None) => self.validate_command(command, public),
            (None, Some(request)) => self.validate_request(request, public),
        }
    }

    fn validate_command(
        &self,
        command: &[String],
        public: &[String],
    ) -> Result<(), WitnessProblem> {
        if command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err((
                Some("command"),
                "is empty: expected a program and its arguments, e.g. [\"ls\", \"{home}/data\"]"
                    .to_owned(),
            ));
        }
        if self.names.is_some() {
            return Err((
                Some("names"),
                "is set, but the witness is a `command`, whose stdout is a name a line: \
                 `names` says where the names are in a `request`'s answer; remove it"
                    .to_owned(),
            ));
        }
        if self.body.is_some() {
            return Err((
                Some("body"),
                "is set, but the witness is a `command`: `body` is a `request`'s; give the \
                 command what it needs in `env`"
                    .to_owned(),
            ));
        }
        for arg in command {
            check_placeholders("command", arg, public)?;
        }
        for (key, value) in &self.env {
            let valid = !key.is_empty()
                && !key.starts_with(|c: char| c.is_ascii_digit())
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err((
                    Some("env"),
                    format!(
                        "has {key:?}: expected environment variable names of A-Z, a-z, 0-9 and `_`"
                    ),
                ));
            }
            crate::template::check_filters(value).map_err(|p| (Some("env"), p.to_string()))?;
        }
        Ok(())
    }

    fn validate_request(&self, request: &str, public: &[String]) -> Result<(), WitnessProblem> {
        crate::template::RequestTemplate::parse(request)
            .map_err(|p| (Some("request"), p.to_string()))?;
        check_placeholders("request", request, public)?;
        if !self.env.is_empty() {
            return Err((
                Some("env"),
                "is set, but the witness is a `request`: `env` is a `command`'s; give the \
                 request what it needs in `body`"
                    .to_owned(),
            ));
        }
        if let Some(body) = &self.body {
            crate::template::check_filters(body).map_err(|p| (Some("body"), p.to_string()))?;
        }
        let names = self.names.as_deref().unwrap_or_default();
        if names.is_empty() {
            return Err((
                Some("names"),
                "is missing: a `request` witness says where the names are in its answer, \
                 as a JSON pointer with one `*` over an array, e.g. names = \"/items/*/name\""
                    .to_owned(),
            ));
        }
        if crate::template::split_item_pointer(names).is_none() {
            return Err((
                Some("names"),
                format!(
                    "is {names:?}: expected a JSON pointer with one `/*` over an array, \
                     e.g. \"/items/*/name\""
                ),
            ));
        }
        Ok(())
    }
}

/// A command line is seen by every process of the machine (`ps`), and a
/// witness's output lands in the results: only public placeholders.
fn check_placeholders(
    key: &'static str,
    text: &str,
    public: &[String],
) -> Result<(), WitnessProblem> {
    crate::template::check_filters(text).map_err(|p| (Some(key), p.to_string()))?;
    for placeholder in crate::template::placeholders(text) {
        let known =
            WITNESS_PLACEHOLDERS.contains(&placeholder) || public.iter().any(|p| p == placeholder);
        if !known {
            return Err((
                Some(key),
                format!(
                    "uses `{{{placeholder}}}`, which a witness does not know: use {}, or \
                     a handle field listed in `[pod] public_fields` (a secret never goes \
                     on a witness's command line or into its output: give it to a command \
                     in `env`, to a request in `body`)",
                    WITNESS_PLACEHOLDERS
                        .iter()
                        .map(|p| format!("`{{{p}}}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}
