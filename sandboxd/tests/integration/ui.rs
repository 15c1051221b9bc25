//! The web UI over HTTP: the page and its assets are served, a visitor
//! without a session sees the sign-in, the sign-in form opens a session, and
//! the JSON calls the page's script makes work with that session alone.

use reqwest::header::{CONTENT_TYPE, LOCATION, SET_COOKIE};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{err_code, Server};

/// A client with a cookie store that does not follow redirects (to see them).
fn browser_like() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

async fn text(client: &reqwest::Client, url: &str) -> (StatusCode, String, String) {
    let resp = client.get(url).send().await.unwrap();
    let st = resp.status();
    let ct = resp.headers()[CONTENT_TYPE].to_str().unwrap().to_string();
    (st, ct, resp.text().await.unwrap())
}

async fn sign_in(client: &reqwest::Client, s: &Server, token: &str) -> reqwest::Response {
    client
        .post(s.url("/ui/sign-in"))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn visitors_without_a_session_see_the_sign_in() {
    let s = Server::start(&[]);
    let c = browser_like();
    let (st, ct, page) = text(&c, &s.url("/")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(ct.starts_with("text/html"), "{ct}");
    for needle in [
        "data-view=\"sign-in\"",
        "id=\"sign-in-form\"",
        "id=\"sign-in-token\"",
        "id=\"sign-in-submit\"",
        "action=\"/ui/sign-in\"",
        &s.handle.name,
    ] {
        assert!(page.contains(needle), "no {needle} in the page:\n{page}");
    }
    assert!(!page.contains("id=\"sign-in-error\""), "{page}");
    assert!(!page.contains(&s.handle.token), "the page holds the token");
    let (st, ct, js) = text(&c, &s.url("/ui/app.js")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(ct.starts_with("text/javascript"), "{ct}");
    assert!(js.contains("/api/sandboxes"), "{js}");
    let (st, ct, _) = text(&c, &s.url("/ui/app.css")).await;
    assert_eq!(st, StatusCode::OK);
    assert!(ct.starts_with("text/css"), "{ct}");
    // The UI opens nothing else up.
    let (st, v) = crate::call(&c, reqwest::Method::GET, &s.url("/api/sandboxes"), None).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
}

#[tokio::test]
async fn the_sign_in_form_opens_a_session_the_page_then_uses() {
    let s = Server::start(&[]);
    let c = browser_like();
    let resp = sign_in(&c, &s, "not-the-token").await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(resp.headers().get(SET_COOKIE).is_none());
    let page = resp.text().await.unwrap();
    assert!(page.contains("id=\"sign-in-error\""), "{page}");
    assert!(page.contains("invalid credentials"), "{page}");
    assert!(page.contains("data-view=\"sign-in\""), "{page}");
    let resp = c
        .post(s.url("/ui/sign-in"))
        .form(&[("other", "x")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert!(resp.text().await.unwrap().contains("`token` field"));

    let resp = sign_in(&c, &s, &s.handle.token).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[LOCATION], "/");
    let cookie = resp.headers()[SET_COOKIE].to_str().unwrap();
    assert!(
        cookie.starts_with(&format!("{}=", sandboxd::api::SESSION_COOKIE)),
        "{cookie}"
    );
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    let (_, _, page) = text(&c, &s.url("/")).await;
    assert!(page.contains("data-view=\"app\""), "{page}");
    for id in [
        "create-form",
        "create-name",
        "sandbox-list",
        "file-list",
        "error",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "no #{id}:\n{page}");
    }

    // What the script does, with nothing but the session cookie.
    let (st, v) = crate::call(
        &c,
        reqwest::Method::POST,
        &s.url("/api/sandboxes"),
        Some(json!({"name": "from-ui"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, v) = crate::call(
        &c,
        reqwest::Method::POST,
        &s.url("/api/sandboxes"),
        Some(json!({"name": "Bad Name"})),
    )
    .await;
    // The page shows `code: message` of an error answer.
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::BAD_REQUEST, "invalid_name")
    );
    let (_, v) = crate::call(
        &c,
        reqwest::Method::GET,
        &s.url("/api/sandboxes?limit=1000"),
        None,
    )
    .await;
    assert_eq!(v["items"][0]["name"], "from-ui", "{v}");
    assert_eq!(v["items"][0]["state"], "ready", "{v}");
    let resp = c
        .put(s.url("/api/sandboxes/from-ui/files/notes/a.txt"))
        .body("hello")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let (st, v) = crate::call(
        &c,
        reqwest::Method::GET,
        &s.url("/api/sandboxes/from-ui/files"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        v,
        json!({"items": [
            {"path": "notes", "kind": "dir", "size": 0},
            {"path": "notes/a.txt", "kind": "file", "size": 5},
        ], "truncated": false})
    );
    let (st, _) = crate::call(
        &c,
        reqwest::Method::DELETE,
        &s.url("/api/sandboxes/from-ui"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    s.wait_gone("from-ui", std::time::Duration::from_secs(10))
        .await;
}

#[tokio::test]
async fn an_expired_token_is_refused_by_the_form_saying_why() {
    let s = Server::start(&["--token-window", "0s"]);
    let c = browser_like();
    let resp = sign_in(&c, &s, &s.handle.token).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(resp.headers().get(SET_COOKIE).is_none());
    let page = resp.text().await.unwrap();
    assert!(page.contains("the token expired"), "{page}");
}

#[tokio::test]
async fn the_file_list_shows_the_tree_without_following_symlinks() {
    let s = Server::start(&[]);
    s.create("tree").await;
    let (_, v) = s
        .post(
            "/api/sandboxes/tree/exec",
            json!({"argv": ["sh", "-c", "mkdir -p b/c && echo 1 > b/c/f && echo 22 > a && ln -s /etc out && mkfifo p"]}),
        )
        .await;
    assert_eq!(v["exit_code"], 0, "{v}");
    let (st, v) = s.get("/api/sandboxes/tree/files").await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let got: Vec<(String, String)> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e: &Value| {
            (
                e["path"].as_str().unwrap().into(),
                e["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("a", "file"),
        ("b", "dir"),
        ("b/c", "dir"),
        ("b/c/f", "file"),
        ("out", "symlink"),
        ("p", "other"),
    ]
    .iter()
    .map(|(p, k)| (p.to_string(), k.to_string()))
    .collect();
    assert_eq!(got, want);
    let (st, v) = s.get("/api/sandboxes/nope/files").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
}
