//! Files and path confinement.

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{err_code, Server};

async fn put(s: &Server, path: &str, body: Vec<u8>) -> (StatusCode, Value) {
    let resp = s.client.put(s.url(path)).body(body).send().await.unwrap();
    let st = resp.status();
    (st, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn put_get_delete() {
    let s = Server::start(&[]);
    s.create("fs").await;
    let (st, v) = put(
        &s,
        "/api/sandboxes/fs/files/dir/sub/a.bin",
        vec![0, 1, 2, 255],
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let (st, _) = put(&s, "/api/sandboxes/fs/files/dir/sub/a.bin", vec![9, 8, 7]).await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let resp = s
        .client
        .get(s.url("/api/sandboxes/fs/files/dir/sub/a.bin"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/octet-stream");
    assert_eq!(resp.bytes().await.unwrap().as_ref(), &[9, 8, 7]);
    // The file is really in the sandbox directory.
    let (_, v) = s
        .post(
            "/api/sandboxes/fs/exec",
            json!({"argv": ["wc", "-c", "dir/sub/a.bin"]}),
        )
        .await;
    assert_eq!(v["stdout"], "3 dir/sub/a.bin\n");

    let (st, v) = s.get("/api/sandboxes/fs/files/dir").await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{v}");
    let (st, _) = s.delete("/api/sandboxes/fs/files/dir/sub/a.bin").await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    let (st, v) = s.get("/api/sandboxes/fs/files/dir/sub/a.bin").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, v) = s.delete("/api/sandboxes/fs/files/dir/sub/a.bin").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, _) = s.get("/api/sandboxes/nope/files/x").await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    let (st, v) = put(
        &s,
        "/api/sandboxes/fs/files/big",
        vec![b'x'; (16 << 20) + 1],
    )
    .await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large")
    );
    let (st, _) = put(&s, "/api/sandboxes/fs/files/ok", vec![b'x'; 2 << 20]).await;
    assert_eq!(st, StatusCode::CREATED);
}

#[tokio::test]
async fn escapes_are_refused() {
    let s = Server::start(&[]);
    s.create("jail").await;
    let (_, v) = s
        .post("/api/sandboxes/jail/exec", json!({"argv": ["sh", "-c", "mkdir inner && ln -s /etc out && ln -s inner in && ln -s ../.. up && echo hi > inner/f"]}))
        .await;
    assert_eq!(v["exit_code"], 0, "{v}");
    for path in [
        "..%2F..%2Fmeta.json",
        "a%2F..%2F..%2Fx",
        "%2Fetc%2Fpasswd",
        "out/passwd",
        "out",
        "up/meta.json",
        "inner%2F..%2F..%2Fx",
    ] {
        let url = format!("/api/sandboxes/jail/files/{path}");
        let (st, v) = s.get(&url).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "path_escape"),
            "GET {path}"
        );
        let (st, v) = put(&s, &url, b"x".to_vec()).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "path_escape"),
            "PUT {path}"
        );
        let (st, v) = s.delete(&url).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "path_escape"),
            "DELETE {path}"
        );
    }
    // A symlink that stays inside is fine.
    let resp = s
        .client
        .get(s.url("/api/sandboxes/jail/files/in/f"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "hi\n");
    assert!(
        std::fs::read_to_string("/etc/hostname").is_ok() || std::path::Path::new("/etc").exists()
    );
}
