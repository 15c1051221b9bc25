//! `[auth]` and `[auth.login]` of `testkit.toml`: how the service takes its
//! credential, and how a login turns it into a session or a token.

use serde::Deserialize;

use super::Problem;

/// How a request carries a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum SendAs {
    /// `Authorization: Bearer <credential>`.
    #[default]
    Bearer,
    /// `<header>: <prefix><credential>`.
    Header,
    /// `Authorization: Basic` of the handle's `user` and `password`.
    Basic,
    /// `Cookie: <cookie>=<credential>`.
    Cookie,
    /// Nothing (`send = "none"`).
    #[serde(rename = "none")]
    Nothing,
}

/// `[auth]` of `testkit.toml`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AuthSection {
    /// How each request carries the credential (the handle's token, or what
    /// the login step returned as a token).
    #[serde(default)]
    pub send: SendAs,
    /// `send = "header"`: the header's name.
    #[serde(default)]
    pub header: Option<String>,
    /// `send = "header"`: what goes before the credential.
    #[serde(default)]
    pub prefix: String,
    /// `send = "cookie"`: the cookie's name.
    #[serde(default)]
    pub cookie: Option<String>,
    /// A request that needs the credential and changes nothing: the
    /// runner's auth phase sends it with and without the credential.
    #[serde(default)]
    pub probe: Option<String>,
    /// A body for `probe` (JSON unless it starts otherwise), with the
    /// handle's fields as placeholders: for a service whose cheapest
    /// authenticated call is a `POST`.
    #[serde(default)]
    pub probe_body: Option<String>,
    /// What `probe` must answer without the credential.
    #[serde(default = "default_refused")]
    pub refused: Vec<u16>,
    /// Answers that mean the credential expired: testkit logs in again, once
    /// for every process of the run, and repeats the request.
    #[serde(default = "default_expired")]
    pub expired: Vec<u16>,
    /// `[auth.login]`.
    #[serde(default)]
    pub login: Option<LoginSection>,
}

/// `[auth.login]`: a request that turns the handle's credentials into a
/// session (a cookie) or a short-lived token.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct LoginSection {
    /// `METHOD /path`.
    pub request: String,
    /// A body (JSON unless it starts otherwise), with placeholders.
    #[serde(default)]
    pub body: Option<String>,
    /// How the login request carries the handle's token; default: as
    /// `[auth] send` says.
    #[serde(default)]
    pub send: Option<SendAs>,
    /// The JSON pointer of the token in the answer.
    #[serde(default)]
    pub token: Option<String>,
    /// The answer's `Set-Cookie` is the session.
    #[serde(default)]
    pub cookie: bool,
}

impl AuthSection {
    /// `sandboxd`'s: the token (bearer) opens a cookie session.
    pub fn sandboxd() -> AuthSection {
        AuthSection {
            send: SendAs::Bearer,
            header: None,
            prefix: String::new(),
            cookie: None,
            probe: Some("GET /api/capabilities".to_owned()),
            probe_body: None,
            refused: default_refused(),
            expired: default_expired(),
            login: Some(LoginSection {
                request: "GET /api/capabilities".to_owned(),
                body: None,
                send: None,
                token: None,
                cookie: true,
            }),
        }
    }

    /// Whether a handle needs a `token` field for this auth.
    pub fn needs_token(&self) -> bool {
        match &self.login {
            None => !matches!(self.send, SendAs::Nothing | SendAs::Basic),
            Some(login) => !matches!(
                login.send.unwrap_or(self.send),
                SendAs::Nothing | SendAs::Basic
            ),
        }
    }
}

impl AuthSection {
    pub(super) fn validate(&self) -> Result<(), Problem> {
        let auth = self;
        if auth.send == SendAs::Header
            && auth.header.as_deref().is_none_or(|h| {
                h.is_empty() || reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err()
            })
        {
            return Err((
                "auth.header",
                format!(
                    "is {:?}: `send = \"header\"` needs the header's name, e.g. header = \"X-Api-Key\"",
                    auth.header.as_deref().unwrap_or("")
                ),
            ));
        }
        if auth.send == SendAs::Cookie && auth.cookie.as_deref().is_none_or(str::is_empty) {
            return Err((
                "auth.cookie",
                "is missing: `send = \"cookie\"` needs the cookie's name, e.g. cookie = \"session\"".to_owned(),
            ));
        }
        match &auth.probe {
            Some(probe) => {
                crate::template::RequestTemplate::parse(probe)
                    .map_err(|p| ("auth.probe", p.to_string()))?;
            }
            None if auth.send != SendAs::Nothing || auth.login.is_some() => {
                return Err((
                    "auth.probe",
                    "is missing: name a request that needs the credential and changes nothing, \
                     e.g. probe = \"GET /api/items\" (the runner checks it is accepted with the \
                     credential and refused without)"
                        .to_owned(),
                ))
            }
            None => {}
        }
        if auth.refused.is_empty() || auth.refused.iter().any(|s| !(400..600).contains(s)) {
            return Err((
                "auth.refused",
                format!(
                    "is {:?}: expected HTTP statuses from 400 to 599",
                    auth.refused
                ),
            ));
        }
        if auth.expired.iter().any(|s| !(400..600).contains(s)) {
            return Err((
                "auth.expired",
                format!(
                    "is {:?}: expected HTTP statuses from 400 to 599",
                    auth.expired
                ),
            ));
        }
        if let Some(login) = &auth.login {
            crate::template::RequestTemplate::parse(&login.request)
                .map_err(|p| ("auth.login.request", p.to_string()))?;
            match (&login.token, login.cookie) {
                (Some(_), true) | (None, false) => {
                    return Err((
                        "auth.login",
                        "must say where the answer carries the credential: `token = \"/json/pointer\"` \
                         or `cookie = true`, not both"
                            .to_owned(),
                    ))
                }
                (Some(p), false) if !p.starts_with('/') => {
                    return Err((
                        "auth.login.token",
                        format!("is {p:?}: expected a JSON pointer, e.g. \"/token\""),
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

fn default_refused() -> Vec<u16> {
    vec![401, 403]
}
fn default_expired() -> Vec<u16> {
    vec![401]
}
