//! `[cli]` of `testkit.toml`: the product's CLI and its environment.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Problem;

/// `[cli]` of `testkit.toml`: the product's CLI, run by `cx.cli(..)`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CliSection {
    /// The program (a name on PATH or a path relative to the suite dir);
    /// default `sandboxctl`.
    #[serde(default = "default_cli_program")]
    pub program: Option<String>,
    /// Environment of the CLI: values may use every field of the pod
    /// handle: `{base_url}`, `{token}`, `{port}`, `{name}` and extra ones
    /// such as `{user}`, `{session_cookie}` (the `Cookie` header of the
    /// tests' session at that moment, empty when there is none) and
    /// `{credential}` (the credential the client sends at that moment, as
    /// `[auth] send` carries it: a login's token, renewed after an expiry).
    /// Default:
    /// `SANDBOXD_URL = "{base_url}"`, `SANDBOXD_TOKEN = "{token}"`,
    /// `SANDBOXD_COOKIE = "{session_cookie}"`.
    #[serde(default = "default_cli_env")]
    pub env: BTreeMap<String, String>,
}

impl Default for CliSection {
    fn default() -> Self {
        CliSection {
            program: default_cli_program(),
            env: default_cli_env(),
        }
    }
}

fn default_cli_program() -> Option<String> {
    Some("sandboxctl".to_owned())
}
fn default_cli_env() -> BTreeMap<String, String> {
    [
        ("SANDBOXD_URL", "{base_url}"),
        ("SANDBOXD_TOKEN", "{token}"),
        ("SANDBOXD_COOKIE", "{session_cookie}"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

impl CliSection {
    pub(super) fn validate(&self) -> Result<(), Problem> {
        if self.program.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(("cli.program", "is empty".to_owned()));
        }
        Ok(())
    }
}
