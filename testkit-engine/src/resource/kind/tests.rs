//! The kinds' parser and HTTP executor, against text and a real sandboxd.

use super::*;
use crate::config::SuiteConfig;
use crate::template::Values;
use std::path::Path;

fn parse(text: &str) -> Result<Kinds, KindError> {
    let table: toml::Table = toml::from_str(text).unwrap();
    let resources = table
        .get("resources")
        .and_then(|r| r.as_table())
        .cloned()
        .unwrap_or_default();
    Kinds::parse(
        &resources.into_iter().collect(),
        Path::new("/s/testkit.toml"),
        &[],
    )
}

const SANDBOX: &str = r#"
    [resources.sandbox]
    exists = "GET /api/sandboxes/{name}"
    delete = "DELETE /api/sandboxes/{name}"
    list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
    list_names = "/items/*/name"
    next_page = "/next_page_token"
    budget = 2
    delete_timeout = "5s"
"#;

#[test]
fn a_full_kind_parses() {
    let kinds = parse(SANDBOX).unwrap();
    let k = kinds.get("sandbox").unwrap();
    assert_eq!(k.budget(), Some(2));
    assert_eq!(k.delete_timeout(), Duration::from_secs(5));
    let Ops::Http(http) = &k.ops else {
        panic!("templates make an HTTP kind")
    };
    assert_eq!(http.list_names, ("/items".to_owned(), "/name".to_owned()));
    assert_eq!(
        http.exists
            .render_path(&Values::new().with("name", "a b/c"))
            .unwrap(),
        "/api/sandboxes/a%20b%2Fc"
    );
    assert_eq!(http.gone, [404]);
    assert!(!k.has_ids());
    assert_eq!(kinds.names(), "`sandbox`");
}

#[test]
fn ids_bodies_gone_rules_and_names_parse() {
    let kinds = parse(
        r#"
        [resources.record]
        exists = "GET /api/records/{id}"
        delete = "POST /api/delete"
        delete_body = '{"id": "{id}", "owner": "{user}"}'
        list = "GET /api/records?filter=(name~'{prefix}')"
        list_names = "/items/*/name"
        list_ids = "/items/*/id"
        gone = [404, 410]
        gone_if = { pointer = "/state", equals = ["deleted"] }
        names = { separator = "_", max_len = 40 }
        "#,
    )
    .unwrap();
    let k = kinds.get("record").unwrap();
    assert!(k.has_ids());
    assert_eq!(k.naming(), Naming::new('_', 40).unwrap());
    let Ops::Http(http) = &k.ops else { panic!() };
    assert_eq!(http.gone, [404, 410]);
    assert!(http.delete.body().unwrap().contains("{id}"));
    let rule = http.gone_if.as_ref().expect("gone_if parses");
    assert_eq!(rule.pointer, "/state");
    assert_eq!(rule.equals, ["deleted"]);
    assert!(!rule.missing);
    assert_eq!(http.list_ids, Some(("/items".to_owned(), "/id".to_owned())));
    assert_eq!(http.list_names, ("/items".to_owned(), "/name".to_owned()));
    let missing = parse(
        r#"
        [resources.kv]
        exists = "POST /kv/range"
        exists_body = '{"key": "{name}"}'
        delete = "POST /kv/deleterange"
        delete_body = '{"key": "{name}"}'
        list = "POST /kv/range?prefix={prefix}"
        list_names = "/kvs/*/key"
        gone_if = { pointer = "/kvs", missing = true }
        "#,
    )
    .unwrap();
    let Ops::Http(http) = &missing.get("kv").unwrap().ops else {
        panic!()
    };
    let rule = http.gone_if.as_ref().expect("gone_if parses");
    assert!(rule.missing && rule.equals.is_empty() && rule.pointer == "/kvs");
    assert!(http.exists.body().unwrap().contains("{name}"));
}

#[test]
fn what_a_kind_lacks_is_named() {
    let e = parse(
        "[resources.r]
exists = \"GET /r/{id}\"
delete = \"DELETE /r/{id}\"
list = \"GET /r?p={prefix}\"
list_names = \"/*/name\"",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("resources.r.exists") && e.contains("list_ids"),
        "{e}"
    );
    let e = parse(
        "[resources.r]
rust = true
list = \"GET /x?{prefix}\"",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("resources.r.list") && e.contains("rust = true"),
        "{e}"
    );
    let e = parse(
        "[resources.r]
exists = \"GET /r/{name}\"",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("resources.r.delete") && e.contains("missing"),
        "{e}"
    );
    let e = parse(&SANDBOX.replace("budget = 2", "names = { separator = \"_\", max_len = 10 }"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("resources.sandbox.names") && e.contains("too short"),
        "{e}"
    );
    let e = parse(&SANDBOX.replace("budget = 2", "gone_if = { pointer = \"/s\" }"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("resources.sandbox.gone_if"), "{e}");
}

/// A `gone_if` that does not hold says what was sent and what the
/// pointer read: the filled request, never its template.
#[test]
fn a_gone_if_that_does_not_hold_names_the_request_sent_and_the_value_read() {
    let pod = test_support::Sandboxd::start(&[]);
    let config = SuiteConfig::default();
    let handle = crate::pod::PodHandle::parse(
        pod.handle_json(),
        &crate::pod::HandlePolicy::from_suite(&config),
    )
    .unwrap();
    let kinds = parse(
        r#"
        [resources.listed]
        exists = "GET /api/sandboxes?prefix=%22{name}%22&limit=1000"
        delete = "DELETE /api/sandboxes/{name}"
        list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
        list_names = "/items/*/name"
        gone_if = { pointer = "/next_page_token", equals = ["gone"] }
        "#,
    )
    .unwrap();
    let kind = kinds.get("listed").unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            let name = "ct-gone-if-probe";
            let presence = kind.exists(&pod, &ResourceRef::named(name)).await.unwrap();
            let Presence::Present(what) = presence else {
                panic!("the pointer does not say gone: {presence:?}")
            };
            assert!(
                !what.contains("{name}"),
                "the message shows the template, not the request sent: {what}"
            );
            assert!(
                what.contains(&format!("/api/sandboxes?prefix=%22{name}%22&limit=1000")),
                "the message does not name the request sent: {what}"
            );
            assert!(
                what.contains("/next_page_token") && what.contains("null"),
                "the message does not say what the pointer read: {what}"
            );
        });
}

#[test]
fn a_rust_kind_this_binary_does_not_register_is_elsewhere() {
    let kinds = parse(
        "[resources.record]
rust = true
budget = 3",
    )
    .unwrap();
    let k = kinds.get("record").unwrap();
    assert!(k.is_elsewhere());
    assert_eq!(k.budget(), Some(3));
}

#[test]
fn errors_name_the_kind_the_key_and_the_file() {
    let e = parse(&SANDBOX.replace("budget = 2", "budgit = 2"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/s/testkit.toml") && e.contains("resources.sandbox") && e.contains("budgit"),
        "{e}"
    );
    let e = parse(&SANDBOX.replace("/items/*/name", "/items/name"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("resources.sandbox.list_names"), "{e}");
    let e = parse(&SANDBOX.replace("DELETE /api/sandboxes/{name}", "DELETE /api/sandboxes"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("resources.sandbox.delete") && e.contains("{name}"),
        "{e}"
    );
    let e = parse(&SANDBOX.replace("\"5s\"", "\"soon\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("resources.sandbox.delete_timeout"), "{e}");
    let e = parse(&SANDBOX.replace("budget = 2", "budget = 0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("resources.sandbox.budget"), "{e}");
}

/// Every typed key of a kind, given a value of the wrong type, is named
/// with the kind and the key (and the element or the inner key where the
/// value is an array or a table), not just the kind.
#[test]
fn a_value_of_the_wrong_type_names_its_key() {
    let base = SANDBOX
        .replace("    budget = 2\n", "")
        .replace("    next_page = \"/next_page_token\"\n", "")
        .replace("    delete_timeout = \"5s\"\n", "");
    let cases: &[(&str, &str, &str)] = &[
        (
            "budget = \"many\"",
            "budget",
            "has the wrong type: string \"many\", expected usize",
        ),
        (
            "budget = -1",
            "budget",
            "has an invalid value: integer `-1`, expected usize",
        ),
        (
            "rust = \"yes\"",
            "rust",
            "has the wrong type: string \"yes\", expected a boolean",
        ),
        (
            "exists_body = 1",
            "exists_body",
            "has the wrong type: integer `1`, expected a string",
        ),
        (
            "delete_body = true",
            "delete_body",
            "has the wrong type: boolean `true`, expected a string",
        ),
        (
            "next_page = 3",
            "next_page",
            "has the wrong type: integer `3`, expected a string",
        ),
        (
            "list_ids = []",
            "list_ids",
            "has the wrong type: sequence, expected a string",
        ),
        (
            "delete_timeout = 30",
            "delete_timeout",
            "has the wrong type: integer `30`, expected a string",
        ),
        (
            "gone = 404",
            "gone",
            "has the wrong type: integer `404`, expected a sequence",
        ),
        (
            "gone = [404, \"410\"]",
            "gone[1]",
            "has the wrong type: string \"410\", expected u16",
        ),
        (
            "gone = [70000]",
            "gone[0]",
            "has an invalid value: integer `70000`, expected u16",
        ),
        (
            "gone_if = \"deleted\"",
            "gone_if",
            "has the wrong type: string \"deleted\", expected struct GoneIf",
        ),
        (
            "gone_if = { pointer = 1 }",
            "gone_if.pointer",
            "has the wrong type: integer `1`, expected a string",
        ),
        (
            "gone_if = { pointer = \"/s\", equals = \"x\" }",
            "gone_if.equals",
            "has the wrong type: string \"x\", expected a sequence",
        ),
        (
            "gone_if = { pointer = \"/s\", missing = 1 }",
            "gone_if.missing",
            "has the wrong type: integer `1`, expected a boolean",
        ),
        (
            "names = 5",
            "names",
            "has the wrong type: integer `5`, expected struct RawNames",
        ),
        (
            "names = { separator = \"__\" }",
            "names.separator",
            "has an invalid value: string \"__\", expected a character",
        ),
        (
            "names = { max_len = \"40\" }",
            "names.max_len",
            "has the wrong type: string \"40\", expected usize",
        ),
    ];
    for (line, key, problem) in cases {
        let e = parse(&format!("{base}    {line}\n"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!("invalid /s/testkit.toml: `resources.sandbox.{key}` {problem}"),
            "{line}"
        );
    }
    // The required templates, of the wrong type.
    for key in ["exists", "delete", "list", "list_names"] {
        let text = base
            .lines()
            .map(|l| {
                if l.trim_start().starts_with(&format!("{key} =")) {
                    format!("    {key} = 1")
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let e = parse(&text).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "invalid /s/testkit.toml: `resources.sandbox.{key}` has the wrong type: \
                 integer `1`, expected a string"
            )
        );
    }
    let e = parse("[resources]\nsandbox = 5").unwrap_err().to_string();
    assert!(
        e.contains("`resources.sandbox` is 5, not a table: expected the kind's keys"),
        "{e}"
    );
}

/// A `delete_timeout` of zero or past a day is refused where it is read:
/// past a day, the deadline of every delete would overflow the clock.
#[test]
fn a_delete_timeout_is_more_than_zero_and_at_most_a_day() {
    for (value, reason) in [
        ("0s", "it is zero"),
        ("5000000000000000h", "it is longer than 24h"),
        ("25h", "it is longer than 24h"),
    ] {
        let e = parse(&SANDBOX.replace("\"5s\"", &format!("{value:?}")))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "invalid /s/testkit.toml: `resources.sandbox.delete_timeout` is {value:?}: \
                 {reason}; give a duration from 1ms to 24h, such as 30s or 5m"
            )
        );
    }
    let kinds = parse(&SANDBOX.replace("\"5s\"", "\"24h\"")).unwrap();
    assert_eq!(
        kinds.get("sandbox").unwrap().delete_timeout(),
        crate::duration::DAY
    );
}

/// Listings and `gone_if` that fit APIs as they are, against a real
/// sandboxd: a listing that cannot filter is filtered here by the run's
/// prefix; one that leaves its array out when there is nothing is empty
/// when the kind says so (and an error naming the key when not); a
/// `gone_if` value with a placeholder is filled for the resource; a
/// listing may send a body.
#[test]
fn listings_without_a_filter_or_an_array_and_gone_if_with_placeholders() {
    let pod = test_support::Sandboxd::start(&[]);
    let config = SuiteConfig::default();
    let handle = crate::pod::PodHandle::parse(
        pod.handle_json(),
        &crate::pod::HandlePolicy::from_suite(&config),
    )
    .unwrap();
    let kinds = parse(
        r#"
        [resources.unfiltered]
        exists = "GET /api/sandboxes/{name}"
        delete = "DELETE /api/sandboxes/{name}"
        list = "GET /api/sandboxes?limit=1000"
        list_body = "{\"under\": \"{'ct-{run}-'|base64}\"}"
        list_names = "/items/*/name"
        gone_if = { pointer = "/name", equals = ["{name}"] }

        [resources.absent]
        exists = "GET /api/sandboxes/{name}"
        delete = "DELETE /api/sandboxes/{name}"
        list = "GET /api/sandboxes?prefix={prefix}"
        list_names = "/nothing/*/name"
        list_absent_is_empty = true

        [resources.strict]
        exists = "GET /api/sandboxes/{name}"
        delete = "DELETE /api/sandboxes/{name}"
        list = "GET /api/sandboxes?prefix={prefix}"
        list_names = "/nothing/*/name"
        "#,
    )
    .unwrap();
    let Ops::Http(http) = &kinds.get("unfiltered").unwrap().ops else {
        panic!("an HTTP kind")
    };
    assert_eq!(
        http.list
            .render_body(&Values::new().with("run", "r"))
            .unwrap()
            .as_deref(),
        Some(r#"{"under": "Y3Qtci0="}"#)
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let pod = crate::pod::connect(handle, &config, None).await.unwrap();
            for name in ["ct-listrun-a", "ct-otherrun-b"] {
                let status = pod
                    .client()
                    .post(pod.url("/api/sandboxes"))
                    .json(&serde_json::json!({ "name": name }))
                    .send()
                    .await
                    .unwrap()
                    .status();
                assert!(status.is_success(), "create {name}: {status}");
            }
            let unfiltered = kinds.get("unfiltered").unwrap();
            let listed = unfiltered.list(&pod, "ct-listrun-").await.unwrap();
            let names: Vec<&str> = listed.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(names, ["ct-listrun-a"], "the run's only");
            // `/name` holds the sandbox's own name: `{name}` filled, gone.
            let presence = unfiltered
                .exists(&pod, &ResourceRef::named("ct-listrun-a"))
                .await
                .unwrap();
            assert!(matches!(presence, Presence::Gone), "{presence:?}");

            let absent = kinds.get("absent").unwrap();
            assert!(absent.list(&pod, "ct-listrun-").await.unwrap().is_empty());
            let e = kinds
                .get("strict")
                .unwrap()
                .list(&pod, "ct-listrun-")
                .await
                .unwrap_err();
            assert!(
                format!("{e:?}").contains("list_absent_is_empty = true"),
                "{e:?}"
            );
        });
}

/// A key-value store on loopback that keeps keys as bytes: `POST
/// /kv/range` with `{"key": <base64>, "range_end": <base64>}` answers
/// `{"kvs": [{"key": <base64>}…]}`, the keys in the range, or every key
/// when `loose` (a filter the store does not honour). Serves until the
/// test process ends.
fn kv_store(keys: &'static [&'static str], loose: bool) -> u16 {
    use base64::Engine as _;
    use std::io::Write;
    let b64 = base64::engine::general_purpose::STANDARD;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            let (_, body) = test_support::http::read_request(&mut conn);
            let asked: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
            let bound = |k: &str| {
                asked[k]
                    .as_str()
                    .and_then(|v| b64.decode(v).ok())
                    .unwrap_or_default()
            };
            let (from, to) = (bound("key"), bound("range_end"));
            let kvs: Vec<serde_json::Value> = keys
                .iter()
                .filter(|k| loose || (k.as_bytes() >= &from[..] && k.as_bytes() < &to[..]))
                .map(|k| serde_json::json!({ "key": b64.encode(k) }))
                .collect();
            let answer = serde_json::json!({ "kvs": kvs }).to_string();
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    port
}

/// A store that lists its keys base64-encoded: with `list_names_decode`
/// the sweep sees the run's key (it used to see none, and said "nothing
/// left"); without it, or against a store that does not honour the range,
/// a listing that carried `{prefix}` and answered other names says so,
/// naming them, instead of dropping them.
#[test]
fn listed_names_decode_and_names_a_prefixed_listing_did_not_ask_for_are_reported() {
    const KEYS: &[&str] = &["ct-lst1-abcdef-01", "ct-other-abcdef-01", "zz"];
    let kind = |decode: &str| {
        format!(
            r#"
            [resources.key]
            exists = "POST /kv/range"
            exists_body = '{{"key": "{{name|base64}}", "range_end": "{{name|next|base64}}"}}'
            delete = "POST /kv/deleterange"
            delete_body = '{{"key": "{{name|base64}}"}}'
            list = "POST /kv/range"
            list_body = '{{"key": "{{prefix|base64}}", "range_end": "{{prefix|next|base64}}"}}'
            list_names = "/kvs/*/key"
            list_absent_is_empty = true
            {decode}
            "#
        )
    };
    let config =
        SuiteConfig::parse("[auth]\nsend = \"none\"\n", Path::new("/s/testkit.toml")).unwrap();
    let pod_at = |port: u16| {
        crate::pod::PodHandle::parse(
            &serde_json::json!({
                "name": "kv",
                "base_url": format!("http://127.0.0.1:{port}"),
                "port": port,
            })
            .to_string(),
            &crate::pod::HandlePolicy::from_suite(&config),
        )
        .unwrap()
    };
    let decoded = parse(&kind("list_names_decode = \"base64\"")).unwrap();
    let raw = parse(&kind("")).unwrap();
    let e = parse(&kind("list_names_decode = \"base65\""))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("list_names_decode") && e.contains("\"base64\", \"base64url\""),
        "{e}"
    );
    let exact = kv_store(KEYS, false);
    let loose = kv_store(KEYS, true);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let pod = crate::pod::connect(pod_at(exact), &config, None)
                .await
                .unwrap();
            let listed = decoded
                .get("key")
                .unwrap()
                .list(&pod, "ct-lst1-")
                .await
                .unwrap();
            let names: Vec<&str> = listed.iter().map(|r| r.name.as_str()).collect();
            assert_eq!(names, ["ct-lst1-abcdef-01"]);

            let e = raw
                .get("key")
                .unwrap()
                .list(&pod, "ct-lst1-")
                .await
                .unwrap_err();
            let said = e.to_string();
            assert!(
                said.contains("answered 1 that do not: \"Y3QtbHN0MS1hYmNkZWYtMDE=\"")
                    && said.contains("list_names_decode"),
                "{said}"
            );

            let pod = crate::pod::connect(pod_at(loose), &config, None)
                .await
                .unwrap();
            let e = decoded
                .get("key")
                .unwrap()
                .list(&pod, "ct-lst1-")
                .await
                .unwrap_err();
            let said = e.to_string();
            assert!(
                said.contains("answered 2 that do not")
                    && said.contains("ct-other-abcdef-01")
                    && said.contains("leave `{prefix}` out of `list`"),
                "{said}"
            );
        });
}
