//! Slow or stalled clients cannot hold a connection open.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use reqwest::StatusCode;

use crate::Server;

/// Reads until EOF or `limit`; true if the server closed the connection.
fn closed_within(mut conn: TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        conn.set_read_timeout(Some(left.min(Duration::from_millis(500))))
            .unwrap();
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => {}
        }
    }
}

#[tokio::test]
async fn half_a_request_head_is_cut_off() {
    let s = Server::start(&["--header-timeout", "1s"]);
    let addr = format!("127.0.0.1:{}", s.handle.port);
    let mut stalled = TcpStream::connect(&addr).unwrap();
    stalled
        .write_all(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .unwrap();
    let idle = TcpStream::connect(&addr).unwrap();
    // A 1 s header timeout closes them about a second in; the bound leaves
    // room for a loaded machine, not for a timeout that is not enforced.
    let (a, b) = (
        std::thread::spawn(move || closed_within(stalled, Duration::from_secs(6))),
        std::thread::spawn(move || closed_within(idle, Duration::from_secs(6))),
    );
    assert!(
        a.join().unwrap(),
        "a half-sent request head kept its connection open"
    );
    assert!(b.join().unwrap(), "a silent connection stayed open");
    // The server still answers whole requests.
    let (st, _) = s.get("/api/health").await;
    assert_eq!(st, StatusCode::OK);
}

#[test]
fn the_header_timeout_is_validated() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_sandboxd"))
        .args([
            "serve",
            "--home",
            "/nonexistent-never-created",
            "--header-timeout",
            "0s",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--header-timeout") && err.contains("longer than zero"),
        "{err}"
    );
}
