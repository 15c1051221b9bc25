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

use std::fmt;

use reqwest::Method;

/// `METHOD /path` with an optional body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestTemplate {
    method: Method,
    path: String,
    body: Option<String>,
}

impl RequestTemplate {
    /// Parses `METHOD /path`; the error says what is wrong with an example.
    pub fn parse(text: &str) -> Result<RequestTemplate, String> {
        let (method, path) = text.trim().split_once(' ').ok_or_else(|| {
            format!("is {text:?}: expected `METHOD /path`, e.g. \"GET /api/things/{{name}}\"")
        })?;
        let method = Method::from_bytes(method.as_bytes())
            .map_err(|_| format!("is {text:?}: {method:?} is not an HTTP method"))?;
        let path = path.trim();
        if !path.starts_with('/') {
            return Err(format!("is {text:?}: the path must start with `/`"));
        }
        Ok(RequestTemplate {
            method,
            path: path.to_owned(),
            body: None,
        })
    }

    /// The same request with `body` (a template too).
    pub fn with_body(mut self, body: Option<String>) -> RequestTemplate {
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

    /// Whether the path or the body uses `{key}`.
    pub fn uses(&self, key: &str) -> bool {
        let needle = format!("{{{key}}}");
        self.path.contains(&needle) || self.body.as_deref().is_some_and(|b| b.contains(&needle))
    }

    /// The path with every placeholder filled, values percent-encoded.
    pub fn render_path(&self, values: &Values<'_>) -> Result<String, String> {
        fill(&self.path, values, encode)
    }

    /// The body with every placeholder filled, values escaped for a JSON
    /// string (bodies are JSON far more often than not; a value with no
    /// special characters is unchanged either way).
    pub fn render_body(&self, values: &Values<'_>) -> Result<Option<String>, String> {
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

    fn get(&self, key: &str) -> Option<&'a str> {
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

/// Whether a byte may stand in a placeholder's name.
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'
}

/// Whether `name` can name a `{placeholder}`: a-z, 0-9 and `_`, not empty.
/// Handle fields and `[pod] fields` become placeholders, so they follow it.
pub fn is_placeholder_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(is_name_byte)
}

/// The next placeholder of `text`: the text before it, its key, and the
/// text after it. `None` when there is none left.
fn next_placeholder(text: &str) -> Option<(&str, &str, &str)> {
    let mut from = 0;
    while let Some(open) = text[from..].find('{').map(|i| from + i) {
        let after = &text[open + 1..];
        let len = after.bytes().take_while(|b| is_name_byte(*b)).count();
        if len > 0 && after.as_bytes().get(len) == Some(&b'}') {
            return Some((&text[..open], &after[..len], &after[len + 1..]));
        }
        from = open + 1;
    }
    None
}

/// The placeholders `text` uses, in order.
pub fn placeholders(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some((_, key, after)) = next_placeholder(rest) {
        found.push(key);
        rest = after;
    }
    found
}

/// Fills every placeholder of `text` from `values`, each through `escape`.
pub fn fill(text: &str, values: &Values<'_>, escape: fn(&str) -> String) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((before, key, after)) = next_placeholder(rest) {
        out.push_str(before);
        match values.get(key) {
            Some(value) => out.push_str(&escape(value)),
            None => {
                return Err(format!(
                    "`{{{key}}}` in {text:?} is not a known placeholder (known here: {})",
                    values.names()
                ))
            }
        }
        rest = after;
    }
    out.push_str(rest);
    Ok(out)
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
        .unwrap_err();
        assert!(e.contains("`{usr}`") && e.contains("{id}, {user}"), "{e}");
    }

    #[test]
    fn bad_requests_say_what_to_write() {
        assert!(RequestTemplate::parse("/x")
            .unwrap_err()
            .contains("METHOD /path"));
        assert!(RequestTemplate::parse("GET x")
            .unwrap_err()
            .contains("start with `/`"));
        assert!(RequestTemplate::parse("G@T /x")
            .unwrap_err()
            .contains("not an HTTP method"));
    }
}
