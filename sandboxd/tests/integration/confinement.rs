//! File requests stay beneath the sandbox root when the tree changes under
//! them, never write through a hard link, and refuse names the filesystem
//! cannot hold with a 4xx that says so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::Value;

use crate::{err_code, Server};

fn sandbox_root(s: &Server, sb: &str) -> PathBuf {
    s.home.path().join("sandboxes").join(sb).join("root")
}

/// Flips `root/sw` between a real directory inside and a symlink to `outside`
/// until told to stop.
fn swapper(root: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let (root, outside) = (root.to_path_buf(), outside.to_path_buf());
    std::thread::spawn(move || {
        let (sw, dir, link) = (root.join("sw"), root.join("real"), root.join("link"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("secret.txt"), "inside").unwrap();
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let mut flips = 0;
        while !stop.load(Ordering::Relaxed) {
            // A directory a PUT created while `sw` was missing is in the way: drop it.
            if std::fs::symlink_metadata(&sw).is_ok_and(|m| m.is_dir()) {
                let _ = std::fs::remove_dir_all(&sw);
            }
            let _ = std::fs::rename(&dir, &sw);
            std::thread::yield_now();
            let _ = std::fs::rename(&sw, &dir);
            let _ = std::fs::rename(&link, &sw);
            std::thread::yield_now();
            let _ = std::fs::rename(&sw, &link);
            flips += 1;
        }
        flips
    })
}

#[tokio::test]
async fn symlink_swaps_never_reach_outside() {
    let s = Server::start(&[]);
    s.create("race").await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE").unwrap();
    std::fs::write(outside.path().join("victim"), "keep me").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swap = swapper(&sandbox_root(&s, "race"), outside.path(), Arc::clone(&stop));

    // Bounded: 8 workers, 75 rounds each of PUT, GET and DELETE, and a deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut workers = Vec::new();
    for w in 0..8 {
        let (client, base) = (s.client.clone(), s.url("/api/sandboxes/race/files/sw"));
        workers.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            for i in 0..75 {
                if Instant::now() >= deadline {
                    break;
                }
                let put = client
                    .put(format!("{base}/w{w}-{i}.txt"))
                    .body("planted")
                    .send()
                    .await
                    .unwrap();
                seen.push(("PUT", put.status(), String::new()));
                let get = client
                    .get(format!("{base}/secret.txt"))
                    .send()
                    .await
                    .unwrap();
                let st = get.status();
                seen.push(("GET", st, get.text().await.unwrap()));
                let del = client
                    .delete(format!("{base}/victim"))
                    .send()
                    .await
                    .unwrap();
                seen.push(("DELETE", del.status(), String::new()));
            }
            seen
        }));
    }
    let mut seen = Vec::new();
    for w in workers {
        seen.extend(w.await.unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let flips = swap.join().unwrap();
    assert!(flips > 0, "the swapper never ran");

    let planted: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "secret.txt" && n != "victim")
        .collect();
    assert!(
        planted.is_empty(),
        "PUTs landed outside the sandbox: {planted:?}"
    );
    assert!(
        outside.path().join("victim").exists(),
        "a DELETE removed a file outside the sandbox"
    );
    for (method, st, body) in &seen {
        assert!(
            !body.contains("OUTSIDE"),
            "a GET read a file outside the sandbox"
        );
        assert!(!st.is_server_error(), "{method} answered {st}: {body}");
    }
}

async fn put(s: &Server, path: &str, body: &'static str) -> (StatusCode, Value) {
    let resp = s.client.put(s.url(path)).body(body).send().await.unwrap();
    let st = resp.status();
    (st, resp.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn hard_links_are_not_written_through() {
    let s = Server::start(&[]);
    s.create("hl").await;
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("f");
    std::fs::write(&target, "original").unwrap();
    std::fs::hard_link(&target, sandbox_root(&s, "hl").join("hl")).unwrap();

    let (st, v) = put(&s, "/api/sandboxes/hl/files/hl", "overwritten").await;
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::CONFLICT, "hard_link"),
        "{v}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("hard link") && msg.contains("delete"), "{msg}");

    // Deleting the name is fine and leaves the other link alone; then the PUT works.
    let (st, _) = s.delete("/api/sandboxes/hl/files/hl").await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "original");
    let (st, v) = put(&s, "/api/sandboxes/hl/files/hl", "fresh").await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    assert_eq!(
        std::fs::read_to_string(sandbox_root(&s, "hl").join("hl")).unwrap(),
        "fresh"
    );
}

#[tokio::test]
async fn overlong_names_are_bad_requests() {
    let s = Server::start(&[]);
    s.create("long").await;
    let long = "x".repeat(300);
    for path in [long.clone(), format!("dir/{long}"), format!("{long}/f")] {
        let url = format!("/api/sandboxes/long/files/{path}");
        let (st, v) = put(&s, &url, "x").await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "name_too_long"),
            "PUT {v}"
        );
        let msg = v["error"]["message"].as_str().unwrap();
        assert!(msg.contains("300") && msg.contains("255"), "{msg}");
        let (st, v) = s.get(&url).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "name_too_long"),
            "GET {v}"
        );
        let (st, v) = s.delete(&url).await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::BAD_REQUEST, "name_too_long"),
            "DELETE {v}"
        );
    }
    // 255 bytes is the limit, not an error.
    let (st, v) = put(
        &s,
        &format!("/api/sandboxes/long/files/{}", "y".repeat(255)),
        "x",
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
}
