//! Request templates of `testkit.toml`: `METHOD /path?query` with
//! `{placeholders}`, and optional bodies. The same placeholders fill every
//! template a suite writes (auth, resource kinds, the CLI's environment):
//! the pod handle's fields (`{base_url}`, `{port}`, `{name}`, `{token}` and
//! any extra field such as `{user}`), and what the template is for
//! (`{name}`, `{id}` and `{prefix}` of a resource, `{run}`).
//!
//! A placeholder is `{` + lowercase letters, digits and `_` + `}`; any other
//! brace is text, so a JSON body needs no escaping. A placeholder that no
//! value fills is an error naming it and the ones that exist.
//!
//! A value is escaped for where it goes: percent-encoded in a path or a
//! query, escaped for a JSON string in a body, as it is elsewhere. Filters
//! after a `|` change it first, in order ([`Filter`]): `{name|base64}`
//! for a service that wants its keys base64-encoded,
//! `{prefix|next|base64}` for the end of a range over a prefix. A filter
//! that encodes the value for where it goes (`json`, `url`, `raw`) comes
//! last and replaces the escaping.

use std::fmt;

use reqwest::Method;

/// What is wrong with a template, or with filling it. Its text is a
/// fragment that reads after the key it is about (`` `auth.probe` is
/// "GET": expected … ``).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// Not `METHOD /path`.
    #[error("is {text:?}: expected `METHOD /path`, e.g. \"GET /api/things/{{name}}\"")]
    NotARequest {
        /// The template.
        text: String,
    },
    /// The method is not an HTTP method.
    #[error("is {text:?}: {method:?} is not an HTTP method")]
    NotAMethod {
        /// The template.
        text: String,
        /// Its first word.
        method: String,
    },
    /// The path does not start with `/`.
    #[error("is {text:?}: the path must start with `/`")]
    RelativePath {
        /// The template.
        text: String,
    },
    /// A placeholder's filters cannot be applied.
    #[error("in {text:?}: {problem}")]
    Filter {
        /// The template.
        text: String,
        /// What is wrong with the placeholder.
        problem: FilterProblem,
    },
    /// A placeholder no value fills.
    #[error("`{{{key}}}` in {text:?} is not a known placeholder (known here: {known})")]
    Unknown {
        /// The template.
        text: String,
        /// The placeholder's key.
        key: String,
        /// The keys that have values, comma-separated.
        known: String,
    },
}

/// What is wrong with one placeholder's filters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterProblem {
    /// A filter of no known name.
    #[error("`|{name}` is not a filter (filters: {known})")]
    NotAFilter {
        /// The name written.
        name: String,
        /// The filters there are, comma-separated.
        known: String,
    },
    /// A filter that encodes for where the value goes is not the last.
    #[error(
        "`{{{placeholder}}}`: `|{filter}` encodes the value for where it goes, so it comes last"
    )]
    NotLast {
        /// The placeholder with its filters, without braces.
        placeholder: String,
        /// The filter.
        filter: &'static str,
    },
    /// The filters make bytes that are not text before a step that needs
    /// text.
    #[error(
        "`{{{placeholder}}}` makes bytes that are not UTF-8 before {then}: end it with `|base64` \
         or `|base64url`"
    )]
    NotUtf8 {
        /// The placeholder with its filters, without braces.
        placeholder: String,
        /// The step that needs text.
        then: &'static str,
    },
}

/// For the callers that still carry errors as text.
impl From<TemplateError> for String {
    fn from(e: TemplateError) -> String {
        e.to_string()
    }
}

/// `METHOD /path` with an optional body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    method: Method,
    path: String,
    body: Option<String>,
}

impl RequestTemplate {
    /// Parses `METHOD /path`; the error says what is wrong with an example.
    pub fn parse(text: &str) -> Result<RequestTemplate, TemplateError> {
        let (method, path) =
            text.trim()
                .split_once(' ')
                .ok_or_else(|| TemplateError::NotARequest {
                    text: text.to_owned(),
                })?;
        let method =
            Method::from_bytes(method.as_bytes()).map_err(|_| TemplateError::NotAMethod {
                text: text.to_owned(),
                method: method.to_owned(),
            })?;
        let path = path.trim();
        if !path.starts_with('/') {
            return Err(TemplateError::RelativePath {
                text: text.to_owned(),
            });
        }
        check_filters(path)?;
        Ok(RequestTemplate {
            method,
            path: path.to_owned(),
            body: None,
        })
    }

    /// The same request with `body` (a template too).
    pub(crate) fn with_body(mut self, body: Option<String>) -> RequestTemplate {
        self.body = body;
        self
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.method
    }

    /// The path template.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The body template.
    pub fn body(&self) -> Option<&str> {
        self.body.as_deref()
    }

    /// Whether the path or the body uses `{key}` (filtered or not).
    pub fn uses(&self, key: &str) -> bool {
        placeholders(&self.path).contains(&key)
            || self
                .body
                .as_deref()
                .is_some_and(|b| placeholders(b).contains(&key))
    }

    /// The path with every placeholder filled, values percent-encoded.
    pub(crate) fn render_path(&self, values: &Values<'_>) -> Result<String, TemplateError> {
        fill(&self.path, values, encode)
    }

    /// The body with every placeholder filled, values escaped for a JSON
    /// string (bodies are JSON far more often than not; a value with no
    /// special characters is unchanged either way).
    pub(crate) fn render_body(&self, values: &Values<'_>) -> Result<Option<String>, TemplateError> {
        self.body
            .as_deref()
            .map(|b| fill(b, values, json_escape))
            .transpose()
    }
}

impl fmt::Display for RequestTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.method, self.path)
    }
}

/// Values for placeholders, looked up by name; later ones win.
#[derive(Debug, Clone, Default)]
pub struct Values<'a> {
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Values<'a> {
    /// No values.
    pub fn new() -> Values<'a> {
        Values::default()
    }

    /// Adds `{key}` = `value`.
    pub fn with(mut self, key: &'a str, value: &'a str) -> Values<'a> {
        self.pairs.push((key, value));
        self
    }

    /// Adds every pair.
    pub fn extend(mut self, pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Values<'a> {
        self.pairs.extend(pairs);
        self
    }

    /// Every pair, in the order given.
    pub fn pairs(&self) -> &[(&'a str, &'a str)] {
        &self.pairs
    }

    /// The value of `{key}`: the last one given.
    pub fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    fn names(&self) -> String {
        let mut names: Vec<&str> = self.pairs.iter().map(|(k, _)| *k).collect();
        names.sort_unstable();
        names.dedup();
        names
            .iter()
            .map(|n| format!("{{{n}}}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The handle fields testkit fills itself, as placeholders of the same
/// names: no `[pod] fields` entry may be named so.
pub const FILLED_FIELDS: &[&str] = &["name", "base_url", "port", "capabilities", "health"];

/// The names no `[pod] fields` entry may take: the handle fields testkit
/// fills ([`FILLED_FIELDS`]), `cluster`, `machine`, `process` and `container` (what a
/// pod is made of, which testkit writes into the handle it makes), and the placeholders
/// testkit fills beside the handle's fields, which a field of the same
/// name would hide. `port_<name>` (a `[pod] ports` entry) is reserved too.
pub const RESERVED_FIELDS: &[&str] = &[
    "name",
    "base_url",
    "port",
    "capabilities",
    "health",
    "cluster",
    "machine",
    "process",
    "container",
    "home",
    "listen",
    "random",
    "node",
    "run",
    "prefix",
    "id",
    "session_cookie",
    "credential",
];

/// Whether a byte may stand in a placeholder's name.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

/// Whether `name` can name a `{placeholder}`: a-z, 0-9 and `_`, not empty.
/// Handle fields and `[pod] fields` become placeholders, so they follow it.
pub(crate) fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_name_byte)
}

/// What a `|filter` of a placeholder does to its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Filter {
    /// `base64`: the value's bytes in standard base64, padded
    /// (`ct-a` → `Y3QtYQ==`).
    Base64,
    /// `base64url`: the URL-safe alphabet, unpadded (`ct-a?` → `Y3QtYT8`).
    Base64Url,
    /// `next`: the value with its last byte plus one, the end of a range
    /// over the value as a prefix (`ct-run-` → `ct-run.`); a last byte of
    /// 0xFF is dropped and the one before it raised, as range scans count.
    Next,
    /// `json`: a whole JSON string, quotes included (`a"b` → `"a\"b"`);
    /// last, and in place of the escaping.
    Json,
    /// `url`: percent-encoded but for RFC 3986's unreserved characters;
    /// last, and in place of the escaping.
    Url,
    /// `raw`: as it is, not escaped at all; last.
    Raw,
}

impl Filter {
    /// Every filter, by the name a template writes.
    pub const ALL: &'static [(&'static str, Filter)] = &[
        ("base64", Filter::Base64),
        ("base64url", Filter::Base64Url),
        ("next", Filter::Next),
        ("json", Filter::Json),
        ("url", Filter::Url),
        ("raw", Filter::Raw),
    ];

    fn named(name: &str) -> Result<Filter, FilterProblem> {
        Filter::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                let known: Vec<&str> = Filter::ALL.iter().map(|(n, _)| *n).collect();
                FilterProblem::NotAFilter {
                    name: name.to_owned(),
                    known: known.join(", "),
                }
            })
    }

    /// The name a template writes.
    pub fn name(self) -> &'static str {
        Filter::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether it encodes the value for where it goes, so that it comes last.
    fn is_final(self) -> bool {
        matches!(self, Filter::Json | Filter::Url | Filter::Raw)
    }
}

/// A placeholder found in a template: its key (or the literal text it
/// filters) and its filters' text.
struct Placeholder<'t> {
    key: &'t str,
    /// `{'/ns/{prefix}'|base64}`: literal text, its own placeholders filled
    /// as they are, then filtered as a whole; `key` is empty.
    literal: Option<&'t str>,
    /// `|base64|json`, or empty.
    filters: &'t str,
}

impl Placeholder<'_> {
    /// The key and its filters, as the template writes them inside braces.
    fn written(&self) -> String {
        match self.literal {
            Some(text) => format!("'{text}'{}", self.filters),
            None => format!("{}{}", self.key, self.filters),
        }
    }

    fn filters(&self) -> Result<Vec<Filter>, FilterProblem> {
        let filters: Vec<Filter> = self
            .filters
            .split('|')
            .skip(1)
            .map(Filter::named)
            .collect::<Result<_, _>>()?;
        if let Some(pos) = filters.iter().position(|f| f.is_final()) {
            if pos + 1 < filters.len() {
                return Err(FilterProblem::NotLast {
                    placeholder: self.written(),
                    filter: filters[pos].name(),
                });
            }
        }
        Ok(filters)
    }

    /// The value of this placeholder, filtered, then escaped by `escape`
    /// unless a filter encoded it already.
    fn render(&self, value: &str, escape: fn(&str) -> String) -> Result<String, FilterProblem> {
        use base64::Engine as _;
        let filters = self.filters()?;
        let mut bytes = value.as_bytes().to_vec();
        let text = |bytes: Vec<u8>, then: &'static str| {
            String::from_utf8(bytes).map_err(|_| FilterProblem::NotUtf8 {
                placeholder: self.written(),
                then,
            })
        };
        for filter in filters {
            bytes = match filter {
                Filter::Base64 => base64::engine::general_purpose::STANDARD
                    .encode(&bytes)
                    .into_bytes(),
                Filter::Base64Url => base64::engine::general_purpose::URL_SAFE_NO_PAD
                    .encode(&bytes)
                    .into_bytes(),
                Filter::Next => next_prefix(bytes),
                Filter::Json => {
                    let s = text(bytes, "`|json`")?;
                    return Ok(serde_json::Value::String(s).to_string());
                }
                Filter::Url => return Ok(encode(&text(bytes, "`|url`")?)),
                Filter::Raw => return text(bytes, "`|raw`"),
            };
        }
        Ok(escape(&text(bytes, "it is escaped")?))
    }
}

/// The end of the range of keys that start with `prefix`: its last byte
/// plus one, a last 0xFF dropped and carried. A prefix of 0xFF bytes only
/// has no end: `\0`, as range scans write "to the end".
fn next_prefix(mut prefix: Vec<u8>) -> Vec<u8> {
    while let Some(last) = prefix.pop() {
        if last < 0xFF {
            prefix.push(last + 1);
            return prefix;
        }
    }
    vec![0]
}

/// The next placeholder of `text`: the text before it, the placeholder,
/// and the text after it. `None` when there is none left.
fn next_placeholder(text: &str) -> Option<(&str, Placeholder<'_>, &str)> {
    let mut from = 0;
    while let Some(open) = text[from..].find('{').map(|i| from + i) {
        let after = &text[open + 1..];
        if let Some((placeholder, rest)) = literal_placeholder(after) {
            return Some((&text[..open], placeholder, rest));
        }
        let len = after.bytes().take_while(|b| is_name_byte(*b)).count();
        let filters = filters_len(&after[len..]);
        let end = len + filters;
        let well_formed = filters == 0 || after[len..end].starts_with('|');
        if len > 0 && well_formed && after.as_bytes().get(end) == Some(&b'}') {
            let placeholder = Placeholder {
                key: &after[..len],
                literal: None,
                filters: &after[len..end],
            };
            return Some((&text[..open], placeholder, &after[end + 1..]));
        }
        from = open + 1;
    }
    None
}

/// The length of the filters' text (`|base64|json`) at the start of `text`.
fn filters_len(text: &str) -> usize {
    text.bytes()
        .take_while(|b| *b == b'|' || b.is_ascii_lowercase() || b.is_ascii_digit())
        .count()
}

/// `'TEXT'|filter…}` after an opening brace: literal text (no `'` in it)
/// with at least one filter, and what follows the closing brace. Filters
/// apply to literal text too, for what a service wants encoded whole: a
/// key range under a namespace, `{'/ns/{prefix}'|base64}`.
fn literal_placeholder(after: &str) -> Option<(Placeholder<'_>, &str)> {
    let inner = after.strip_prefix('\'')?;
    let close = inner.find('\'')?;
    let tail = &inner[close + 1..];
    let filters = filters_len(tail);
    if filters == 0 || !tail.starts_with('|') || tail.as_bytes().get(filters) != Some(&b'}') {
        return None;
    }
    let placeholder = Placeholder {
        key: "",
        literal: Some(&inner[..close]),
        filters: &tail[..filters],
    };
    Some((placeholder, &tail[filters + 1..]))
}

/// A JSON pointer with one `*` over an array, split at it: the array and
/// the path in each item, `"/items/*/name"` → `("/items", "/name")`.
pub(crate) fn split_item_pointer(text: &str) -> Option<(String, String)> {
    match text.split_once("/*") {
        Some((array, rest))
            if !rest.contains('*') && (array.is_empty() || array.starts_with('/')) =>
        {
            Some((array.to_owned(), rest.to_owned()))
        }
        _ => None,
    }
}

/// The placeholders `text` uses, in order, by key (filters left off).
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some((_, placeholder, after)) = next_placeholder(rest) {
        match placeholder.literal {
            Some(literal) => found.extend(placeholders(literal)),
            None => found.push(placeholder.key),
        }
        rest = after;
    }
    found
}

/// Checks the filters of every placeholder of `text`, without values: a
/// template's mistakes are found when it is loaded, not when it is sent.
pub(crate) fn check_filters(text: &str) -> Result<(), TemplateError> {
    let mut rest = text;
    while let Some((_, placeholder, after)) = next_placeholder(rest) {
        placeholder
            .filters()
            .map_err(|problem| TemplateError::Filter {
                text: text.to_owned(),
                problem,
            })?;
        if let Some(literal) = placeholder.literal {
            check_filters(literal)?;
        }
        rest = after;
    }
    Ok(())
}

/// Fills every placeholder of `text` from `values`, each through its
/// filters and then `escape`.
pub fn fill(
    text: &str,
    values: &Values<'_>,
    escape: fn(&str) -> String,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, placeholder, after)) = next_placeholder(rest) {
        out.push_str(before);
        let key = placeholder.key;
        let literal = match placeholder.literal {
            Some(literal) => Some(fill(literal, values, verbatim)?),
            None => None,
        };
        match literal.as_deref().or_else(|| values.get(key)) {
            Some(value) => out.push_str(&placeholder.render(value, escape).map_err(|problem| {
                TemplateError::Filter {
                    text: text.to_owned(),
                    problem,
                }
            })?),
            None => {
                return Err(TemplateError::Unknown {
                    text: text.to_owned(),
                    key: key.to_owned(),
                    known: values.names(),
                })
            }
        }
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
}

/// The `Content-Type` of a body a template made: JSON when it starts as
/// JSON does, a form otherwise (`q=…`, as query endpoints take it).
pub fn body_content_type(body: &str) -> &'static str {
    if body.trim_start().starts_with(['{', '[']) {
        "application/json"
    } else {
        "application/x-www-form-urlencoded"
    }
}

/// Leaves a value as it is: for environment variables and command lines.
pub fn verbatim(value: &str) -> String {
    value.to_owned()
}

/// Everything but RFC 3986's unreserved characters.
const NOT_UNRESERVED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes everything but RFC 3986's unreserved characters, so a
/// value is safe in a path segment and in a query.
pub fn encode(value: &str) -> String {
    percent_encoding::utf8_percent_encode(value, NOT_UNRESERVED).to_string()
}

/// The inside of a JSON string holding `value`.
pub fn json_escape(value: &str) -> String {
    let quoted = serde_json::to_string(value).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Filters apply to literal text, its own placeholders filled first:
    /// a key range under a namespace is encoded whole.
    #[test]
    fn filters_apply_to_literal_text_with_its_placeholders() {
        let v = Values::new().with("prefix", "ct-r-");
        let filled = fill(
            r#"{"key": "{'/ns/{prefix}'|base64}", "end": "{'/ns/{prefix}'|next|base64}", "all": "{'/'|base64url}"}"#,
            &v,
            json_escape,
        )
        .unwrap();
        assert_eq!(
            filled,
            r#"{"key": "L25zL2N0LXIt", "end": "L25zL2N0LXIu", "all": "Lw"}"#
        );
        assert_eq!(placeholders("{'/ns/{prefix}'|base64}"), ["prefix"]);
        // Without a filter, quotes in braces are text.
        assert_eq!(fill("{'a'}", &v, verbatim).unwrap(), "{'a'}");
        let e = fill("{'/ns/{nope}'|base64}", &v, verbatim).unwrap_err();
        assert!(e.to_string().contains("`{nope}`"), "{e}");
        let e = check_filters("{'x'|base65}").unwrap_err();
        assert!(e.to_string().contains("`|base65` is not a filter"), "{e}");
    }

    #[test]
    fn placeholders_are_filled_and_braces_of_json_are_text() {
        let t = RequestTemplate::parse("POST /api/{coll}/records?filter={q}")
            .unwrap()
            .with_body(Some(r#"{"identity": "{user}", "n": {"x": 1}}"#.to_owned()));
        let v = Values::new()
            .with("coll", "a b")
            .with("q", "(x='1')")
            .with("user", "me\"you");
        assert_eq!(
            t.render_path(&v).unwrap(),
            "/api/a%20b/records?filter=%28x%3D%271%27%29"
        );
        assert_eq!(
            t.render_body(&v).unwrap().unwrap(),
            r#"{"identity": "me\"you", "n": {"x": 1}}"#
        );
        assert_eq!(placeholders(t.body().unwrap()), ["user"]);
        assert!(t.uses("coll") && t.uses("user") && !t.uses("name"));
    }

    #[test]
    fn an_unknown_placeholder_is_named_with_the_known_ones() {
        let e = fill(
            "/x/{usr}",
            &Values::new().with("user", "u").with("id", "1"),
            encode,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("`{usr}`") && e.contains("{id}, {user}"), "{e}");
    }

    #[test]
    fn filters_change_a_value_before_it_is_escaped_for_where_it_goes() {
        let v = Values::new()
            .with("name", "ct-a?")
            .with("prefix", "ct-run-")
            .with("q", "a\"b");
        let path = |t: &str| fill(t, &v, encode).unwrap();
        let body = |t: &str| fill(t, &v, json_escape).unwrap();
        // base64's `+`, `/` and `=` are still percent-encoded in a path.
        assert_eq!(path("/k/{name|base64}"), "/k/Y3QtYT8%3D");
        assert_eq!(
            body(r#"{"key": "{name|base64}"}"#),
            r#"{"key": "Y3QtYT8="}"#
        );
        assert_eq!(path("/k/{name|base64url}"), "/k/Y3QtYT8");
        assert_eq!(
            body(r#"{"key": "{prefix|base64}", "range_end": "{prefix|next|base64}"}"#),
            r#"{"key": "Y3QtcnVuLQ==", "range_end": "Y3QtcnVuLg=="}"#
        );
        // A final filter replaces the escaping: a whole JSON string...
        assert_eq!(body(r#"{"q": {q|json}}"#), r#"{"q": "a\"b"}"#);
        // ...percent-encoding wherever the template is, and nothing at all.
        assert_eq!(body("q={name|url}"), "q=ct-a%3F");
        assert_eq!(path("/{name|raw}"), "/ct-a?");
        assert!(RequestTemplate::parse("GET /k/{name|base64}")
            .unwrap()
            .uses("name"));
    }

    #[test]
    fn the_end_of_a_prefix_range_carries_past_0xff() {
        assert_eq!(next_prefix(b"ab".to_vec()), b"ac");
        assert_eq!(next_prefix(vec![b'a', 0xFF]), b"b");
        assert_eq!(next_prefix(vec![0xFF, 0xFF]), [0]);
    }

    #[test]
    fn a_bad_filter_is_named_with_the_known_ones_when_the_template_is_loaded() {
        let e = RequestTemplate::parse("GET /k/{name|base65}")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`|base65` is not a filter") && e.contains("base64, base64url, next"),
            "{e}"
        );
        let e = check_filters(r#"{"k": {name|json|base64}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`|json`") && e.contains("comes last"), "{e}");
        // Bytes that are not text must be encoded before they are sent.
        let v = Values::new().with("k", "\u{7f}");
        let e = fill("/{k|next}", &v, encode).unwrap_err().to_string();
        assert!(e.contains("not UTF-8") && e.contains("|base64"), "{e}");
        // A brace that is not a placeholder is still text; a filter left
        // empty is a mistake.
        let v = Values::new().with("a", "x");
        assert_eq!(fill("{|a} {a}", &v, verbatim).unwrap(), "{|a} x");
        let e = fill("{a|}", &v, verbatim).unwrap_err().to_string();
        assert!(e.contains("`|` is not a filter"), "{e}");
    }

    #[test]
    fn bad_requests_say_what_to_write() {
        assert!(RequestTemplate::parse("/x")
            .unwrap_err()
            .to_string()
            .contains("METHOD /path"));
        assert!(RequestTemplate::parse("GET x")
            .unwrap_err()
            .to_string()
            .contains("start with `/`"));
        assert!(RequestTemplate::parse("G@T /x")
            .unwrap_err()
            .to_string()
            .contains("not an HTTP method"));
    }
}
