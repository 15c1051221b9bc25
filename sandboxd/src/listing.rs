//! The query of a sandbox listing (`GET /api/sandboxes`) and its page
//! tokens: a worker answers it and a gateway merges its workers' answers to
//! it, so both read it here.

use axum::extract::Query;
use axum::http::Uri;

use crate::api::{is_dns_label, Sandbox};
use crate::error::{ApiError, ApiResult};

const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 1000;

/// The page token that follows `name` (its bytes in hex).
pub(crate) fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<String> {
    if s.len() & 1 == 1 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// The query of `GET /api/sandboxes`, checked: a gateway reads it the same way.
pub(crate) struct ListQuery {
    /// Page size, 1 to 1000.
    pub(crate) limit: usize,
    /// Names after this one (from `page_token`).
    pub(crate) after: Option<String>,
    /// `label=key=value` filters, all of which must match.
    pub(crate) labels: Vec<(String, String)>,
    /// Names starting with this.
    pub(crate) prefix: String,
}

impl ListQuery {
    /// Whether `sb` belongs in the listing (page position aside from `after`).
    pub(crate) fn matches(&self, sb: &Sandbox) -> bool {
        sb.name.starts_with(&self.prefix)
            && self
                .after
                .as_ref()
                .is_none_or(|a| sb.name.as_str() > a.as_str())
            && self.labels.iter().all(|(k, v)| sb.labels.get(k) == Some(v))
    }
}

pub(crate) fn parse_list_query(uri: &Uri) -> ApiResult<ListQuery> {
    let pairs = Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map_err(|e| ApiError::bad_request(format!("invalid query string: {}", e.body_text())))?
        .0;
    let mut q = ListQuery {
        limit: DEFAULT_LIMIT,
        after: None,
        labels: Vec::new(),
        prefix: String::new(),
    };
    for (k, v) in pairs {
        match k.as_str() {
            "limit" => {
                q.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid limit {v:?}: expected an integer from 1 to {MAX_LIMIT}")))?;
            }
            "page_token" => {
                let name = unhex(&v)
                    .filter(|n| is_dns_label(n))
                    .ok_or_else(|| ApiError::bad_request(format!("invalid page_token {v:?}: pass the next_page_token of a previous answer")))?;
                q.after = Some(name);
            }
            "label" => {
                let (lk, lv) = v
                    .split_once('=')
                    .ok_or_else(|| ApiError::bad_request(format!("invalid label filter {v:?}: expected key=value")))?;
                q.labels.push((lk.to_string(), lv.to_string()));
            }
            "prefix" => q.prefix = v,
            "token" => {}
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown query parameter {other:?}; expected one of: limit, page_token, label, prefix"
                )))
            }
        }
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_tokens_round_trip() {
        assert_eq!(unhex(&hex("ct-abc-01")).as_deref(), Some("ct-abc-01"));
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("abc"), None);
    }
}
