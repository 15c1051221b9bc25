//! Restart with the same HOME, SIGTERM, concurrency limits.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::{err_code, wait_group_gone, Server};

#[tokio::test]
async fn restart_keeps_identity_sandboxes_files_and_sessions() {
    let mut s = Server::start(&[]);
    let (st, _) = s
        .post(
            "/api/sandboxes",
            json!({"name": "keep", "labels": {"k": "v"}, "env": {"E": "1"}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let resp = s
        .client
        .put(s.url("/api/sandboxes/keep/files/notes.txt"))
        .body("persist me")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let resp = crate::plain_client()
        .get(s.url("/api/sandboxes"))
        .bearer_auth(&s.handle.token)
        .send()
        .await
        .unwrap();
    let session = resp.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let (_, v) = s
        .post(
            "/api/sandboxes/keep/processes",
            json!({"argv": ["sleep", "1000"]}),
        )
        .await;
    let pgid = v["pid"].as_i64().unwrap() as i32;
    assert!(s.terminate().success());
    assert!(wait_group_gone(pgid, Duration::from_secs(2)));

    // Raw token already expired on the new instance: only the stored session can get in.
    let s2 = Server::start_in(Arc::clone(&s.home), &["--token-window", "0s"]);
    assert_eq!(s2.handle.name, s.handle.name);
    assert_eq!(s2.handle.token, s.handle.token);
    assert_ne!(s2.handle.port, 0);
    let (st, v) = crate::call(
        &crate::authed_client(&s2.handle.token),
        reqwest::Method::GET,
        &s2.url("/api/sandboxes"),
        None,
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::UNAUTHORIZED, "token_expired")
    );
    let get = |path: &str| {
        crate::plain_client()
            .get(s2.url(path))
            .header("cookie", &session)
            .send()
    };
    let resp = get("/api/sandboxes/keep").await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        (
            v["labels"]["k"].as_str(),
            v["env"]["E"].as_str(),
            v["state"].as_str()
        ),
        (Some("v"), Some("1"), Some("ready"))
    );
    let resp = get("/api/sandboxes/keep/files/notes.txt").await.unwrap();
    assert_eq!(resp.text().await.unwrap(), "persist me");
    // Processes did not survive the restart.
    let v: serde_json::Value = get("/api/sandboxes/keep/processes")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(v["items"], json!([]));
}

#[tokio::test]
async fn sigterm_leaves_no_process_behind() {
    let mut s = Server::start(&[]);
    let mut groups = Vec::new();
    for i in 0..3 {
        let name = format!("st-{i}");
        s.create(&name).await;
        let (st, v) = s
            .post(
                &format!("/api/sandboxes/{name}/processes"),
                json!({"argv": ["sleep", "1000"]}),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED);
        groups.push(v["pid"].as_i64().unwrap() as i32);
    }
    // A group with several members, one of which ignores SIGTERM.
    let (_, v) = s
        .post(
            "/api/sandboxes/st-0/processes",
            json!({"argv": ["sh", "-c", "(trap '' TERM; sleep 1000) & sleep 1000"]}),
        )
        .await;
    groups.push(v["pid"].as_i64().unwrap() as i32);
    // An exec in flight, which records its group id in a file first.
    let client = s.client.clone();
    let url = s.url("/api/sandboxes/st-1/exec");
    let inflight = tokio::spawn(async move {
        client.post(url).json(&json!({"argv": ["sh", "-c", "echo $$ > pgid; exec sleep 1000"], "timeout_ms": 600000})).send().await
    });
    let mut exec_pgid = None;
    for _ in 0..100 {
        let resp = s
            .client
            .get(s.url("/api/sandboxes/st-1/files/pgid"))
            .send()
            .await
            .unwrap();
        if resp.status() == StatusCode::OK {
            if let Ok(p) = resp.text().await.unwrap().trim().parse::<i32>() {
                exec_pgid = Some(p);
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    groups.push(exec_pgid.expect("exec started"));
    for g in &groups {
        assert!(crate::group_exists(*g));
    }
    let server_pid = s.pid();
    let status = s.terminate();
    assert!(status.success(), "{status:?}");
    for g in &groups {
        assert!(
            wait_group_gone(*g, Duration::from_secs(1)),
            "process group {g} outlived sandboxd"
        );
    }
    assert!(wait_group_gone(server_pid, Duration::from_secs(1)));
    let _ = inflight.await;
}

#[tokio::test]
async fn concurrent_creates_respect_the_limit() {
    let big = Server::start(&["--max-sandboxes", "1000"]);
    let small = Server::start(&["--max-sandboxes", "10"]);
    for (s, expect_ok) in [(&big, 100), (&small, 10)] {
        let mut tasks = Vec::new();
        for i in 0..100 {
            let client = s.client.clone();
            let url = s.url("/api/sandboxes");
            tasks.push(tokio::spawn(async move {
                let resp = client
                    .post(url)
                    .json(&json!({"name": format!("cc-{i:03}")}))
                    .send()
                    .await
                    .unwrap();
                let st = resp.status();
                (st, resp.json::<serde_json::Value>().await.unwrap())
            }));
        }
        let mut ok = 0;
        for t in tasks {
            let (st, v) = t.await.unwrap();
            match st {
                StatusCode::CREATED => ok += 1,
                StatusCode::TOO_MANY_REQUESTS => assert_eq!(err_code(&v), "limit_reached"),
                other => panic!("unexpected {other}: {v}"),
            }
        }
        assert_eq!(ok, expect_ok);
        let (_, v) = s.get("/api/sandboxes?limit=1000&prefix=cc-").await;
        assert_eq!(v["items"].as_array().unwrap().len(), expect_ok);
    }
}
