//! Endpoints, error statuses and the token window.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::{call, err_code, plain_client, Server};

#[tokio::test]
async fn health_needs_no_auth_and_capabilities_do() {
    let s = Server::start(&["--max-sandboxes", "7"]);
    let (st, v) = call(&plain_client(), Method::GET, &s.url("/api/health"), None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["name"], s.handle.name.as_str());
    assert!(v["uptime_ms"].is_u64());
    assert!(s.handle.name.starts_with("sandboxd-"));
    assert!(s.handle.token.len() >= 32);
    assert!(s
        .handle
        .token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));

    let (st, v) = call(
        &plain_client(),
        Method::GET,
        &s.url("/api/capabilities"),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(err_code(&v), "unauthorized");
    let (st, v) = s.get("/api/capabilities").await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        v["capabilities"],
        json!(["exec", "files", "processes", "signals"])
    );
    assert_eq!(v["limits"]["max_sandboxes"], 7);
    assert!(
        !s.log_text().contains(&s.handle.token),
        "the token was logged"
    );
}

#[tokio::test]
async fn token_window_then_session_cookie() {
    let s = Server::start(&["--token-window", "1s"]);
    let token = s.handle.token.clone();
    // Bad and missing credentials.
    let (st, v) = call(
        &crate::authed_client("nope"),
        Method::GET,
        &s.url("/api/sandboxes"),
        None,
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let (st, v) = call(
        &crate::authed_client(&format!("{token}x")),
        Method::GET,
        &s.url("/api/sandboxes"),
        None,
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    let (st, _) = call(&plain_client(), Method::GET, &s.url("/api/sandboxes"), None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);

    // The first authenticated request opens a session.
    let resp = plain_client()
        .get(s.url("/api/sandboxes"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let cookie = resp
        .headers()
        .get("set-cookie")
        .expect("session cookie")
        .to_str()
        .unwrap()
        .to_string();
    assert!(cookie.starts_with("sandboxd_session="), "{cookie}");
    for attr in ["Max-Age=7200", "HttpOnly", "Path=/"] {
        assert!(cookie.contains(attr), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_string();
    // ?token= works too, inside the window.
    let (st, _) = call(
        &plain_client(),
        Method::GET,
        &s.url(&format!("/api/capabilities?token={token}")),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    let (st, _) = s.get("/api/capabilities").await; // cookie client: opens its own session
    assert_eq!(st, StatusCode::OK);

    tokio::time::sleep(Duration::from_millis(1300)).await;
    // After the window: the raw token is refused as expired...
    let resp = plain_client()
        .get(s.url("/api/sandboxes"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(err_code(&v), "token_expired");
    assert!(v["error"]["message"].as_str().unwrap().contains("expired"));
    let (st, v) = call(
        &plain_client(),
        Method::GET,
        &s.url(&format!("/api/sandboxes?token={token}")),
        None,
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "token_expired")
    );
    // ...a bad token is still just unauthorized...
    let (st, v) = call(
        &crate::authed_client("bad"),
        Method::GET,
        &s.url("/api/sandboxes"),
        None,
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "unauthorized")
    );
    // ...and sessions keep working.
    let resp = plain_client()
        .get(s.url("/api/sandboxes"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (st, _) = s.get("/api/sandboxes").await;
    assert_eq!(st, StatusCode::OK);
    let resp = plain_client()
        .get(s.url("/api/sandboxes"))
        .header("cookie", "sandboxd_session=forged")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(!s.log_text().contains(&token), "the token was logged");
}

#[tokio::test]
async fn sandbox_crud_and_statuses() {
    let s = Server::start(&[]);
    let (st, v) = s
        .post(
            "/api/sandboxes",
            json!({"name": "alpha", "labels": {"team": "qa"}, "env": {"A": "1"}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(v["name"], "alpha");
    assert_eq!(v["labels"], json!({"team": "qa"}));
    assert_eq!(v["env"], json!({"A": "1"}));
    assert_eq!(v["state"], "ready");
    assert!(v["created_at"].as_u64().unwrap() > 1_600_000_000_000);

    let (st, v) = s.post("/api/sandboxes", json!({"name": "alpha"})).await;
    assert_eq!((st, err_code(&v)), (StatusCode::CONFLICT, "already_exists"));
    for bad in [
        "",
        "UPPER",
        "under_score",
        "-lead",
        "trail-",
        "dot.ted",
        &"x".repeat(64),
    ] {
        let (st, v) = s.post("/api/sandboxes", json!({ "name": bad })).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "invalid_name"),
            "{bad:?}"
        );
    }
    let (st, v) = s
        .post(
            "/api/sandboxes",
            json!({"name": "b", "labels": {"bad key!": "x"}}),
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    let (st, v) = s
        .post("/api/sandboxes", json!({"name": "b", "env": {"1X": "x"}}))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");

    let (st, v) = s.get("/api/sandboxes/alpha").await;
    assert_eq!((st, v["name"].as_str()), (StatusCode::OK, Some("alpha")));
    let (st, v) = s.get("/api/sandboxes/missing").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));

    let (st, v) = s.delete("/api/sandboxes/alpha").await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    assert_eq!(v["state"], "deleting");
    s.wait_gone("alpha", Duration::from_secs(10)).await;
    let (st, v) = s.delete("/api/sandboxes/alpha").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    assert!(
        !s.home.path().join("sandboxes/alpha").exists(),
        "directory left behind"
    );
}

#[tokio::test]
async fn list_pagination_labels_prefix() {
    let s = Server::start(&[]);
    for i in 0..7 {
        let team = if i % 2 == 0 { "even" } else { "odd" };
        let (st, v) = s
            .post(
                "/api/sandboxes",
                json!({"name": format!("pg-{i}"), "labels": {"team": team}}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
    }
    s.create("other").await;
    let mut names = Vec::new();
    let mut token: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &token {
            Some(t) => format!("/api/sandboxes?limit=3&page_token={t}"),
            None => "/api/sandboxes?limit=3".to_string(),
        };
        let (st, v) = s.get(&path).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        assert!(v["items"].as_array().unwrap().len() <= 3);
        names.extend(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["name"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match v["next_page_token"].as_str() {
            Some(t) => token = Some(t.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(
        names,
        ["other", "pg-0", "pg-1", "pg-2", "pg-3", "pg-4", "pg-5", "pg-6"]
    );

    let (_, v) = s.get("/api/sandboxes?label=team%3Dodd").await;
    let odd: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(odd, ["pg-1", "pg-3", "pg-5"]);
    let (_, v) = s.get("/api/sandboxes?prefix=pg-&limit=1000").await;
    assert_eq!(v["items"].as_array().unwrap().len(), 7);
    assert!(v["next_page_token"].is_null());
    let (_, v) = s.get("/api/sandboxes?prefix=oth").await;
    assert_eq!(v["items"][0]["name"], "other");

    for bad in [
        "limit=0",
        "limit=1001",
        "limit=abc",
        "page_token=zz",
        "page_token=",
        "label=novalue",
        "bogus=1",
    ] {
        let (st, v) = s.get(&format!("/api/sandboxes?{bad}")).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "bad_request"),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn request_errors_are_json() {
    let s = Server::start(&[]);
    let post_raw = |body: Vec<u8>, ct: Option<&'static str>| {
        let mut r = s.client.post(s.url("/api/sandboxes")).body(body);
        if let Some(ct) = ct {
            r = r.header("content-type", ct);
        }
        async move {
            let resp = r.send().await.unwrap();
            let st = resp.status();
            (st, resp.json::<Value>().await.unwrap())
        }
    };
    let (st, v) = post_raw(b"{not json".to_vec(), Some("application/json")).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::BAD_REQUEST, "invalid_json")
    );
    let (st, v) = post_raw(
        br#"{"name":"a","colour":"red"}"#.to_vec(),
        Some("application/json"),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown field `colour`"),
        "{v}"
    );
    let (st, v) = post_raw(br#"{"name":5}"#.to_vec(), Some("application/json")).await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid type"),
        "{v}"
    );
    let (st, v) = post_raw(br#"{}"#.to_vec(), Some("application/json")).await;
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("missing field `name`"),
        "{st} {v}"
    );
    let (st, v) = post_raw(br#"{"name":"a"}"#.to_vec(), None).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
    );
    let (st, v) = post_raw(br#"{"name":"a"}"#.to_vec(), Some("text/plain")).await;
    assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{v}");
    let mut big = br#"{"name":"a","labels":{"k":""#.to_vec();
    big.extend(std::iter::repeat_n(b'x', 2 << 20));
    big.extend(br#""}}"#);
    let (st, v) = post_raw(big, Some("application/json")).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );

    let (st, v) = s.get("/api/nothing-here").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, v) = s.call(Method::PATCH, "/api/sandboxes", None).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let (st, v) = s.call(Method::PUT, "/api/health", None).await;
    assert_eq!(st, StatusCode::METHOD_NOT_ALLOWED, "{v}");
    // The server is still fine.
    let (st, _) = s.get("/api/health").await;
    assert_eq!(st, StatusCode::OK);
}

#[tokio::test]
async fn exec_env_cwd_exit_and_timeout() {
    let s = Server::start(&[]);
    let (st, _) = s
        .post(
            "/api/sandboxes",
            json!({"name": "ex", "env": {"SB_VAR": "from-sandbox", "OVER": "sandbox"}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (st, v) = s
        .post(
            "/api/sandboxes/ex/exec",
            json!({"argv": ["sh", "-c", "echo $SB_VAR $CALL_VAR $OVER; pwd; env; echo oops >&2; exit 3"], "env": {"CALL_VAR": "from-call", "OVER": "call"}}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["exit_code"], 3);
    assert_eq!(v["signal"], Value::Null);
    assert_eq!(v["timed_out"], false);
    assert_eq!(v["stderr"], "oops\n");
    let out = v["stdout"].as_str().unwrap();
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("from-sandbox from-call call"));
    let cwd = lines.next().unwrap();
    assert!(cwd.ends_with("/sandboxes/ex/root"), "{cwd}");
    assert!(
        !out.contains(&s.handle.token),
        "the token leaked into the sandbox"
    );
    let keys: Vec<&str> = lines
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for k in &keys {
        assert!(
            ["PATH", "HOME", "PWD", "SB_VAR", "OVER", "CALL_VAR", "SHLVL", "_", "OLDPWD"]
                .contains(k),
            "unexpected env {k}: {out}"
        );
    }

    let t0 = std::time::Instant::now();
    let (st, v) = s
        .post(
            "/api/sandboxes/ex/exec",
            json!({"argv": ["sh", "-c", "sleep 30 & sleep 30"], "timeout_ms": 300}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["timed_out"], true);
    assert_eq!(v["exit_code"], Value::Null);
    assert_eq!(v["signal"], 9);
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "timeout not enforced: {:?}",
        t0.elapsed()
    );

    for (body, code) in [
        (json!({"argv": []}), "bad_request"),
        (
            json!({"argv": ["definitely-not-a-command"]}),
            "command_not_found",
        ),
        (json!({"argv": ["true"], "timeout_ms": 0}), "bad_request"),
        (
            json!({"argv": ["true"], "timeout_ms": 600_001}),
            "bad_request",
        ),
        (json!({"argv": ["true"], "extra": 1}), "invalid_json"),
    ] {
        let (st, v) = s.post("/api/sandboxes/ex/exec", body.clone()).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, code),
            "{body}"
        );
    }
    let (st, v) = s
        .post("/api/sandboxes/nope/exec", json!({"argv": ["true"]}))
        .await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    // Output is read concurrently: a large stderr does not deadlock stdout.
    let (st, v) = s
        .post(
            "/api/sandboxes/ex/exec",
            json!({"argv": ["sh", "-c", "head -c 300000 /dev/zero >&2; echo done"]}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(v["stdout"], "done\n");
    assert_eq!(v["stderr"].as_str().unwrap().len(), 300000);
}
