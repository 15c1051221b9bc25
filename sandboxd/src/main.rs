//! `sandboxd serve --home DIR ...`: see `sandboxd serve --help`.

use std::time::Instant;

use clap::Parser;
use sandboxd::config::{Cli, Command};

fn main() {
    let started = Instant::now();
    let cli = Cli::parse();
    let Command::Serve(args) = cli.command;
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("sandboxd: error: failed to start the runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = rt.block_on(sandboxd::serve(args, started)) {
        let mut msg = format!("sandboxd: error: {e}");
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            msg.push_str(&format!(": {s}"));
            src = s.source();
        }
        eprintln!("{msg}");
        std::process::exit(1);
    }
    // Background tasks (reaper, waiters) must not keep the process alive.
    rt.shutdown_timeout(std::time::Duration::from_millis(500));
}
