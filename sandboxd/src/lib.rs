//! `sandboxd`: the reference pod of testkit, a small sandbox gateway.
//!
//! Sandboxes are real directories under HOME; commands run in them as real
//! process groups; the API is JSON over HTTP on loopback, authenticated by a
//! token that opens a cookie session. `sandboxctl` is its command line client;
//! a small web UI at `/` signs in with the token and lists, creates and
//! deletes sandboxes and shows their files. Records (`/api/records`) are
//! named entries whose id the server assigns, looked up and deleted by id in
//! the path or in a JSON body: a resource kind with server ids for the
//! framework's own tests.
//!
//! ```text
//! $ sandboxd serve --home /tmp/pod --listen 127.0.0.1:0
//! {"name":"sandboxd-k3v9x0qa","base_url":"http://127.0.0.1:41234","port":41234,"token":"..."}
//! $ sandboxctl --handle handle.json sandbox create demo --label team=qa
//! $ sandboxctl --handle handle.json sandbox exec demo -- sh -c 'echo hi'
//! ```
//!
//! # A cluster: `--role gateway`
//!
//! Workers are ordinary instances; a gateway holds no sandboxes and serves
//! the same sandbox API by forwarding to them. Every node takes one shared
//! token from the environment (`--token-env NAME`), so a client's
//! `Authorization` header is good on each:
//!
//! ```text
//! $ export SANDBOXD_TOKEN=...
//! $ sandboxd serve --home w1 --listen 127.0.0.1:8081 --token-env SANDBOXD_TOKEN
//! $ sandboxd serve --home w2 --listen 127.0.0.1:8082 --token-env SANDBOXD_TOKEN
//! $ sandboxd serve --home gw --role gateway --token-env SANDBOXD_TOKEN \
//!     --worker w1=http://127.0.0.1:8081 --worker w2=http://127.0.0.1:8082
//! ```
//!
//! - A create goes to the live worker with the fewest sandboxes (ties by
//!   name); sandbox objects the gateway answers carry `"worker": NAME`.
//! - Each worker's `/api/health` is probed every 200 ms (300 ms timeout).
//!   A worker with no successful probe for 600 ms, or that refuses
//!   connections, is `down`: stopped, killed, frozen or cut off, it is
//!   reported down, and its sandboxes `"state": "lost"`, within 1 s. Its
//!   sandboxes cannot be deleted or used meanwhile (503 naming the worker).
//! - A worker that answers again (or restarted in between: its uptime tells)
//!   is taken back once its listing is re-read; a starting gateway learns
//!   placements the same way, waiting at most 1 s for its first probes.
//! - `GET /api/cluster`: `{"workers": [{"name", "url", "state": "live" |
//!   "down", "sandboxes", "last_seen_ms_ago"}]}`.
//!
//! # Known limitations
//!
//! - Gateway: a sandbox created on a worker directly is known to the
//!   gateway only once a listing through the gateway, or a re-read, shows
//!   it; a name held by two workers is shown on one of them. While a worker
//!   that came back is being re-read it still counts as down.
//! - Gateway: without `--token-env` on every node the gateway's own calls
//!   (listings) are refused by the workers.
//! - Linux only (process groups are tracked through `/proc`; file paths are
//!   confined with `openat2`, Linux 5.6 or later).
//! - Without a writable cgroup v2 hierarchy (or with `--no-cgroup`), a
//!   process that left its group and whose parent exited within 50 ms of
//!   forking it is ended only at shutdown, not with its sandbox.
//! - Background processes are forgotten at restart (their groups are killed).
//! - Records are kept in memory: a restart forgets them.
//! - No isolation beyond the working directory and a clean environment:
//!   a sandbox is a test fixture, not a security boundary.
#![warn(missing_docs, unreachable_pub)]

pub mod api;
pub mod config;
pub mod ctl;
mod error;
mod gateway;
#[cfg(test)]
mod layers;
mod listing;
mod owner;
mod proc_table;
mod procs;
mod server;
mod skeleton;
mod state;

use std::time::Instant;

use config::{Role, ServeArgs};

pub use owner::mount_cgroup2_privately;
pub use skeleton::{ServeError, FILE_BODY_LIMIT, JSON_BODY_LIMIT};

/// Runs `sandboxd serve` in its role until SIGTERM/SIGINT. `started` is
/// when the process started.
pub async fn serve(args: ServeArgs, started: Instant) -> Result<(), ServeError> {
    match args.role {
        Role::Worker => server::serve(args, started).await,
        Role::Gateway => gateway::serve(args, started).await,
    }
}
