//! The server side of one HTTP/1.1 exchange, for tests that stand up a
//! service of their own on loopback (a store that lists its keys
//! encoded, a query endpoint): the request read whole, head and body.

use std::io::Read;

/// Reads one request from `conn`: its head (request line and headers) and
/// its body, as long as its `Content-Length` says; what came when the peer
/// closed early.
pub fn read_request(conn: &mut impl Read) -> (String, String) {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = conn.read(&mut buf).unwrap_or(0);
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse::<usize>().ok())
                })
                .unwrap_or(0);
            if body.len() >= len || n == 0 {
                return (head.to_owned(), body.to_owned());
            }
        } else if n == 0 {
            return (text, String::new());
        }
    }
}
