//! A container's network namespace, reached through the id of its process
//! (`State.Pid`): the interface that holds an address, its root queueing
//! discipline (`tc`, a token bucket that limits its rate), and sockets
//! opened inside it to measure what a fault does to its packets.
//!
//! Commands enter the namespace with `nsenter -t <pid> -n`, as the packet
//! filter does ([`PacketFilter::in_namespace_of`](super::PacketFilter::in_namespace_of));
//! sockets are opened by a thread of this process that joined the
//! namespace (`setns`) and ends with its measurement, so that no other
//! code ever runs in it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

/// The longest one `tc` or `ip` command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// Why something in a namespace could not be done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NetnsError {
    /// No `nsenter` on this host.
    #[error("{}", super::packet_filter::NO_NSENTER)]
    NoNsenter,
    /// No `tc` or `ip` on this host.
    #[error("a fault on a node's own links needs `{0}` on the Docker Engine's host: install it (`apt-get install iproute2`)")]
    NoProgram(&'static str),
    /// A command failed or could not run.
    #[error("`{command}` in the network namespace of process {pid} failed: {why}")]
    Command {
        /// What ran.
        command: String,
        /// Whose namespace.
        pid: u32,
        /// What it said.
        why: String,
    },
    /// No interface of the namespace holds the address.
    #[error("no interface in the network namespace of process {pid} holds {address}")]
    NoInterface {
        /// Whose namespace.
        pid: u32,
        /// The address.
        address: String,
    },
    /// The namespace could not be looked at (its process gone).
    #[error("cannot read the network namespace of process {pid}")]
    Identity {
        /// Whose namespace.
        pid: u32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A socket in the namespace failed.
    #[error("measuring in the network namespace of process {pid}: {source}")]
    Socket {
        /// Whose namespace.
        pid: u32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The network namespace of one process (a container's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Netns {
    pid: u32,
}

/// A root token-bucket queue of an interface, as `tc qdisc show` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootQdisc {
    /// Its kind: `tbf`, `noqueue`, …
    pub kind: String,
    /// Its handle, `7e57:`.
    pub handle: String,
}

impl Netns {
    /// The namespace of process `pid`.
    pub fn of_pid(pid: u32) -> Netns {
        Netns { pid }
    }

    /// The pid it is reached through.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The namespace's identity: the inode of `/proc/<pid>/ns/net`. A
    /// container started again (a restart, a stop and a start) has a new
    /// namespace, and a new inode.
    pub fn inode(&self) -> Result<u64, NetnsError> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(format!("/proc/{}/ns/net", self.pid))
            .map(|m| m.ino())
            .map_err(|source| NetnsError::Identity {
                pid: self.pid,
                source,
            })
    }

    /// Runs `program args` inside the namespace; its stdout.
    async fn run(&self, program: &'static str, args: &[&str]) -> Result<String, NetnsError> {
        let nsenter = super::packet_filter::nsenter().ok_or(NetnsError::NoNsenter)?;
        let found = crate::process::find_program(program, None, None)
            .or_else(|| {
                ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
                    .iter()
                    .map(|d| PathBuf::from(d).join(program))
                    .find(|p| p.is_file())
            })
            .ok_or(NetnsError::NoProgram(program))?;
        let command = format!("{program} {}", args.join(" "));
        let mut cmd = tokio::process::Command::new(nsenter);
        cmd.args(["-t", &self.pid.to_string(), "-n", "--"])
            .arg(found)
            .args(args)
            .kill_on_drop(true);
        let failed = |why: String| NetnsError::Command {
            command: command.clone(),
            pid: self.pid,
            why,
        };
        let out = tokio::time::timeout(COMMAND_TIMEOUT, cmd.output())
            .await
            .map_err(|_| failed(format!("took over {} s", COMMAND_TIMEOUT.as_secs())))?
            .map_err(|e| failed(e.to_string()))?;
        if !out.status.success() {
            return Err(failed(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The interface that holds the IPv4 `address`.
    pub async fn interface_with(&self, address: &str) -> Result<String, NetnsError> {
        let listing = self.run("ip", &["-o", "-4", "addr", "show"]).await?;
        interface_in(&listing, address).ok_or_else(|| NetnsError::NoInterface {
            pid: self.pid,
            address: address.to_owned(),
        })
    }

    /// Puts a token bucket at the root of `interface`: what leaves through
    /// it at most `kbit` kbit/s, bursts of `burst` bytes, a packet queued
    /// at most 200 ms before it is dropped. Refused when a queue other
    /// than the kernel's default is there (another fault's).
    pub async fn limit_rate(
        &self,
        interface: &str,
        handle: &str,
        kbit: u64,
        burst: u64,
    ) -> Result<(), NetnsError> {
        let (rate, burst) = (format!("{kbit}kbit"), burst.to_string());
        self.run(
            "tc",
            &[
                "qdisc", "add", "dev", interface, "root", "handle", handle, "tbf", "rate", &rate,
                "burst", &burst, "latency", "200ms",
            ],
        )
        .await
        .map(drop)
    }

    /// The root queue of `interface`.
    pub async fn root_qdisc(&self, interface: &str) -> Result<Option<RootQdisc>, NetnsError> {
        let listing = self
            .run("tc", &["qdisc", "show", "dev", interface, "root"])
            .await?;
        Ok(root_in(&listing))
    }

    /// Removes the root queue of `interface` when its handle is `handle`;
    /// whether there was one.
    pub async fn remove_root(&self, interface: &str, handle: &str) -> Result<bool, NetnsError> {
        match self.root_qdisc(interface).await? {
            Some(q) if q.handle == handle => {
                self.run("tc", &["qdisc", "del", "dev", interface, "root"])
                    .await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Runs `f` on a thread of its own that joined this namespace, and
    /// ends with it: every socket `f` opens is the namespace's.
    fn spawn<T, F>(&self, f: F) -> std::thread::JoinHandle<std::io::Result<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> std::io::Result<T> + Send + 'static,
    {
        let pid = self.pid;
        std::thread::spawn(move || {
            let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
            nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(std::io::Error::from)?;
            f()
        })
    }

    /// Sends `count` numbered datagrams from this namespace to `to`'s
    /// namespace at `address` (its own), paced, and counts how many of
    /// them arrived.
    pub async fn datagrams_arriving(
        &self,
        to: Netns,
        address: &str,
        count: u32,
    ) -> Result<u32, NetnsError> {
        let receive = move |port: Sender<u16>| {
            let socket = UdpSocket::bind("0.0.0.0:0")?;
            // The first datagram may be slow to come on a loaded machine
            // (its sender's thread not yet running): counted lost, the
            // whole burst would pass for a loss it does not show.
            socket.set_read_timeout(Some(Duration::from_secs(5)))?;
            let _ = port.send(socket.local_addr()?.port());
            let mut seen = vec![false; count as usize];
            let mut buf = [0u8; 64];
            let mut first = true;
            // Then until a second passes without one.
            while let Ok(n) = socket.recv(&mut buf) {
                if std::mem::take(&mut first) {
                    socket.set_read_timeout(Some(Duration::from_secs(1)))?;
                }
                if n >= 4 {
                    let i = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                    if let Some(s) = seen.get_mut(i) {
                        *s = true;
                    }
                }
            }
            Ok(seen.iter().filter(|s| **s).count() as u32)
        };
        let send = move |to: SocketAddr| {
            let socket = UdpSocket::bind("0.0.0.0:0")?;
            for i in 0..count {
                // A dropped datagram may fail its send (EPERM from
                // OUTPUT): it is lost, as it should be.
                let _ = socket.send_to(&i.to_be_bytes(), to);
                std::thread::sleep(Duration::from_micros(300));
            }
            Ok(())
        };
        self.between(to, address, receive, send).await
    }

    /// Sends `count` numbered datagrams from this namespace to `to`'s at
    /// `address`, and counts those that arrived until a short grace after
    /// the last was sent: how a cut is shown to take (none arrives). The
    /// receiver waits for the sender to finish, however slow it is to
    /// start, so a datagram that crosses is never missed for being late.
    pub async fn datagrams_crossing(
        &self,
        to: Netns,
        address: &str,
        count: u32,
    ) -> Result<u32, NetnsError> {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let sent = Arc::new(AtomicBool::new(false));
        let sender_done = Arc::clone(&sent);
        let receive = move |port: Sender<u16>| {
            let socket = UdpSocket::bind("0.0.0.0:0")?;
            socket.set_read_timeout(Some(Duration::from_millis(50)))?;
            let _ = port.send(socket.local_addr()?.port());
            let mut seen = vec![false; count as usize];
            let mut buf = [0u8; 64];
            let mut sent_at: Option<Instant> = None;
            // A sender that never finishes (its thread failed) ends the
            // wait too: the caller sees its error.
            let started = Instant::now();
            loop {
                if sent_at.is_none() && sent.load(Ordering::SeqCst) {
                    sent_at = Some(Instant::now());
                }
                if sent_at.is_some_and(|t| t.elapsed() > Duration::from_millis(300))
                    || started.elapsed() > Duration::from_secs(30)
                {
                    break;
                }
                if let Ok(n) = socket.recv(&mut buf) {
                    if n >= 4 {
                        let i = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                        if let Some(s) = seen.get_mut(i) {
                            *s = true;
                        }
                    }
                }
            }
            Ok(seen.iter().filter(|s| **s).count() as u32)
        };
        let send = move |to: SocketAddr| {
            let socket = UdpSocket::bind("0.0.0.0:0")?;
            for i in 0..count {
                // A dropped datagram may fail its send (EPERM): it did not
                // cross, as it should not.
                let _ = socket.send_to(&i.to_be_bytes(), to);
                std::thread::sleep(Duration::from_micros(300));
            }
            sender_done.store(true, Ordering::SeqCst);
            Ok(())
        };
        self.between(to, address, receive, send).await
    }

    /// Sends `bytes` over TCP from this namespace to `to`'s at `address`,
    /// and measures the rate they arrived at, in bits per second, from the
    /// moment the first `skip` bytes (a token bucket's burst) were in.
    pub async fn transfer_rate(
        &self,
        to: Netns,
        address: &str,
        bytes: u64,
        skip: u64,
    ) -> Result<f64, NetnsError> {
        let receive = move |port: Sender<u16>| {
            let listener = TcpListener::bind("0.0.0.0:0")?;
            let _ = port.send(listener.local_addr()?.port());
            let mut stream = accept_within(&listener, Duration::from_secs(10))?;
            stream.set_read_timeout(Some(Duration::from_secs(30)))?;
            let mut buf = vec![0u8; 64 * 1024];
            let (mut got, mut from) = (0u64, None::<(Instant, u64)>);
            loop {
                let n = stream.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                got += n as u64;
                if from.is_none() && got >= skip {
                    from = Some((Instant::now(), got));
                }
            }
            let (at, counted) = from.ok_or_else(|| std::io::Error::other("nothing arrived"))?;
            let secs = at.elapsed().as_secs_f64().max(1e-3);
            Ok((got - counted) as f64 * 8.0 / secs)
        };
        let send = move |to: SocketAddr| {
            let mut stream = TcpStream::connect_timeout(&to, Duration::from_secs(5))?;
            stream.set_write_timeout(Some(Duration::from_secs(30)))?;
            let chunk = vec![0u8; 16 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                stream.write_all(&chunk[..n])?;
                left -= n as u64;
            }
            stream.shutdown(std::net::Shutdown::Write)
        };
        self.between(to, address, receive, send).await
    }

    /// Runs `receive` in `to`'s namespace (it sends the port it listens
    /// on) and `send` in this one, to `address` and that port; what
    /// `receive` measured.
    async fn between<T, R, S>(
        &self,
        to: Netns,
        address: &str,
        receive: R,
        send: S,
    ) -> Result<T, NetnsError>
    where
        T: Send + 'static,
        R: FnOnce(Sender<u16>) -> std::io::Result<T> + Send + 'static,
        S: FnOnce(SocketAddr) -> std::io::Result<()> + Send + 'static,
    {
        let (from, address) = (*self, address.to_owned());
        let failed = |pid: u32| move |source| NetnsError::Socket { pid, source };
        tokio::task::spawn_blocking(move || -> Result<T, NetnsError> {
            let (port_tx, port_rx) = std::sync::mpsc::channel();
            let receiver = to.spawn(move || receive(port_tx));
            let port = port_rx
                .recv_timeout(Duration::from_secs(5))
                .map_err(|_| std::io::Error::other("the receiver did not start"))
                .map_err(failed(to.pid))?;
            let at: SocketAddr =
                format!("{address}:{port}")
                    .parse()
                    .map_err(|_| NetnsError::NoInterface {
                        pid: to.pid,
                        address: address.clone(),
                    })?;
            join(from.spawn(move || send(at))).map_err(failed(from.pid))?;
            join(receiver).map_err(failed(to.pid))
        })
        .await
        .map_err(|e| NetnsError::Socket {
            pid: self.pid,
            source: std::io::Error::other(e),
        })?
    }
}

/// The first connection to `listener` within `limit`: a sender that never
/// connects does not leave its receiver waiting for ever.
fn accept_within(listener: &TcpListener, limit: Duration) -> std::io::Result<TcpStream> {
    listener.set_nonblocking(true)?;
    let deadline = Instant::now() + limit;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// What a namespace's thread returned, a panic as an error.
fn join<T>(thread: std::thread::JoinHandle<std::io::Result<T>>) -> std::io::Result<T> {
    thread
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("its thread panicked")))
}

/// The interface `ip -o -4 addr show` lists with `address`:
/// `2: eth0    inet 172.18.0.3/16 brd …`.
fn interface_in(listing: &str, address: &str) -> Option<String> {
    listing.lines().find_map(|line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "inet")?;
        let held = words.get(at + 1)?.split('/').next()?;
        (held == address).then(|| words.get(1).map(|w| w.trim_end_matches(':').to_owned()))?
    })
}

/// The root queue `tc qdisc show dev X root` lists: `qdisc tbf 7e57: root
/// refcnt 2 rate 1Mbit …`.
fn root_in(listing: &str) -> Option<RootQdisc> {
    let line = listing.lines().find(|l| l.starts_with("qdisc "))?;
    let mut words = line.split_whitespace().skip(1);
    Some(RootQdisc {
        kind: words.next()?.to_owned(),
        handle: words.next()?.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_found_on_its_interface() {
        let listing = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever\n\
                       2: eth0    inet 172.18.0.3/16 brd 172.18.255.255 scope global eth0\\ x\n";
        assert_eq!(interface_in(listing, "172.18.0.3").as_deref(), Some("eth0"));
        assert_eq!(interface_in(listing, "172.18.0.30"), None);
    }

    #[test]
    fn the_root_queue_is_read_with_its_handle() {
        let q = root_in("qdisc tbf 7e57: root refcnt 2 rate 1Mbit burst 16Kb lat 200ms \n")
            .expect("a root queue");
        assert_eq!((q.kind.as_str(), q.handle.as_str()), ("tbf", "7e57:"));
        let q = root_in("qdisc noqueue 0: root refcnt 2 \n").expect("the default");
        assert_eq!(q.kind, "noqueue");
    }
}
