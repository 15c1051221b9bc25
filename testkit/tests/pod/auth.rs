//! The suite describes its service's auth: against the real `sandboxd`,
//! configured each way it can take a credential, and with the mistakes a
//! suite author makes, each named in its error.

use std::time::Duration;

use testkit_engine::config::SuiteConfig;
use testkit_engine::pod::{check_auth, connect, PodHandle};

use super::support::runtime;

fn suite(toml: &str) -> SuiteConfig {
    SuiteConfig::parse(toml, std::path::Path::new("/suite/testkit.toml")).unwrap()
}

/// What connecting to `handle` with `config` fails with.
fn connect_error(rt: &tokio::runtime::Runtime, handle: &PodHandle, config: &SuiteConfig) -> String {
    rt.block_on(connect(handle.clone(), config, None))
        .unwrap_err()
        .to_string()
}

/// A sandboxd with a long token window, stopped when dropped (so that a
/// failed assertion leaves nothing running), and its validated handle.
struct Started {
    handle: PodHandle,
    _server: test_support::Sandboxd,
}

fn started() -> Started {
    let server = test_support::Sandboxd::start(&["--token-window", "30m"]);
    let handle = PodHandle::parse(server.handle_json(), &Default::default()).unwrap();
    Started {
        handle,
        _server: server,
    }
}

#[test]
fn bearer_without_login_and_a_named_header_both_reach_the_pod() {
    let rt = runtime();
    let pod = started();
    for toml in [
        "[auth]\nsend = \"bearer\"\nprobe = \"GET /api/sandboxes\"",
        "[auth]\nsend = \"header\"\nheader = \"Authorization\"\nprefix = \"Bearer \"\nprobe = \"GET /api/sandboxes\"",
    ] {
        let config = suite(toml);
        let connected = rt
            .block_on(connect(pod.handle.clone(), &config, None))
            .unwrap();
        let report = rt
            .block_on(check_auth(&connected, Duration::from_secs(10)))
            .unwrap();
        assert!(report.ok(), "{toml}: {}", report.summary());
        assert!(
            report.summary().contains("GET /api/sandboxes") && report.url.ends_with("/api/sandboxes"),
            "{}",
            report.summary()
        );
        // No session cookie without a login: the token itself goes along.
        let resp = rt
            .block_on(connected.send(|c| c.get(connected.url("/api/capabilities"))))
            .unwrap();
        assert_eq!(resp.status(), 200, "{toml}");
    }
}

#[test]
fn a_probe_the_service_does_not_have_is_named_with_its_url() {
    let rt = runtime();
    let pod = started();
    let config = suite("[auth]\nsend = \"bearer\"\nprobe = \"GET /api/nowhere\"");
    let connected = rt
        .block_on(connect(pod.handle.clone(), &config, None))
        .unwrap();
    let report = rt
        .block_on(check_auth(&connected, Duration::from_secs(10)))
        .unwrap();
    assert!(!report.ok());
    let summary = report.summary();
    assert!(
        summary.contains("GET /api/nowhere")
            && summary.contains(&format!("{}/api/nowhere", pod.handle.base_url()))
            && summary.contains("refused means 401 or 403"),
        "{summary}"
    );
    // A header the service ignores. A suite that writes its own [auth] and
    // no [capabilities] asks no capabilities endpoint (it used to ask
    // sandboxd's `/api/capabilities` of any service): connecting asks
    // nothing, and the auth check says what is wrong…
    let ignored = "[auth]\nsend = \"header\"\nheader = \"X-Token\"\nprobe = \"GET /api/sandboxes\"";
    let connected = rt
        .block_on(connect(pod.handle.clone(), &suite(ignored), None))
        .unwrap();
    assert!(connected.capabilities().is_empty());
    let report = rt
        .block_on(check_auth(&connected, Duration::from_secs(10)))
        .unwrap();
    assert!(!report.ok(), "{}", report.summary());
    assert!(
        report
            .summary()
            .contains("with the credential answered 401"),
        "{}",
        report.summary()
    );
    // …and an endpoint the suite names is asked, and says so too.
    let asked = format!("{ignored}\n[capabilities]\nrequest = \"GET /api/capabilities\"");
    let err = connect_error(&rt, &pod.handle, &suite(&asked));
    assert!(
        err.contains("[capabilities] GET /api/capabilities") && err.contains("answered 401"),
        "{err}"
    );
    // Without [auth] either, the suite is sandboxd's, and so is the default.
    assert_eq!(
        suite("").capabilities.request.as_deref(),
        Some("GET /api/capabilities")
    );
}

#[test]
fn a_refused_login_names_the_request_and_what_to_check() {
    let rt = runtime();
    let pod = started();
    let config = suite(
        "[auth]\nprobe = \"GET /api/sandboxes\"\n[auth.login]\nrequest = \"POST /api/login/{user}\"\nbody = '{\"u\": \"{user}\"}'\nsend = \"none\"\ncookie = true",
    );
    // The handle has no `user`: the placeholder is named with those there are.
    let err = connect_error(&rt, &pod.handle, &config);
    assert!(
        err.contains("`{user}`") && err.contains("{base_url}"),
        "{err}"
    );
    let config = suite(
        "[auth]\nprobe = \"GET /api/sandboxes\"\n[auth.login]\nrequest = \"GET /api/nope\"\ncookie = true",
    );
    let err = connect_error(&rt, &pod.handle, &config);
    assert!(
        err.contains("[auth.login] GET /api/nope answered 404") && err.contains("testkit.toml"),
        "{err}"
    );
    assert!(!err.contains(pod.handle.token()), "the token leaked: {err}");
}

#[test]
fn a_renewed_credential_is_obtained_once_for_every_process_of_the_run() {
    let results = tempfile::tempdir().unwrap();
    let rt = runtime();
    let pod = started();
    let config = SuiteConfig::default();
    // Two processes of one run: the second reuses the first's session.
    let a = rt
        .block_on(connect(pod.handle.clone(), &config, Some(results.path())))
        .unwrap();
    let b = rt
        .block_on(connect(pod.handle.clone(), &config, Some(results.path())))
        .unwrap();
    assert_eq!(
        (a.credential_generation(), b.credential_generation()),
        (1, 1)
    );
    // `a` saw its credential expire and logged in again.
    rt.block_on(a.renew()).unwrap();
    assert_eq!(a.credential_generation(), 2);
    // `b` then saw generation 1 expire too: it takes `a`'s, it does not log
    // in a third time.
    rt.block_on(b.renew()).unwrap();
    assert_eq!(b.credential_generation(), 2);
    let saved: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(results.path().join("session.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["generation"], 2, "{saved}");
    for p in [&a, &b] {
        let resp = rt
            .block_on(p.send(|c| c.get(p.url("/api/sandboxes"))))
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
}

#[test]
fn handles_carry_extra_fields_and_need_a_token_only_when_the_auth_sends_one() {
    let base = r#"{"name":"p","base_url":"http://127.0.0.1:4000","port":4000"#;
    let with_user = format!(r#"{base},"user":"admin@x.test","password":"s3cret-pass"}}"#);
    let needs_token = testkit_engine::pod::HandlePolicy::from_suite(&SuiteConfig::default());
    let err = PodHandle::parse(&with_user, &needs_token).unwrap_err();
    assert_eq!(err.field_name(), Some("token"));
    assert!(err.to_string().contains("[auth]"), "{err}");
    let login = suite(
        "[pod]\npublic_fields = [\"user\"]\n[auth]\nsend = \"header\"\nheader = \"Authorization\"\nprobe = \"GET /x\"\n[auth.login]\nrequest = \"POST /login\"\nbody = '{\"u\": \"{user}\", \"p\": \"{password}\"}'\nsend = \"none\"\ntoken = \"/token\"",
    );
    let policy = testkit_engine::pod::HandlePolicy::from_suite(&login);
    let handle = PodHandle::parse(&with_user, &policy).unwrap();
    assert_eq!(handle.field("user"), Some("admin@x.test"));
    assert_eq!(handle.field("password"), Some("s3cret-pass"));
    assert_eq!(handle.token(), "");
    // The password is a secret, the user is declared public.
    handle.register_secrets();
    let shown = testkit_engine::redact("user admin@x.test password s3cret-pass").into_owned();
    assert!(
        shown.contains("admin@x.test") && !shown.contains("s3cret-pass"),
        "{shown}"
    );
    assert!(!format!("{handle:?}").contains("s3cret-pass"));
    // Extra fields are strings with names that can be placeholders.
    let err = PodHandle::parse(&format!(r#"{base},"retries":3}}"#), &policy).unwrap_err();
    assert!(
        err.to_string().contains("`retries` must be a string"),
        "{err}"
    );
    let err = PodHandle::parse(&format!(r#"{base},"Api-Key":"k"}}"#), &policy).unwrap_err();
    assert!(
        err.to_string().contains("\"Api-Key\" is not a valid name"),
        "{err}"
    );
}

#[test]
fn auth_config_mistakes_name_the_key_and_the_fix() {
    let parse = |t: &str| {
        SuiteConfig::parse(t, std::path::Path::new("/suite/testkit.toml"))
            .unwrap_err()
            .to_string()
    };
    let cases = [
        (
            "[auth]\nsend = \"header\"\nprobe = \"GET /x\"",
            "auth.header",
        ),
        (
            "[auth]\nsend = \"cookie\"\nprobe = \"GET /x\"",
            "auth.cookie",
        ),
        ("[auth]\nsend = \"bearer\"", "auth.probe"),
        ("[auth]\nprobe = \"/x\"", "auth.probe"),
        (
            "[auth]\nprobe = \"GET /x\"\nrefused = [200]",
            "auth.refused",
        ),
        (
            "[auth]\nprobe = \"GET /x\"\n[auth.login]\nrequest = \"POST /l\"",
            "auth.login",
        ),
        (
            "[auth]\nprobe = \"GET /x\"\n[auth.login]\nrequest = \"POST /l\"\ntoken = \"token\"",
            "auth.login.token",
        ),
        ("[auth]\nsend = \"sometimes\"", "sometimes"),
        ("[pod]\nauth_path = \"/x\"", "auth_path"),
        ("[pod]\nfields = { user = \"u\" }", "ready = \"health\""),
        (
            "[pod]\nready = \"health\"\nfields = { port = \"1\" }",
            "pod.fields",
        ),
        (
            "[capabilities]\nrequest = \"GET /c\"\npointer = \"caps\"",
            "capabilities.pointer",
        ),
    ];
    for (toml, needle) in cases {
        let e = parse(toml);
        assert!(
            e.contains(needle) && e.contains("/suite/testkit.toml"),
            "{toml:?}: {needle:?} not in {e}"
        );
    }
}

/// `[auth] probe_body`: a probe that is a `POST` with a body (here, an
/// exec in a sandbox, which sandboxd refuses without its argv) is sent
/// with its body, with the credential and without.
#[test]
fn a_probe_with_a_body_is_sent_with_it() {
    let rt = runtime();
    let pod = started();
    let bearer = suite("[auth]\nsend = \"bearer\"\nprobe = \"GET /api/sandboxes\"");
    let connected = rt
        .block_on(connect(pod.handle.clone(), &bearer, None))
        .unwrap();
    let created = rt
        .block_on(connected.send(|c| {
            c.post(connected.url("/api/sandboxes"))
                .json(&serde_json::json!({ "name": "probe-box" }))
        }))
        .unwrap();
    assert!(created.status().is_success(), "{}", created.status());
    let probe = "[auth]\nsend = \"bearer\"\nprobe = \"POST /api/sandboxes/probe-box/exec\"";
    for (toml, ok) in [
        (
            format!("{probe}\nprobe_body = '{{\"argv\": [\"true\"]}}'"),
            true,
        ),
        (probe.to_owned(), false),
    ] {
        let config = suite(&toml);
        let connected = rt
            .block_on(connect(pod.handle.clone(), &config, None))
            .unwrap();
        let report = rt
            .block_on(check_auth(&connected, Duration::from_secs(10)))
            .unwrap();
        assert_eq!(report.ok(), ok, "{toml}: {}", report.summary());
        assert_eq!(report.without_token.status, Some(401), "{toml}");
    }
}
