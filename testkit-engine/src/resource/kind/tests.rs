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
