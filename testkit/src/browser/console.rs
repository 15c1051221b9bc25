//! The page's console as testkit keeps it: each message, uncaught
//! exception and browser log entry, read from the DevTools events. The page
//! and the film strip both hold entries.

use serde_json::Value;

/// One message of the page's console, or an uncaught exception, or a
/// browser log entry (a failed resource load, for instance).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsoleEntry {
    /// `error`, `warning`, `info`, `log`, `debug`, …
    pub level: String,
    /// The message.
    pub text: String,
}

impl std::fmt::Display for ConsoleEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.level, self.text)
    }
}

/// The console entry an event is, if it is one.
pub(super) fn console_entry(method: &str, params: &Value) -> Option<ConsoleEntry> {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("").to_owned();
    match method {
        "Runtime.consoleAPICalled" => {
            let args: Vec<String> = params
                .get("args")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .map(|a| match a.get("value") {
                    Some(Value::String(s)) => s.clone(),
                    Some(v) => v.to_string(),
                    None => s(a.get("description")),
                })
                .collect();
            let level = match s(params.get("type")).as_str() {
                "warning" => "warning".to_owned(),
                "assert" => "error".to_owned(),
                other => other.to_owned(),
            };
            Some(ConsoleEntry {
                level,
                text: args.join(" "),
            })
        }
        "Runtime.exceptionThrown" => {
            let details = params.get("exceptionDetails")?;
            let text = details
                .pointer("/exception/description")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| s(details.get("text")));
            Some(ConsoleEntry {
                level: "error".to_owned(),
                text: format!("uncaught: {text}"),
            })
        }
        "Log.entryAdded" => {
            let entry = params.get("entry")?;
            let url = s(entry.get("url"));
            let text = s(entry.get("text"));
            Some(ConsoleEntry {
                level: s(entry.get("level")),
                text: if url.is_empty() {
                    text
                } else {
                    format!("{text} ({url})")
                },
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_become_console_entries() {
        let e = console_entry(
            "Runtime.consoleAPICalled",
            &json!({"type": "error", "args": [{"type": "string", "value": "boom"}, {"type": "number", "value": 3}]}),
        )
        .unwrap();
        assert_eq!((e.level.as_str(), e.text.as_str()), ("error", "boom 3"));
        let e = console_entry(
            "Runtime.exceptionThrown",
            &json!({"exceptionDetails": {"text": "Uncaught", "exception": {"description": "TypeError: x is undefined"}}}),
        )
        .unwrap();
        assert_eq!(e.to_string(), "error: uncaught: TypeError: x is undefined");
        let e = console_entry(
            "Log.entryAdded",
            &json!({"entry": {"level": "error", "text": "Failed to load resource", "url": "http://127.0.0.1:1/x"}}),
        )
        .unwrap();
        assert_eq!(e.text, "Failed to load resource (http://127.0.0.1:1/x)");
        assert!(console_entry("Page.loadEventFired", &json!({})).is_none());
    }
}
