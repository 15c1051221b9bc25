//! The HTTP executor: a kind of templates, checked, deleted and listed over
//! the pod's authenticated client.

use std::time::Duration;

use reqwest::StatusCode;
use serde::Deserialize;

use super::{DeleteAnswer, KindSpec, OpError, Ops, Presence, ResourceRef};
use crate::pod::Pod;
use crate::template::{encode, RequestTemplate, Values};

/// Every page of a listing is bounded, and so is the number of pages, so a
/// pod that keeps handing out tokens cannot make a sweep loop forever.
const MAX_PAGES: usize = 1000;

/// How long one request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub(super) struct Http {
    pub(super) exists: RequestTemplate,
    pub(super) delete: RequestTemplate,
    pub(super) list: RequestTemplate,
    pub(super) list_names: (String, String),
    pub(super) list_ids: Option<(String, String)>,
    pub(super) next_page: Option<String>,
    /// A listing with nothing at `list_names`' array means none.
    pub(super) list_absent_is_empty: bool,
    /// How the listing's names are encoded (`list_names_decode`).
    pub(super) list_names_decode: Option<Decode>,
    pub(super) gone: Vec<u16>,
    pub(super) gone_if: Option<GoneIf>,
}

/// How a listing encodes the names it holds (`list_names_decode`): a
/// store whose keys are bytes lists them base64-encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Decode {
    /// Standard base64, padded or not.
    Base64,
    /// The URL-safe alphabet, padded or not.
    Base64Url,
}

impl Decode {
    /// Every decoding, by the name `list_names_decode` writes.
    pub(super) const ALL: &'static [(&'static str, Decode)] =
        &[("base64", Decode::Base64), ("base64url", Decode::Base64Url)];

    fn name(self) -> &'static str {
        Decode::ALL
            .iter()
            .find(|(_, d)| *d == self)
            .map_or("?", |(n, _)| n)
    }

    /// The name `listed` stands for, or why it does not decode.
    fn decode(self, listed: &str) -> Result<String, String> {
        use base64::Engine as _;
        let unpadded = listed.trim_end_matches('=');
        let bytes = match self {
            Decode::Base64 => base64::engine::general_purpose::STANDARD_NO_PAD.decode(unpadded),
            Decode::Base64Url => base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(unpadded),
        }
        .map_err(|e| format!("{listed:?} is not {}: {e}", self.name()))?;
        String::from_utf8(bytes)
            .map_err(|_| format!("{listed:?} decodes to bytes that are not UTF-8"))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GoneIf {
    pub(super) pointer: String,
    #[serde(default)]
    pub(super) equals: Vec<String>,
    #[serde(default)]
    pub(super) missing: bool,
}

impl KindSpec {
    /// Whether the resource `r` is still there.
    pub async fn exists(&self, pod: &Pod, r: &ResourceRef) -> Result<Presence, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.exists(pod, r).await,
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let r = self.with_id(pod, r).await?;
        let Some(r) = r else {
            // Not listed under its name: nothing carries it any more.
            return Ok(Presence::Gone);
        };
        let (status, body, sent) = send(pod, &http.exists, &r, "").await?;
        if http.gone.contains(&status.as_u16()) {
            return Ok(Presence::Gone);
        }
        if !status.is_success() {
            return Err(classify(&http.exists, status, &body));
        }
        let json = serde_json::from_str::<serde_json::Value>(&body).ok();
        if let Some(rule) = &http.gone_if {
            let equals = gone_values(pod, &r, &rule.equals)?;
            let at = json.as_ref().and_then(|j| j.pointer(&rule.pointer));
            let gone = json.is_some()
                && if rule.missing {
                    match at {
                        None | Some(serde_json::Value::Null) => true,
                        Some(serde_json::Value::Array(a)) => a.is_empty(),
                        Some(serde_json::Value::Object(o)) => o.is_empty(),
                        Some(serde_json::Value::String(s)) => s.is_empty(),
                        Some(_) => false,
                    }
                } else {
                    at.map(pointer_text).is_some_and(|t| equals.contains(&t))
                };
            if gone {
                return Ok(Presence::Gone);
            }
            // What was sent and what was read, so that a leak message says
            // why the answer did not mean gone: the filled request (never
            // the template) and the value at the pointer.
            let read = match (&json, at) {
                (None, _) => "an answer that is not JSON".to_owned(),
                (Some(_), None) => format!("nothing at {:?}", rule.pointer),
                (Some(_), Some(v)) => format!("{:?} = {}", rule.pointer, shorten(&v.to_string())),
            };
            let wanted = if rule.missing {
                "missing or empty".to_owned()
            } else {
                format!("one of {equals:?}")
            };
            return Ok(Presence::Present(format!(
                "{sent} answered {status} with {read} (`gone_if` wants it {wanted})"
            )));
        }
        let state = json.and_then(|v| {
            v.get("state")
                .and_then(|s| s.as_str())
                .map(|s| format!("state={s}"))
        });
        Ok(Presence::Present(
            state.unwrap_or_else(|| format!("{sent} answered {status}")),
        ))
    }

    /// Asks for the deletion; `Ok` when the pod accepted it or the resource
    /// was already gone.
    pub async fn delete(&self, pod: &Pod, r: &ResourceRef) -> Result<(), OpError> {
        self.delete_answer(pod, r).await.map(drop)
    }

    /// Asks for the deletion, and says whether the pod accepted it or the
    /// resource was already gone (a `gone` status, or nothing listed under
    /// its name). A Rust kind's `delete` cannot tell: its answer is
    /// [`DeleteAnswer::Accepted`].
    pub(crate) async fn delete_answer(
        &self,
        pod: &Pod,
        r: &ResourceRef,
    ) -> Result<DeleteAnswer, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.delete(pod, r).await.map(|()| DeleteAnswer::Accepted),
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let Some(r) = self.with_id(pod, r).await? else {
            return Ok(DeleteAnswer::AlreadyGone);
        };
        let (status, body, _) = send(pod, &http.delete, &r, "").await?;
        if status.is_success() {
            Ok(DeleteAnswer::Accepted)
        } else if http.gone.contains(&status.as_u16()) {
            Ok(DeleteAnswer::AlreadyGone)
        } else {
            Err(classify(&http.delete, status, &body))
        }
    }

    /// A resource of a kind with ids, with its id: as given, else found by
    /// listing its name (its creation may never have been answered). `None`
    /// when nothing of that name is listed.
    async fn with_id(&self, pod: &Pod, r: &ResourceRef) -> Result<Option<ResourceRef>, OpError> {
        if r.id.is_some() || !self.has_ids() {
            return Ok(Some(r.clone()));
        }
        let listed = self.list(pod, &r.name).await?;
        Ok(listed.into_iter().find(|l| l.name == r.name))
    }

    /// Every resource the pod lists under `prefix`, across pages.
    pub async fn list(&self, pod: &Pod, prefix: &str) -> Result<Vec<ResourceRef>, OpError> {
        let http = match &self.ops {
            Ops::Http(h) => h,
            Ops::Rust(k) => return k.list(pod, prefix).await,
            Ops::Elsewhere => return Err(self.elsewhere()),
        };
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        let query = ResourceRef::named(prefix);
        for _ in 0..MAX_PAGES {
            let extra = token
                .as_deref()
                .map(|t| format!("page_token={}", encode(t)))
                .unwrap_or_default();
            let (status, body, _) = send(pod, &http.list, &query, &extra).await?;
            if !status.is_success() {
                return Err(classify(&http.list, status, &body));
            }
            let json: serde_json::Value = serde_json::from_str(&body).map_err(|e| {
                OpError::Permanent(format!(
                    "{} answered something that is not JSON: {e}",
                    http.list
                ))
            })?;
            let mut strangers = Vec::new();
            for item in http.listed_items(&json)? {
                let (name, id) = http.listed_resource(item)?;
                if name.starts_with(prefix) {
                    found.push(ResourceRef { name, id });
                } else {
                    strangers.push(name);
                }
            }
            // A listing without `{prefix}` lists everything: keep the run's.
            // One asked for the prefix that answers other names was not
            // understood (names it encodes, a filter looser than a
            // prefix): said, never dropped, or the sweep is blind.
            if http.list.uses("prefix") && !strangers.is_empty() {
                return Err(OpError::Permanent(strange_names(http, prefix, &strangers)));
            }
            token = http.next_page_token(&json);
            if token.is_none() {
                return Ok(found);
            }
        }
        Err(OpError::Permanent(format!(
            "{} kept answering with a next page after {MAX_PAGES} pages",
            http.list
        )))
    }
}

impl Http {
    /// The items of one page of a listing, at `list_names`' array.
    fn listed_items<'j>(
        &self,
        json: &'j serde_json::Value,
    ) -> Result<&'j [serde_json::Value], OpError> {
        let (array, _) = &self.list_names;
        match json.pointer(array) {
            Some(serde_json::Value::Array(items)) => Ok(items),
            None | Some(serde_json::Value::Null) if self.list_absent_is_empty => Ok(&[]),
            _ => Err(OpError::Permanent(format!(
                "{} answered JSON without an array at {array:?} (`list_names`){}",
                self.list,
                if self.list_absent_is_empty {
                    ""
                } else {
                    "; if the service leaves it out when there is none, set `list_absent_is_empty = true`"
                }
            ))),
        }
    }

    /// The name of a listed item, and its id for a kind with ids.
    fn listed_resource(
        &self,
        item: &serde_json::Value,
    ) -> Result<(String, Option<String>), OpError> {
        let (_, field) = &self.list_names;
        let Some(listed) = item.pointer(field).and_then(|n| n.as_str()) else {
            return Err(OpError::Permanent(format!(
                "{} answered an item without a string at {field:?} (`list_names`)",
                self.list
            )));
        };
        let name = match self.list_names_decode {
            None => listed.to_owned(),
            Some(decode) => decode.decode(listed).map_err(|problem| {
                OpError::Permanent(format!(
                    "{} answered a name that does not decode (`list_names_decode = \"{}\"`): {problem}",
                    self.list,
                    decode.name()
                ))
            })?,
        };
        let id = match &self.list_ids {
            None => None,
            Some((_, id_field)) => match item.pointer(id_field) {
                Some(serde_json::Value::String(s)) => Some(s.clone()),
                Some(serde_json::Value::Number(n)) => Some(n.to_string()),
                _ => {
                    return Err(OpError::Permanent(format!(
                        "{} answered an item without an id at {id_field:?} (`list_ids`)",
                        self.list
                    )))
                }
            },
        };
        Ok((name, id))
    }

    /// The token of the listing's next page, if it has one.
    fn next_page_token(&self, json: &serde_json::Value) -> Option<String> {
        self.next_page
            .as_deref()
            .and_then(|p| json.pointer(p))
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
    }
}

/// What a listing asked for `prefix` answered beside it: the names (a
/// few), and what may be wrong.
fn strange_names(http: &Http, prefix: &str, strangers: &[String]) -> String {
    let shown: Vec<String> = strangers.iter().take(5).map(|n| format!("{n:?}")).collect();
    let more = strangers.len().saturating_sub(shown.len());
    format!(
        "{} was asked for the names that start with {prefix:?} (`{{prefix}}`) and answered {} \
         that do not: {}{}; the sweep cannot tell the run's resources from others. If the \
         service encodes the names it lists, say how (`list_names_decode`); if its filter is \
         looser than a prefix, leave `{{prefix}}` out of `list` (then every name is listed, \
         and those of the run are kept)",
        http.list,
        strangers.len(),
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        }
    )
}

/// `gone_if.equals` for the resource `r`: each value's placeholders
/// (`{name}`, `{id}`, `{run}`, the handle's fields) filled.
fn gone_values(pod: &Pod, r: &ResourceRef, equals: &[String]) -> Result<Vec<String>, OpError> {
    let port = pod.port().to_string();
    let mut values = pod
        .handle()
        .values(&port)
        .with("name", &r.name)
        .with("run", pod.run_id());
    if let Some(id) = &r.id {
        values = values.with("id", id);
    }
    equals
        .iter()
        .map(|e| {
            crate::template::fill(e, &values, crate::template::verbatim)
                .map_err(|p| OpError::Permanent(format!("`gone_if.equals`: {p}")))
        })
        .collect()
}

/// A value read at a `gone_if` pointer as `equals` compares it: a string as
/// it is, anything else as JSON.
fn pointer_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// `text`, cut at 300 bytes.
fn shorten(text: &str) -> String {
    let mut text = text.trim().to_owned();
    if text.len() > 300 {
        let mut end = 300;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn classify(template: &RequestTemplate, status: StatusCode, body: &str) -> OpError {
    let body = shorten(body);
    let message = format!("{template} answered {status}: {body}");
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        OpError::Transient(message)
    } else {
        OpError::Permanent(message)
    }
}

/// Sends `template` filled for `r`: the answer's status and body, and the
/// request as it was sent (`GET /path?query`, redacted) for messages.
async fn send(
    pod: &Pod,
    template: &RequestTemplate,
    r: &ResourceRef,
    extra_query: &str,
) -> Result<(StatusCode, String, String), OpError> {
    let port = pod.port().to_string();
    let run = pod.run_id();
    let mut values: Values<'_> = pod
        .handle()
        .values(&port)
        .with("name", &r.name)
        .with("prefix", &r.name)
        .with("run", run);
    if let Some(id) = &r.id {
        values = values.with("id", id);
    }
    let mut path = template
        .render_path(&values)
        .map_err(|p| OpError::Permanent(format!("{template}: {p}")))?;
    let body = template
        .render_body(&values)
        .map_err(|p| OpError::Permanent(format!("{template} body: {p}")))?;
    if !extra_query.is_empty() {
        path.push(if path.contains('?') { '&' } else { '?' });
        path.push_str(extra_query);
    }
    let url = pod.url(&path);
    let response = pod
        .send(|c| {
            let mut request = c
                .request(template.method().clone(), &url)
                .timeout(REQUEST_TIMEOUT);
            if let Some(body) = &body {
                request = request
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(body.clone());
            }
            request
        })
        .await
        .map_err(|e| {
            OpError::Transient(format!(
                "{} {path} failed: {}",
                template.method(),
                error_chain(&e)
            ))
        })?;
    let status = response.status();
    let body = response.text().await.map_err(|e| {
        OpError::Transient(format!(
            "{} {path}: reading the answer failed: {}",
            template.method(),
            error_chain(&e)
        ))
    })?;
    let sent = crate::redact(&format!("{} {path}", template.method())).into_owned();
    Ok((status, body, sent))
}

pub(crate) use crate::errors::error_chain;
