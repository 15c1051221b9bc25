//! The `--fault` switches.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::{err_code, group_exists, wait_group_gone, Server};

fn names(v: &serde_json::Value) -> Vec<String> {
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn delete_fail_answers_503_first() {
    let s = Server::start(&["--fault", "delete-fail=2"]);
    s.create("df").await;
    for _ in 0..2 {
        let (st, v) = s.delete("/api/sandboxes/df").await;
        assert_eq!(
            (st, err_code(&v)),
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        );
        let (_, v) = s.get("/api/sandboxes/df").await;
        assert_eq!(v["state"], "ready", "a failed delete changed something");
    }
    let (st, _) = s.delete("/api/sandboxes/df").await;
    assert_eq!(st, StatusCode::ACCEPTED);
    s.wait_gone("df", Duration::from_secs(10)).await;
}

#[tokio::test]
async fn delete_delay_keeps_deleting_state() {
    let s = Server::start(&["--fault", "delete-delay=1s", "--max-sandboxes", "1"]);
    s.create("dd").await;
    let t0 = Instant::now();
    let (st, _) = s.delete("/api/sandboxes/dd").await;
    assert_eq!(st, StatusCode::ACCEPTED);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (st, v) = s.get("/api/sandboxes/dd").await;
    assert_eq!(
        (st, v["state"].as_str()),
        (StatusCode::OK, Some("deleting"))
    );
    let (_, v) = s.get("/api/sandboxes").await;
    assert_eq!(v["items"][0]["state"], "deleting");
    // A deleting sandbox still counts against the limit.
    let (st, v) = s.post("/api/sandboxes", json!({"name": "other"})).await;
    assert_eq!(
        (st, err_code(&v)),
        (StatusCode::TOO_MANY_REQUESTS, "limit_reached")
    );
    // Deleting again is accepted and changes nothing.
    let (st, _) = s.delete("/api/sandboxes/dd").await;
    assert_eq!(st, StatusCode::ACCEPTED);
    s.wait_gone("dd", Duration::from_secs(10)).await;
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "finished too early: {:?}",
        t0.elapsed()
    );
    s.create("other").await;
}

#[tokio::test]
async fn list_lag_shows_a_stale_view() {
    let s = Server::start(&["--fault", "list-lag=1s"]);
    s.create("ll").await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let (_, v) = s.get("/api/sandboxes").await;
    assert_eq!(names(&v), ["ll"]);
    let (st, _) = s.delete("/api/sandboxes/ll").await;
    assert_eq!(st, StatusCode::ACCEPTED);
    s.wait_gone("ll", Duration::from_secs(5)).await;
    s.create("fresh").await;
    // Gone for GET, still listed (and the new one not yet) for about a second.
    let (_, v) = s.get("/api/sandboxes").await;
    assert_eq!(names(&v), ["ll"]);
    assert_eq!(v["items"][0]["state"], "ready");
    tokio::time::sleep(Duration::from_millis(1300)).await;
    let (_, v) = s.get("/api/sandboxes").await;
    assert_eq!(names(&v), ["fresh"]);
}

#[tokio::test]
async fn drop_exec_env_ignores_per_call_env() {
    let s = Server::start(&["--fault", "drop-exec-env"]);
    let (st, _) = s
        .post(
            "/api/sandboxes",
            json!({"name": "de", "env": {"SB": "kept"}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED);
    let (_, v) = s
        .post(
            "/api/sandboxes/de/exec",
            json!({"argv": ["sh", "-c", "echo \"$SB/$CALL\""], "env": {"CALL": "lost"}}),
        )
        .await;
    assert_eq!(v["stdout"], "kept/\n");
    // Without the fault the same call sees both.
    let s2 = Server::start(&[]);
    s2.post(
        "/api/sandboxes",
        json!({"name": "de", "env": {"SB": "kept"}}),
    )
    .await;
    let (_, v) = s2
        .post(
            "/api/sandboxes/de/exec",
            json!({"argv": ["sh", "-c", "echo \"$SB/$CALL\""], "env": {"CALL": "lost"}}),
        )
        .await;
    assert_eq!(v["stdout"], "kept/lost\n");
}

#[tokio::test]
async fn crash_after_leaves_processes_for_restart_to_reap() {
    use std::os::unix::process::ExitStatusExt;
    let mut s = Server::start(&["--fault", "crash-after=3"]);
    s.create("cr").await; // 1
    let (st, v) = s
        .post(
            "/api/sandboxes/cr/processes",
            json!({"argv": ["sleep", "1000"]}),
        )
        .await; // 2
    assert_eq!(st, StatusCode::CREATED);
    let pgid = v["pid"].as_i64().unwrap() as i32;
    let (st, _) = s.get("/api/health").await; // not counted
    assert_eq!(st, StatusCode::OK);
    let (st, _) = s.get("/api/sandboxes/cr/processes").await; // 3: answered, then the abort
    assert_eq!(st, StatusCode::OK);
    let status = s.wait_exit(Duration::from_secs(10));
    assert_eq!(status.signal(), Some(nix::libc::SIGABRT), "{status:?}");
    assert!(
        group_exists(pgid),
        "the crash should leave the sandbox process behind"
    );

    let home = s.home.clone();
    let s2 = Server::start_in(home, &[]);
    assert_eq!(s2.handle.name, s.handle.name);
    assert!(
        wait_group_gone(pgid, Duration::from_secs(15)),
        "restart did not reap group {pgid}"
    );
    let (st, v) = s2.get("/api/sandboxes/cr").await;
    assert_eq!((st, v["state"].as_str()), (StatusCode::OK, Some("ready")));
    assert!(s2.log_text().contains("left behind"), "{}", s2.log_text());
}
