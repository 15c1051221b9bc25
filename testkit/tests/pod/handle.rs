//! Every validation rule, one malformed handle each, built from a handle the
//! real sandboxd printed.

use serde_json::{json, Value};
use testkit_engine::pod::{HandlePolicy, PodHandle};

use crate::support::*;

#[test]
fn every_rule_names_the_field() {
    let logs = tempfile::tempdir().unwrap();
    let rt = runtime();
    let pod = Guard(Some(
        rt.block_on(testkit_engine::pod::launch(&sandboxd_spec(
            logs.path(),
            &[],
        )))
        .unwrap(),
    ));
    let real = pod.0.as_ref().unwrap().handle.clone();
    let base: Value = serde_json::from_str(&real.to_json()).unwrap();
    let port = real.port();
    let policy = HandlePolicy::default();
    assert_eq!(PodHandle::parse(&base.to_string(), &policy).unwrap(), real);

    let with = |field: &str, value: Value| {
        let mut v = base.clone();
        v[field] = value;
        v.to_string()
    };
    let without = |field: &str| {
        let mut v = base.clone();
        v.as_object_mut().unwrap().remove(field);
        v.to_string()
    };
    let url = |s: &str| with("base_url", json!(s.replace("PORT", &port.to_string())));
    let table: Vec<(&str, String, &str, &str)> = vec![
        ("name missing", without("name"), "name", "missing"),
        ("name empty", with("name", json!("")), "name", "empty"),
        (
            "name not a string",
            with("name", json!(7)),
            "name",
            "string",
        ),
        (
            "base_url missing",
            without("base_url"),
            "base_url",
            "missing",
        ),
        (
            "base_url ftp",
            url("ftp://127.0.0.1:PORT"),
            "base_url",
            "scheme",
        ),
        (
            "base_url no scheme",
            url("127.0.0.1:PORT"),
            "base_url",
            "not a URL",
        ),
        (
            "base_url no port",
            url("http://127.0.0.1"),
            "base_url",
            "explicit port",
        ),
        (
            "base_url port 0",
            url("http://127.0.0.1:0"),
            "base_url",
            "port",
        ),
        (
            "base_url port 65536",
            url("http://127.0.0.1:65536"),
            "base_url",
            "port",
        ),
        (
            "base_url port with zero",
            url("http://127.0.0.1:0PORT"),
            "base_url",
            "port",
        ),
        (
            "base_url remote host",
            url("http://example.com:PORT"),
            "base_url",
            "not loopback",
        ),
        (
            "base_url path",
            url("http://127.0.0.1:PORT/api"),
            "base_url",
            "path",
        ),
        (
            "base_url query",
            url("http://127.0.0.1:PORT?x=1"),
            "base_url",
            "path",
        ),
        (
            "base_url credentials",
            url("http://user:pw@127.0.0.1:PORT"),
            "base_url",
            "credentials",
        ),
        (
            "base_url whitespace",
            url("http://127.0.0.1:PORT "),
            "base_url",
            "whitespace",
        ),
        (
            "base_url control",
            url("http://127.0.0.1:PORT\u{7}"),
            "base_url",
            "control",
        ),
        ("port missing", without("port"), "port", "missing"),
        (
            "port string",
            with("port", json!(port.to_string())),
            "port",
            "integer",
        ),
        (
            "port float",
            with("port", json!(f64::from(port) + 0.5)),
            "port",
            "decimal integer",
        ),
        (
            "port negative",
            with("port", json!(-1)),
            "port",
            "decimal integer",
        ),
        (
            "port out of range",
            with("port", json!(70000)),
            "port",
            "1 to 65535",
        ),
        (
            "port mismatch",
            with("port", json!(if port == 1 { 2 } else { port - 1 })),
            "port",
            "agree",
        ),
        ("token missing", without("token"), "token", "missing"),
        ("token empty", with("token", json!("")), "token", "empty"),
        (
            "token bad char",
            with("token", json!("abc def")),
            "token",
            "alphabet",
        ),
        (
            "token not a string",
            with("token", json!(12)),
            "token",
            "string",
        ),
        (
            "capabilities not array",
            with("capabilities", json!("exec")),
            "capabilities",
            "array",
        ),
        (
            "health not a path",
            with("health", json!("health")),
            "health",
            "path",
        ),
    ];
    for (case, json, field, problem) in &table {
        let err = PodHandle::parse(json, &policy).expect_err(case);
        assert_eq!(err.field_name(), Some(*field), "{case}: {err}");
        assert!(
            err.to_string().contains(problem),
            "{case}: expected {problem:?} in: {err}"
        );
        assert!(
            !err.to_string().contains(real.token()),
            "{case}: the error shows the token: {err}"
        );
    }
    // The secret part of a URL with credentials is never echoed.
    let err = PodHandle::parse(&url("http://user:hunter2@127.0.0.1:PORT"), &policy).unwrap_err();
    assert!(!err.to_string().contains("hunter2"), "{err}");

    // Not JSON, not an object.
    assert!(PodHandle::parse("nope", &policy)
        .unwrap_err()
        .to_string()
        .contains("not valid JSON"));
    assert!(PodHandle::parse("[]", &policy)
        .unwrap_err()
        .to_string()
        .contains("object"));

    // Named remote hosts pass only when the suite allows them; protected
    // endpoints are refused even when everything else is right.
    let remote = url("https://pods.example.com:PORT");
    let allowing = HandlePolicy {
        allow_remote_hosts: vec!["pods.example.com".into()],
        ..Default::default()
    };
    assert_eq!(
        PodHandle::parse(&remote, &allowing).unwrap().base_url(),
        format!("https://pods.example.com:{port}")
    );
    let protecting = HandlePolicy {
        protected: vec![format!("127.0.0.1:{port}")],
        ..Default::default()
    };
    let err = PodHandle::parse(&base.to_string(), &protecting).unwrap_err();
    assert_eq!(err.field_name(), Some("base_url"));
    assert!(err.to_string().contains("protected"), "{err}");

    // One canonical form: scheme and host lowercased, a trailing `/` dropped.
    let canon = PodHandle::parse(&url("HTTP://LOCALHOST:PORT/"), &policy).unwrap();
    assert_eq!(canon.base_url(), format!("http://localhost:{port}"));
    assert!(!format!("{canon:?}").contains(real.token()));
}
