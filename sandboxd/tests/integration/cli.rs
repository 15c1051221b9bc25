//! `sandboxctl` against a real server.

use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

use crate::{write_handle, Server};

fn ctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(test_support::sandboxctl_bin());
    cmd.args(args)
        .env_remove("SANDBOXD_URL")
        .env_remove("SANDBOXD_TOKEN")
        .env_remove("SANDBOXD_COOKIE");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run sandboxctl")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxctl_round_trip() {
    let s = Server::start(&[]);
    let dir = TempDir::new().unwrap();
    let h = write_handle(dir.path(), &s.handle);
    let h = h.to_str().unwrap();
    let token = s.handle.token.clone();
    let check = |o: &Output| {
        assert!(
            !text(o).contains(&token),
            "the token was printed: {}",
            text(o)
        )
    };

    let o = ctl(
        &[
            "--handle",
            h,
            "sandbox",
            "create",
            "cli-one",
            "--label",
            "team=qa",
            "--env",
            "GREETING=hi",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("cli-one"));
    check(&o);
    let o = ctl(
        &[
            "--handle", h, "--output", "json", "sandbox", "get", "cli-one",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["labels"]["team"].as_str(), v["state"].as_str()),
        (Some("qa"), Some("ready"))
    );

    // Environment variables instead of a handle.
    let env = [
        ("SANDBOXD_URL", s.handle.base_url.as_str()),
        ("SANDBOXD_TOKEN", token.as_str()),
    ];
    let o = ctl(&["sandbox", "list", "--label", "team=qa"], &env);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("cli-one") && table.contains("team=qa"),
        "{table}"
    );
    check(&o);
    let o = ctl(
        &["--output", "json", "sandbox", "list", "--prefix", "zzz"],
        &env,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["items"], serde_json::json!([]));

    let o = ctl(
        &[
            "--handle",
            h,
            "sandbox",
            "exec",
            "cli-one",
            "--env",
            "WHO=you",
            "--",
            "sh",
            "-c",
            "echo $GREETING $WHO; echo e >&2; exit 3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hi you\n");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "e\n");
    let o = ctl(
        &[
            "--handle",
            h,
            "sandbox",
            "exec",
            "cli-one",
            "--timeout",
            "200ms",
            "--",
            "sleep",
            "10",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(124), "{}", text(&o));

    // API error → 1, with the error printed.
    let o = ctl(&["--handle", h, "sandbox", "get", "missing"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not_found"),
        "{}",
        text(&o)
    );
    let o = ctl(&["--handle", h, "sandbox", "create", "Bad_Name"], &[]);
    assert_eq!(o.status.code(), Some(1));

    let o = ctl(
        &["--handle", h, "sandbox", "delete", "cli-one", "--wait"],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let o = ctl(&["--handle", h, "sandbox", "get", "cli-one"], &[]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn sandboxctl_exit_codes() {
    // Usage errors → 64; help and version → 0.
    assert_eq!(ctl(&["sandbox", "frobnicate"], &[]).status.code(), Some(64));
    assert_eq!(ctl(&["sandbox", "list"], &[]).status.code(), Some(64)); // no server given
    assert_eq!(
        ctl(
            &["--handle", "/nonexistent/handle.json", "sandbox", "list"],
            &[]
        )
        .status
        .code(),
        Some(64)
    );
    let help = ctl(&["--help"], &[]);
    assert_eq!(help.status.code(), Some(0));
    let help = String::from_utf8_lossy(&help.stdout).to_string();
    assert!(help.contains("Exit codes") && help.contains("64"), "{help}");
    assert_eq!(ctl(&["--version"], &[]).status.code(), Some(0));
    // Nothing listens there → 2.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = ctl(
        &[
            "--url",
            &format!("http://127.0.0.1:{port}"),
            "--token",
            "t",
            "sandbox",
            "list",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandboxctl_keeps_working_after_the_token_window_with_a_session_cookie() {
    let s = Server::start(&["--token-window", "1s"]);
    let token = s.handle.token.clone();
    // A request inside the window opens a session.
    let opened = reqwest::Client::new()
        .get(s.url("/api/sandboxes"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(opened.status().is_success());
    let set_cookie = opened.headers()["set-cookie"].to_str().unwrap().to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let url = ("SANDBOXD_URL", s.handle.base_url.as_str());
    let o = ctl(&["sandbox", "list"], &[url, ("SANDBOXD_TOKEN", &token)]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("token_expired"), "{}", text(&o));
    // The cookie, with or without the (expired) token beside it.
    for env in [
        vec![url, ("SANDBOXD_COOKIE", cookie.as_str())],
        vec![
            url,
            ("SANDBOXD_TOKEN", &token),
            ("SANDBOXD_COOKIE", &cookie),
        ],
    ] {
        let o = ctl(&["sandbox", "list"], &env);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(
            !text(&o).contains(&cookie[cookie.len() - 8..]),
            "{}",
            text(&o)
        );
    }
    // Neither: a usage error that names both ways in.
    let o = ctl(&["sandbox", "list"], &[url, ("SANDBOXD_COOKIE", "")]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
    assert!(text(&o).contains("SANDBOXD_COOKIE"), "{}", text(&o));
    let o = ctl(&["sandbox", "list"], &[url, ("SANDBOXD_COOKIE", "a\nb")]);
    assert_eq!(o.status.code(), Some(64), "{}", text(&o));
}

#[test]
fn sandboxd_help_documents_faults() {
    let o = Command::new(test_support::sandboxd_bin())
        .args(["serve", "--help"])
        .output()
        .unwrap();
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for f in [
        "delete-delay",
        "delete-fail",
        "list-lag",
        "drop-exec-env",
        "crash-after",
        "--token-window",
        "--max-sandboxes",
    ] {
        assert!(help.contains(f), "{f} missing from --help");
    }
    let o = Command::new(test_support::sandboxd_bin())
        .args(["serve", "--home", "/tmp/x", "--fault", "nope"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected one of"));
}
