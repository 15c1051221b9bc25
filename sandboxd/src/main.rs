//! `sandboxd serve --home DIR ...`: see `sandboxd serve --help`.

use std::time::Instant;

use clap::Parser;
use sandboxd::config::{Cli, Command, Role};

fn main() {
    let started = Instant::now();
    let cli = Cli::parse();
    let Command::Serve(args) = cli.command;
    // Before the runtime's threads exist: see `mount_cgroup2_privately`.
    // A gateway runs no sandbox processes: it needs no cgroup.
    if args.role == Role::Worker && !args.no_cgroup && nix::unistd::geteuid().is_root() {
        match sandboxd::mount_cgroup2_privately(&args.home) {
            Ok(Some(at)) => eprintln!(
                "sandboxd: no cgroup v2 hierarchy was mounted: mounted one at {} in a mount namespace of its own",
                at.display()
            ),
            Ok(None) => {}
            Err(e) => eprintln!("sandboxd: warning: no cgroup v2 hierarchy: {e}"),
        }
    }
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
