//! Background processes and signals.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::{err_code, Server};

async fn wait_exited(s: &Server, sb: &str, pid: i64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (st, v) = s.get(&format!("/api/sandboxes/{sb}/processes/{pid}")).await;
        assert_eq!(st, StatusCode::OK, "{v}");
        if v["state"] == "exited" {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} still running: {v}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn start_list_signal() {
    let s = Server::start(&[]);
    s.create("bg").await;
    let (st, v) = s
        .post(
            "/api/sandboxes/bg/processes",
            json!({"argv": ["sleep", "1000"]}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let sleeper = v["pid"].as_i64().unwrap();
    let script = "trap 'echo \"$GREETING\" > usr1.txt; exit 7' USR1; while :; do sleep 0.05; done";
    let (st, v) = s
        .post(
            "/api/sandboxes/bg/processes",
            json!({"argv": ["sh", "-c", script], "env": {"GREETING": "hello"}}),
        )
        .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
    let trapper = v["pid"].as_i64().unwrap();

    let (st, v) = s.get("/api/sandboxes/bg/processes").await;
    assert_eq!(st, StatusCode::OK);
    let items = v["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    let first = items.iter().find(|i| i["pid"] == sleeper).unwrap();
    assert_eq!(first["state"], "running");
    assert_eq!(first["argv"], json!(["sleep", "1000"]));
    assert_eq!(first["exit_code"], Value::Null);

    // Errors first, while both run.
    let (st, v) = s
        .post(
            &format!("/api/sandboxes/bg/processes/{sleeper}/signal"),
            json!({"signal": "STOP"}),
        )
        .await;
    assert_eq!((st, err_code(&v)), (StatusCode::BAD_REQUEST, "bad_request"));
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("TERM, INT, KILL, HUP, USR1"),
        "{v}"
    );
    let (st, v) = s
        .post(
            "/api/sandboxes/bg/processes/999999/signal",
            json!({"signal": "TERM"}),
        )
        .await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, v) = s.get("/api/sandboxes/bg/processes/999999").await;
    assert_eq!((st, err_code(&v)), (StatusCode::NOT_FOUND, "not_found"));
    let (st, v) = s.get("/api/sandboxes/bg/processes/abc").await;
    assert_eq!((st, err_code(&v)), (StatusCode::BAD_REQUEST, "bad_request"));
    let (st, _) = s
        .post("/api/sandboxes/bg/processes", json!({"argv": []}))
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = s.get("/api/sandboxes/nope/processes").await;
    assert_eq!(st, StatusCode::NOT_FOUND);

    // USR1 reaches the process: its trap runs and it exits 7.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (st, v) = s
        .post(
            &format!("/api/sandboxes/bg/processes/{trapper}/signal"),
            json!({"signal": "USR1"}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED, "{v}");
    let v = wait_exited(&s, "bg", trapper).await;
    assert_eq!(v["exit_code"], 7, "{v}");
    let (st, v) = s
        .post(
            "/api/sandboxes/bg/exec",
            json!({"argv": ["cat", "usr1.txt"]}),
        )
        .await;
    assert_eq!(
        (st, v["stdout"].as_str()),
        (StatusCode::OK, Some("hello\n"))
    );

    // TERM kills the sleeper; it reports the signal.
    let (st, _) = s
        .post(
            &format!("/api/sandboxes/bg/processes/{sleeper}/signal"),
            json!({"signal": "SIGTERM"}),
        )
        .await;
    assert_eq!(st, StatusCode::ACCEPTED);
    let v = wait_exited(&s, "bg", sleeper).await;
    assert_eq!(
        (v["exit_code"].clone(), v["signal"].clone()),
        (Value::Null, json!(15))
    );
    let (st, v) = s
        .post(
            &format!("/api/sandboxes/bg/processes/{sleeper}/signal"),
            json!({"signal": "KILL"}),
        )
        .await;
    assert_eq!((st, err_code(&v)), (StatusCode::CONFLICT, "conflict"));

    for sig in ["INT", "HUP", "KILL"] {
        let (_, v) = s
            .post(
                "/api/sandboxes/bg/processes",
                json!({"argv": ["sleep", "1000"]}),
            )
            .await;
        let pid = v["pid"].as_i64().unwrap();
        let (st, _) = s
            .post(
                &format!("/api/sandboxes/bg/processes/{pid}/signal"),
                json!({"signal": sig}),
            )
            .await;
        assert_eq!(st, StatusCode::ACCEPTED);
        let v = wait_exited(&s, "bg", pid).await;
        assert!(v["signal"].is_i64(), "{sig}: {v}");
    }
}

#[tokio::test]
async fn delete_kills_processes() {
    let s = Server::start(&[]);
    s.create("doomed").await;
    let (_, v) = s
        .post(
            "/api/sandboxes/doomed/processes",
            json!({"argv": ["sh", "-c", "sleep 1000 & sleep 1000"]}),
        )
        .await;
    let pgid = v["pid"].as_i64().unwrap() as i32;
    assert!(crate::group_exists(pgid));
    let (st, _) = s.delete("/api/sandboxes/doomed").await;
    assert_eq!(st, StatusCode::ACCEPTED);
    s.wait_gone("doomed", Duration::from_secs(10)).await;
    assert!(
        crate::wait_group_gone(pgid, Duration::from_secs(5)),
        "group {pgid} survived the delete"
    );
}
