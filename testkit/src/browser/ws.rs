//! The client side of a WebSocket (RFC 6455), as much of it as the
//! DevTools protocol needs: one connection to `ws://127.0.0.1:PORT/PATH`,
//! text messages both ways, pings answered, a close frame or end of file
//! as the end. Own code rather than a crate: the protocol's client half is
//! small (a handshake and a frame format), and a UI test compiles no
//! websocket stack for it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// The largest message accepted from the browser: a full-page PNG of a
/// long page, base64-encoded, is tens of megabytes.
const MAX_MESSAGE: usize = 512 << 20;

/// How long the handshake may take.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// Writes messages to the browser.
pub(super) struct Sender {
    stream: TcpStream,
}

/// Reads messages from the browser.
pub(super) struct Receiver {
    stream: BufReader<TcpStream>,
    /// Pongs are written by the reader: it sees the pings.
    pong: TcpStream,
}

/// Connects to `url` (`ws://HOST:PORT/PATH`) and completes the handshake.
pub(super) fn connect(url: &str) -> std::io::Result<(Sender, Receiver)> {
    let bad = |why: &str| std::io::Error::other(format!("{why}: {url}"));
    let rest = url
        .strip_prefix("ws://")
        .ok_or_else(|| bad("not a ws:// URL"))?;
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let path = if path.is_empty() { "/" } else { path };
    let mut stream = TcpStream::connect(host)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(HANDSHAKE_LIMIT))?;
    let mut key = [0u8; 16];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD.encode(key);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    if !status.starts_with("HTTP/1.1 101") {
        return Err(bad(&format!(
            "the browser refused the DevTools connection ({})",
            status.trim()
        )));
    }
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("the browser closed the connection in its handshake"));
        }
        if line == "\r\n" {
            break;
        }
    }
    stream.set_read_timeout(None)?;
    Ok((
        Sender {
            stream: stream.try_clone()?,
        },
        Receiver {
            stream: reader,
            pong: stream,
        },
    ))
}

/// A frame from the client: FIN set, masked (a client must mask).
fn frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 14);
    out.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.push(0x80 | n as u8),
        n if n <= 0xffff => {
            out.push(0x80 | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(0x80 | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    let mut mask = [0u8; 4];
    // A mask that is not random only weakens a defence meant for browsers
    // talking to proxies; zero is still a valid mask.
    let _ = getrandom::fill(&mut mask);
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
    out
}

impl Sender {
    /// Sends `text` as one text message.
    pub(super) fn send(&mut self, text: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(&frame(0x1, text))
    }

    /// Says goodbye and closes the connection both ways.
    pub(super) fn close(&mut self) {
        let _ = self.stream.write_all(&frame(0x8, &[]));
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

impl Receiver {
    /// The next message; `None` at the end (a close frame, end of file, an
    /// error).
    pub(super) fn next(&mut self) -> Option<Vec<u8>> {
        let mut message = Vec::new();
        loop {
            let mut head = [0u8; 2];
            self.stream.read_exact(&mut head).ok()?;
            let (fin, opcode) = (head[0] & 0x80 != 0, head[0] & 0x0f);
            let masked = head[1] & 0x80 != 0;
            let len = match head[1] & 0x7f {
                126 => {
                    let mut b = [0u8; 2];
                    self.stream.read_exact(&mut b).ok()?;
                    u64::from(u16::from_be_bytes(b))
                }
                127 => {
                    let mut b = [0u8; 8];
                    self.stream.read_exact(&mut b).ok()?;
                    u64::from_be_bytes(b)
                }
                n => u64::from(n),
            };
            let len = usize::try_from(len).ok()?;
            if message.len() + len > MAX_MESSAGE {
                return None;
            }
            let mut mask = [0u8; 4];
            if masked {
                self.stream.read_exact(&mut mask).ok()?;
            }
            let mut payload = vec![0u8; len];
            self.stream.read_exact(&mut payload).ok()?;
            if masked {
                for (i, b) in payload.iter_mut().enumerate() {
                    *b ^= mask[i % 4];
                }
            }
            match opcode {
                0x8 => return None,
                0x9 => {
                    let _ = self.pong.write_all(&frame(0xA, &payload));
                }
                0xA => {}
                // Text, binary, or the continuation of either.
                _ => {
                    message.extend_from_slice(&payload);
                    if fin {
                        return Some(message);
                    }
                }
            }
        }
    }
}
