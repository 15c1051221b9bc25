//! The accept loop: one HTTP/1 connection per task, each with a deadline for
//! its request head, and a graceful stop that lets answers in flight finish.
//!
//! `axum::serve` offers no header-read timeout, so a client sending half a
//! request head held its connection (and a task) for as long as it liked.

use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

/// Serves `router` on `listener` until `stop` resolves, then waits for the
/// open connections to finish their current request.
pub(crate) async fn serve_connections(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    let mut builder = http1::Builder::new();
    // The timer starts whenever a connection waits for a request head, so it
    // also closes a connection that never sends one.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let graceful = GracefulShutdown::new();
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    eprintln!("sandboxd: warning: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let conn = builder.serve_connection(
            TokioIo::new(stream),
            TowerToHyperService::new(router.clone()),
        );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            // A client that goes away or times out is its own business.
            let _ = conn.await;
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
