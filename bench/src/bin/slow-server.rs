//! A loopback HTTP/1.1 server whose every response takes 100 ms (but `GET
//! /fast…`, answered at once): the I/O the
//! benchmark's tests wait on. Prints `PORT` on one stdout line once it
//! listens, then serves until killed.
//!
//! Only what the benchmark's client sends is understood: requests without a
//! body, connections kept alive.

use std::io::Write;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const DELAY: Duration = Duration::from_millis(100);
const RESPONSE: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok\n";
/// A request head larger than this is not from the benchmark's client
/// (`bench/run.sh trace-size` sends 16 KiB queries).
const MAX_HEAD: usize = 64 * 1024;

fn main() -> std::io::Result<()> {
    // One worker: the server sleeps, it does not compute, and it must not take
    // CPU from the harness being measured.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(serve())
}

async fn serve() -> std::io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    {
        let mut stdout = std::io::stdout().lock();
        writeln!(stdout, "{port}")?;
        stdout.flush()?;
    }
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            if let Err(e) = connection(stream).await {
                eprintln!("slow-server: connection failed: {e}");
            }
        });
    }
}

async fn connection(mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(1024);
    loop {
        // Read one request head; several may arrive in one read.
        let end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            if buf.len() > MAX_HEAD {
                return Err(std::io::Error::other("request head over 16 KiB"));
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        // `GET /fast…` is answered at once: the trace-size case makes
        // thousands of requests, and measures their trace, not their time.
        let fast = buf.starts_with(b"GET /fast");
        buf.drain(..end);
        if !fast {
            tokio::time::sleep(DELAY).await;
        }
        stream.write_all(RESPONSE).await?;
    }
}
