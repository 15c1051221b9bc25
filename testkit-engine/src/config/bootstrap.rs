//! One step of `[pod] bootstrap`: a command, a command given text on its
//! stdin, or an HTTP request to the running pod.
//!
//! ```toml
//! [pod]
//! bootstrap = [
//!   ["kvctl", "enable-auth"],                                   # a command
//!   { command = ["kvctl", "user", "add", "root"], stdin = "{password}\n" },
//!   { request = "POST /query", body = "q=CREATE USER admin WITH PASSWORD '{password}'",
//!     error = "/results/0/error" },
//! ]
//! ```
//!
//! A secret reaches a CLI that reads it from its stdin, and a service whose
//! first user is made by an HTTP query is bootstrapped, with no `sh -c`
//! and no `curl` in the suite.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::Problem;

/// One step of `[pod] bootstrap`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BootstrapStep {
    /// A program and its arguments (`["kvctl", "enable-auth"]`), with
    /// nothing on its stdin; or, written as a table, with `stdin`.
    Command {
        /// The program and its arguments, placeholders filled.
        command: Vec<String>,
        /// What it is given on its stdin (a template), then end of file.
        stdin: Option<String>,
    },
    /// An HTTP request to the running pod, carrying no credential but what
    /// its `headers` say (the bootstrap is often what makes one): a 2xx
    /// answer succeeds, unless `error` points at something in it.
    Request {
        /// `METHOD /path?query`, placeholders filled and escaped.
        request: String,
        /// Its body (JSON unless it starts otherwise), a template.
        body: Option<String>,
        /// Its headers, by name, each a template (`Authorization = "Bearer
        /// {token}"`).
        headers: BTreeMap<String, String>,
        /// A JSON pointer: a 2xx answer with a value there (not `null`)
        /// failed all the same, as a service that answers 200 with
        /// `{"error": …}` says.
        error: Option<String>,
    },
}

impl BootstrapStep {
    /// A command with nothing on its stdin.
    pub fn command(command: Vec<String>) -> BootstrapStep {
        BootstrapStep::Command {
            command,
            stdin: None,
        }
    }

    /// The step as the pod's logs and errors name it (never a filled
    /// secret: the templates are shown, not their values).
    pub fn shown(&self) -> String {
        match self {
            BootstrapStep::Command { command, .. } => command.join(" "),
            BootstrapStep::Request { request, .. } => request.clone(),
        }
    }

    pub(super) fn validate(&self) -> Result<(), Problem> {
        match self {
            BootstrapStep::Command { command, .. } => {
                if command.first().is_none_or(|p| p.trim().is_empty()) {
                    return Err((
                        "pod.bootstrap",
                        "has an empty command: expected a program and its arguments".to_owned(),
                    ));
                }
            }
            BootstrapStep::Request {
                request,
                error,
                headers,
                ..
            } => {
                crate::template::RequestTemplate::parse(request)
                    .map_err(|p| ("pod.bootstrap", format!("has a request that {p}")))?;
                if let Some(bad) = headers
                    .keys()
                    .find(|h| reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err())
                {
                    return Err((
                        "pod.bootstrap",
                        format!("has a header {bad:?} that is not a header's name"),
                    ));
                }
                if error.as_deref().is_some_and(|p| !p.starts_with('/')) {
                    return Err((
                        "pod.bootstrap",
                        format!(
                            "has `error = {:?}`: expected a JSON pointer, such as \"/error\"",
                            error.as_deref().unwrap_or_default()
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A step written as a table.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepTable {
    #[serde(default)]
    command: Option<Vec<String>>,
    #[serde(default)]
    stdin: Option<String>,
    #[serde(default)]
    request: Option<String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

impl StepTable {
    fn into_step(self) -> Result<BootstrapStep, String> {
        match (self.command, self.request) {
            (Some(command), None) => {
                if self.body.is_some() || self.error.is_some() || !self.headers.is_empty() {
                    return Err("a command takes `stdin`, not `body`, `error` or `headers` \
                                (those are a `request`'s)"
                        .to_owned());
                }
                Ok(BootstrapStep::Command {
                    command,
                    stdin: self.stdin,
                })
            }
            (None, Some(request)) => {
                if self.stdin.is_some() {
                    return Err("a request takes `body`, not `stdin` (a command's)".to_owned());
                }
                Ok(BootstrapStep::Request {
                    request,
                    body: self.body,
                    headers: self.headers,
                    error: self.error,
                })
            }
            (Some(_), Some(_)) => {
                Err("has both `command` and `request`: a step is one of them".to_owned())
            }
            (None, None) => Err(
                "has neither `command` nor `request`: give `command = [\"program\", …]` \
                 (with `stdin`), or `request = \"METHOD /path\"` (with `body`)"
                    .to_owned(),
            ),
        }
    }
}

impl<'de> Deserialize<'de> for BootstrapStep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StepVisitor;
        impl<'de> Visitor<'de> for StepVisitor {
            type Value = BootstrapStep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a command (an array of strings), or a table: `{ command = [...], stdin = \
                     \"...\" }` or `{ request = \"METHOD /path\", body = \"...\" }`",
                )
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<BootstrapStep, A::Error> {
                Vec::<String>::deserialize(de::value::SeqAccessDeserializer::new(seq))
                    .map(BootstrapStep::command)
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<BootstrapStep, A::Error> {
                StepTable::deserialize(de::value::MapAccessDeserializer::new(map))?
                    .into_step()
                    .map_err(de::Error::custom)
            }
        }
        deserializer.deserialize_any(StepVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SuiteConfig;
    use std::path::Path;

    fn parse(text: &str) -> Result<SuiteConfig, String> {
        SuiteConfig::parse(text, Path::new("/s/testkit.toml")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_step_is_a_command_a_piped_command_or_a_request() {
        let c = parse(
            "[pod]\nbootstrap = [[\"a\", \"b\"], { command = [\"c\"], stdin = \"{password}\\n\" }, \
             { request = \"POST /query\", body = \"q=x\", error = \"/results/0/error\" }]\n",
        )
        .unwrap();
        assert_eq!(
            c.pod.bootstrap,
            [
                BootstrapStep::command(vec!["a".into(), "b".into()]),
                BootstrapStep::Command {
                    command: vec!["c".into()],
                    stdin: Some("{password}\n".into())
                },
                BootstrapStep::Request {
                    request: "POST /query".into(),
                    body: Some("q=x".into()),
                    headers: BTreeMap::new(),
                    error: Some("/results/0/error".into())
                },
            ]
        );
        for (text, wanted) in [
            ("{ command = [\"c\"], request = \"GET /\" }", "has both"),
            ("{ stdin = \"x\" }", "has neither"),
            ("{ request = \"GET /\", stdin = \"x\" }", "not `stdin`"),
            ("{ command = [\"c\"], body = \"x\" }", "not `body`"),
            (
                "{ request = \"GET /\", headers = { \"a b\" = \"x\" } }",
                "not a header's name",
            ),
            (
                "{ command = [\"c\"], stdn = \"x\" }",
                "unknown field `stdn`",
            ),
            ("{ request = \"/x\" }", "pod.bootstrap"),
            (
                "{ request = \"GET /x\", error = \"error\" }",
                "expected a JSON pointer",
            ),
            ("[]", "has an empty command"),
            ("\"sh\"", "a command (an array of strings), or a table"),
        ] {
            let e = parse(&format!("[pod]\nbootstrap = [{text}]\n")).unwrap_err();
            assert!(
                e.contains(wanted) && e.contains("pod.bootstrap"),
                "{text}: {e}"
            );
        }
    }
}
