//! A booted machine: QEMU on a copy-on-write overlay of a cached image,
//! its guest reached through the guest agent, its services through ports
//! forwarded on 127.0.0.1, QEMU itself driven through its monitor.
//!
//! Every file of a boot lives in one run directory (the overlay, the
//! sockets, the console log, the payload disk), and every process in one
//! process group made before QEMU starts (see [`super::guard`]): a
//! [`MachineObserver`] is told both before QEMU runs, so that a watchdog
//! can end them if this process dies.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::agent::{Agent, GuestOutput, QGA_SOCKET};
use super::guard::Guard;
use super::image::Image;
use super::qmp::{Qmp, FAULTS_QMP_SOCKET, USER_MONITOR};
use super::record::{MachineRecord, Owner};
use super::{require, run_bounded, tail, MachineError};

/// The QEMU this module drives.
const QEMU: &str = "qemu-system-x86_64";

/// The guest's kernel command line: root on the first virtio disk, the
/// console on the first serial port (which goes to `console.log`), the
/// classic `eth0` name the image's network config matches, and a panic
/// that ends QEMU (`-no-reboot`) rather than hanging.
const KERNEL_ARGS: &str = "root=/dev/vda rw console=ttyS0 net.ifnames=0 panic=-1";

/// A machine with no devices but those given, no display, and no reboot
/// (a guest that reboots or panics ends QEMU).
const HEADLESS: &[&str] = &[
    "-nodefaults",
    "-no-user-config",
    "-display",
    "none",
    "-no-reboot",
];

/// How long a KVM probe may take to show that a guest runs.
const KVM_PROBE_LIMIT: Duration = Duration::from_secs(5);

/// How long QEMU gets to exit after `quit` or a powerdown.
const EXIT_LIMIT: Duration = Duration::from_secs(30);

/// How long a new connection to the guest agent may take to answer its
/// sync, once the guest is up.
const AGENT_CONNECT_LIMIT: Duration = Duration::from_secs(30);

/// The longest a unix socket path may be (108 bytes with the NUL; some
/// slack for the file names).
const SOCKET_DIR_MAX: usize = 100;

/// How many times a boot tries again when QEMU could not bind a forwarded
/// port (another process took it between its choice and QEMU's bind).
const PORT_ATTEMPTS: usize = 3;

/// How a machine's CPU runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// QEMU's emulation: slower, works everywhere.
    Tcg,
}

impl Accel {
    /// The word QEMU and the reports use.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// Which accelerator a boot used, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct AccelChoice {
    /// The accelerator.
    pub accel: Accel,
    /// Why it was chosen (`/dev/kvm` missing, a KVM guest that printed
    /// nothing within the probe's bound, asked for).
    pub why: String,
}

/// Which accelerator to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AccelPolicy {
    /// KVM if a probe guest runs under it within a bound, else TCG.
    #[default]
    Auto,
    /// TCG whatever the machine offers.
    Tcg,
}

/// Something a boot made that must not outlive the process booting it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MachineStep {
    /// The run directory (overlay, sockets, logs) was created.
    RunDir(PathBuf),
    /// The process group QEMU will be started into exists (its leader is
    /// the guard); told before QEMU starts.
    Group {
        /// The group.
        pgid: i32,
        /// Its leader's start time, against pid reuse.
        start_ticks: Option<u64>,
    },
}

/// Told of each [`MachineStep`] as it is made.
#[derive(Clone)]
pub struct MachineObserver(Arc<dyn Fn(MachineStep) + Send + Sync>);

impl MachineObserver {
    /// An observer that calls `tell` with each step.
    pub fn new(tell: impl Fn(MachineStep) + Send + Sync + 'static) -> MachineObserver {
        MachineObserver(Arc::new(tell))
    }
}

impl std::fmt::Debug for MachineObserver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MachineObserver")
    }
}

/// How to boot a machine.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct MachineSpec {
    /// The image it boots (never written to).
    pub image: Image,
    /// Memory, in MiB.
    pub memory_mib: u32,
    /// Virtual CPUs.
    pub cpus: u32,
    /// Guest TCP ports forwarded from free ports on 127.0.0.1.
    pub ports: Vec<u16>,
    /// Files put on a read-only disk the guest sees as `/dev/vdb` (see
    /// [`Machine::mount_payload`]).
    pub payload: Vec<PathBuf>,
    /// Where the run directory is made (default: the temp dir). Its path
    /// must be short enough for unix sockets.
    pub run_parent: Option<PathBuf>,
    /// Which accelerator.
    pub accel: AccelPolicy,
    /// The longest boot, until the guest agent answers.
    pub boot_limit: Duration,
    /// Told of what the boot makes, as it makes it.
    pub observer: Option<MachineObserver>,
    /// A blank ext4 data disk of this many MiB, which the guest sees
    /// labelled `testkit-data` (see [`Machine::mount_data_disk`]): what a
    /// disk fault fills.
    pub data_disk_mib: Option<u32>,
    /// The run it is booted for, written in its record (see
    /// [`MachineRecord`]) for the janitor and the residue sweep.
    pub run_id: Option<String>,
}

impl MachineSpec {
    /// A spec with the defaults: 1 GiB, 1 CPU, no ports, no payload, a
    /// boot bound of 5 minutes (TCG on a loaded machine is slow).
    pub fn new(image: Image) -> MachineSpec {
        MachineSpec {
            image,
            memory_mib: 1024,
            cpus: 1,
            ports: Vec::new(),
            payload: Vec::new(),
            run_parent: None,
            accel: AccelPolicy::Auto,
            boot_limit: Duration::from_secs(300),
            observer: None,
            data_disk_mib: None,
            run_id: None,
        }
    }
}

/// What ending a machine did, verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DownReport {
    /// Whether QEMU exited on its own after the request (else it was killed).
    pub exited_cleanly: bool,
    /// The run directory (with the overlay), verified gone.
    pub removed: PathBuf,
}

/// A booted machine. Dropping it without [`Machine::down`] kills QEMU and
/// has its guard remove the run directory.
#[derive(Debug)]
pub struct Machine {
    run_dir: PathBuf,
    guard: Option<Guard>,
    qemu: tokio::process::Child,
    qemu_pid: i32,
    qmp: Qmp,
    /// Held from the boot until its first use is done: the guest agent
    /// serves one client at a time, and a test's faults need it too (see
    /// [`Machine::agent`]).
    agent: Option<Agent>,
    ports: BTreeMap<u16, u16>,
    accel: AccelChoice,
    boot_time: Duration,
    record: MachineRecord,
}

impl Machine {
    /// Boots `spec`: overlay, QEMU in a guarded group, until the guest
    /// agent answers.
    pub async fn boot(spec: &MachineSpec) -> Result<Machine, MachineError> {
        require(QEMU, "boot a machine", "qemu-system-x86")?;
        require("qemu-img", "make a machine's overlay", "qemu-utils")?;
        require("mkfs.ext4", "make a machine's payload disk", "e2fsprogs")?;
        let started = Instant::now();
        let parent = spec.run_parent.clone().unwrap_or_else(std::env::temp_dir);
        let run_dir = parent.join(format!("testkit-machine-{}", crate::ids::random_id(8)));
        if run_dir.as_os_str().len() > SOCKET_DIR_MAX {
            return Err(MachineError::PathTooLong { path: run_dir });
        }
        let tell = |step| {
            if let Some(o) = &spec.observer {
                (o.0)(step);
            }
        };
        // The guard before anything it removes or ends.
        let guard = Guard::start(&run_dir)?;
        tell(MachineStep::Group {
            pgid: guard.pgid(),
            start_ticks: guard.start_ticks(),
        });
        match boot_guarded(spec, &guard, &run_dir, &tell, started).await {
            Ok((qemu, qemu_pid, qmp, agent, ports, accel)) => {
                let record = MachineRecord {
                    image: spec.image.name.clone(),
                    qemu_pid,
                    qemu_start_ticks: crate::process::start_ticks(qemu_pid),
                    pgid: guard.pgid(),
                    ports: ports.clone(),
                    run_dir: run_dir.clone(),
                    run_id: spec.run_id.clone(),
                    owner: Some(Owner::this_process()),
                };
                let machine = Machine {
                    run_dir,
                    guard: Some(guard),
                    qemu,
                    qemu_pid,
                    qmp,
                    agent: Some(agent),
                    ports,
                    accel,
                    boot_time: started.elapsed(),
                    record,
                };
                // Dropped on an error: QEMU killed, the guard ends the rest.
                machine.record.write()?;
                Ok(machine)
            }
            // What ending the failed boot left is part of the failure.
            Err(e) => match guard.abandon(EXIT_LIMIT).await {
                Ok(()) => Err(e),
                Err(left) => Err(MachineError::BootNotEnded {
                    boot: Box::new(e),
                    left: Box::new(left),
                }),
            },
        }
    }

    /// The host port (on 127.0.0.1) that reaches `guest_port`.
    pub fn port(&self, guest_port: u16) -> Result<u16, MachineError> {
        self.ports
            .get(&guest_port)
            .copied()
            .ok_or(MachineError::PortNotForwarded(guest_port))
    }

    /// Which accelerator it runs under, and why.
    pub fn accel(&self) -> &AccelChoice {
        &self.accel
    }

    /// How long the boot took, until the guest agent answered.
    pub fn boot_time(&self) -> Duration {
        self.boot_time
    }

    /// QEMU's pid.
    pub fn qemu_pid(&self) -> i32 {
        self.qemu_pid
    }

    /// The process group QEMU runs in (its leader is the guard), and its
    /// leader's start time.
    pub fn group(&self) -> (i32, Option<u64>) {
        let guard = self
            .guard
            .as_ref()
            .expect("a machine holds its guard until down");
        (guard.pgid(), guard.start_ticks())
    }

    /// The run directory (overlay, sockets, `console.log`).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// What another process needs to list, reach and end it.
    pub fn record(&self) -> &MachineRecord {
        &self.record
    }

    /// Lets the machine outlive this process (`--keep`): its record says
    /// it has no owner, its guard is released (it ends nothing when this
    /// process exits), and QEMU runs on until someone ends it
    /// ([`MachineRecord::end`], `pod down`).
    pub async fn keep(mut self) -> Result<MachineRecord, MachineError> {
        let mut record = self.record.clone();
        record.owner = None;
        record.write()?;
        let guard = self
            .guard
            .take()
            .expect("a machine holds its guard until down");
        guard.release().await?;
        // Without its guard, dropping the machine closes its connections
        // and leaves QEMU running.
        Ok(record)
    }

    /// Runs `argv` in the guest as root, with `stdin`, for at most `limit`.
    pub async fn exec(
        &mut self,
        argv: &[&str],
        stdin: &[u8],
        limit: Duration,
    ) -> Result<GuestOutput, MachineError> {
        self.agent().await?.exec(argv, stdin, limit).await
    }

    /// Writes a file in the guest.
    pub async fn write_file(&mut self, path: &str, bytes: &[u8]) -> Result<(), MachineError> {
        self.agent().await?.write_file(path, bytes).await
    }

    /// Reads a file of the guest.
    pub async fn read_file(&mut self, path: &str) -> Result<Vec<u8>, MachineError> {
        self.agent().await?.read_file(path).await
    }

    /// The guest agent, for one use: the connection the boot made, else a
    /// new one. It is let go after the use: QEMU serves the agent's
    /// channel to one client at a time, and a test process injecting a
    /// fault ([`super::MachineAccess`]) must find it free.
    async fn agent(&mut self) -> Result<Agent, MachineError> {
        if let Some(agent) = self.agent.take() {
            return Ok(agent);
        }
        let socket = self.run_dir.join(QGA_SOCKET);
        let deadline = tokio::time::Instant::now() + AGENT_CONNECT_LIMIT;
        Agent::connect(&socket, deadline)
            .await?
            .ok_or_else(|| MachineError::Agent {
                command: "guest-sync-delimited".to_owned(),
                problem: format!("no answer within {AGENT_CONNECT_LIMIT:?}"),
            })
    }

    /// Reads a file of the guest of at most `max` bytes: a larger one is
    /// refused, read no further than that.
    pub async fn read_file_at_most(
        &mut self,
        path: &str,
        max: usize,
    ) -> Result<Vec<u8>, MachineError> {
        self.agent().await?.read_file_at_most(path, max).await
    }

    /// Mounts the payload disk read-only at `/run/payload` in the guest;
    /// answers that path.
    pub async fn mount_payload(&mut self) -> Result<&'static str, MachineError> {
        const AT: &str = "/run/payload";
        let script = format!("mkdir -p {AT} && (mountpoint -q {AT} || mount -o ro /dev/vdb {AT})");
        self.checked(&["sh", "-c", &script], Duration::from_secs(60))
            .await?;
        Ok(AT)
    }

    /// Installs the payload's `.deb` files with `dpkg -i` (the image holds
    /// their dependencies: the guest has no network), which runs their
    /// maintainer scripts (a service's unit enabled and started).
    pub async fn install_payload_debs(
        &mut self,
        limit: Duration,
    ) -> Result<GuestOutput, MachineError> {
        let at = self.mount_payload().await?;
        let script = format!("dpkg -i {at}/*.deb");
        self.checked(&["sh", "-c", &script], limit).await
    }

    async fn checked(
        &mut self,
        argv: &[&str],
        limit: Duration,
    ) -> Result<GuestOutput, MachineError> {
        let out = self.exec(argv, &[], limit).await?;
        if out.success() {
            return Ok(out);
        }
        Err(MachineError::Command {
            command: format!("(guest) {}", argv.join(" ")),
            status: match (out.code, out.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "unknown".to_owned(),
            },
            output: tail(&format!("{}{}", out.stdout_text(), out.stderr_text()), 2000),
        })
    }

    /// Freezes the guest's CPUs (QMP `stop`): it answers nothing until
    /// [`Machine::cont`].
    pub async fn pause(&mut self) -> Result<(), MachineError> {
        self.qmp.execute("stop", None).await.map(|_| ())
    }

    /// Resumes a paused guest (QMP `cont`).
    pub async fn cont(&mut self) -> Result<(), MachineError> {
        self.qmp.execute("cont", None).await.map(|_| ())
    }

    /// Plugs or unplugs the guest's network cable (QMP `set_link`): the
    /// forwarded ports stop reaching it while it is down.
    pub async fn set_link(&mut self, up: bool) -> Result<(), MachineError> {
        self.qmp
            .execute(
                "set_link",
                Some(serde_json::json!({ "name": "net0", "up": up })),
            )
            .await
            .map(|_| ())
    }

    /// Asks the guest to shut down (QMP `system_powerdown`, the ACPI power
    /// button); [`Machine::down`] waits for it.
    pub async fn powerdown(&mut self) -> Result<(), MachineError> {
        self.qmp.execute("system_powerdown", None).await.map(|_| ())
    }

    /// The end of the guest's console log.
    pub fn console_tail(&self) -> String {
        console_tail(&self.run_dir)
    }

    /// Ends the machine: QMP `quit`, QEMU killed if it has not exited
    /// within a bound, its group verified empty, the run directory (the
    /// overlay) removed and verified gone.
    pub async fn down(mut self) -> Result<DownReport, MachineError> {
        let _ = self.qmp.execute("quit", None).await;
        let exited_cleanly = matches!(
            tokio::time::timeout(EXIT_LIMIT, self.qemu.wait()).await,
            Ok(Ok(_))
        );
        if !exited_cleanly {
            let _ = self.qemu.start_kill();
            let _ = tokio::time::timeout(EXIT_LIMIT, self.qemu.wait()).await;
        }
        let guard = self
            .guard
            .take()
            .expect("a machine holds its guard until down");
        let pgid = guard.pgid();
        let members: Vec<i32> = crate::process::group_members(pgid)
            .into_iter()
            .map(|m| m.0)
            .filter(|&p| p != pgid)
            .collect();
        if !members.is_empty() {
            let _ = guard.abandon(EXIT_LIMIT).await;
            return Err(MachineError::Survived(format!(
                "processes {members:?} of group {pgid} outlived QEMU"
            )));
        }
        // Gone already when someone else ended the machine (its guard, told
        // by a dead owner, or a watchdog): what matters is that it is gone.
        match std::fs::remove_dir_all(&self.run_dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(MachineError::io("remove", &self.run_dir)(e))
            }
            _ => {}
        }
        guard.release().await?;
        Ok(DownReport {
            exited_cleanly,
            removed: self.run_dir.clone(),
        })
    }
}

impl Drop for Machine {
    fn drop(&mut self) {
        if self.guard.is_some() {
            // Not brought down: end QEMU now; the guard (its pipe closed
            // with it) ends the rest of the group and removes the files.
            let _ = self.qemu.start_kill();
        }
    }
}

type Booted = (
    tokio::process::Child,
    i32,
    Qmp,
    Agent,
    BTreeMap<u16, u16>,
    AccelChoice,
);

async fn boot_guarded(
    spec: &MachineSpec,
    guard: &Guard,
    run_dir: &Path,
    tell: &impl Fn(MachineStep),
    started: Instant,
) -> Result<Booted, MachineError> {
    std::fs::create_dir(run_dir).map_err(MachineError::io("create", run_dir))?;
    tell(MachineStep::RunDir(run_dir.to_owned()));
    let accel = choose_accel(spec, guard, run_dir).await;

    let overlay = run_dir.join("overlay.qcow2");
    let mut create = guard.command("qemu-img");
    create
        .args(["create", "-q", "-f", "qcow2", "-F", "raw", "-b"])
        .arg(&spec.image.disk)
        .arg(&overlay);
    run_bounded(create, Duration::from_secs(60)).await?;
    let payload = match spec.payload.is_empty() {
        true => None,
        false => Some(payload_disk(spec, guard, run_dir).await?),
    };
    // Made once: a retried start reuses it.
    let data = match spec.data_disk_mib {
        Some(mib) => Some(super::data::make_disk(guard, run_dir, mib).await?),
        None => None,
    };

    let mut attempt = 1;
    loop {
        match start_qemu(
            spec,
            guard,
            run_dir,
            payload.as_deref(),
            data.as_deref(),
            &accel,
            started,
        )
        .await
        {
            Ok((child, qemu_pid, qmp, agent, ports)) => {
                return Ok((child, qemu_pid, qmp, agent, ports, accel))
            }
            // Another process took a chosen port before QEMU bound it:
            // QEMU refused to start; a new choice of ports makes it.
            Err(MachineError::QemuExited { .. })
                if attempt < PORT_ATTEMPTS && lost_a_port(run_dir) =>
            {
                attempt += 1;
                for stale in [
                    "qmp.sock",
                    "qga.sock",
                    FAULTS_QMP_SOCKET,
                    USER_MONITOR,
                    "qemu.stderr.log",
                ] {
                    let _ = std::fs::remove_file(run_dir.join(stale));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// Whether QEMU's log says it could not bind a forwarded port.
fn lost_a_port(run_dir: &Path) -> bool {
    std::fs::read_to_string(run_dir.join("qemu.stderr.log"))
        .is_ok_and(|log| log.contains("host forwarding rule"))
}

/// Starts QEMU on the overlay (and `payload`) in `run_dir`, with ports
/// chosen now, and waits until the guest answers its first command.
async fn start_qemu(
    spec: &MachineSpec,
    guard: &Guard,
    run_dir: &Path,
    payload: Option<&Path>,
    data: Option<&Path>,
    accel: &AccelChoice,
    started: Instant,
) -> Result<(tokio::process::Child, i32, Qmp, Agent, BTreeMap<u16, u16>), MachineError> {
    let overlay = run_dir.join("overlay.qcow2");
    let ports = forwarded_ports(&spec.ports)?;
    let (qmp_socket, qga_socket) = (run_dir.join("qmp.sock"), run_dir.join(QGA_SOCKET));
    let mut hostfwd = String::from("user,id=net0,restrict=on");
    for (guest, host) in &ports {
        hostfwd.push_str(&format!(",hostfwd=tcp:127.0.0.1:{host}-:{guest}"));
    }
    let mut qemu = guard.command(QEMU);
    qemu.arg("-name")
        .arg(format!(
            "testkit-machine,process=testkit-machine-{}",
            spec.image.name
        ))
        .args(["-machine", &format!("q35,accel={}", accel.accel.as_str())])
        .args([
            "-cpu",
            if accel.accel == Accel::Kvm {
                "host"
            } else {
                "max"
            },
        ])
        .args([
            "-smp",
            &spec.cpus.to_string(),
            "-m",
            &spec.memory_mib.to_string(),
        ])
        .args(HEADLESS)
        .arg("-kernel")
        .arg(&spec.image.kernel)
        .arg("-initrd")
        .arg(&spec.image.initrd)
        .args(["-append", KERNEL_ARGS])
        .arg("-drive")
        .arg(drive(&overlay, "qcow2", false));
    if let Some(disk) = payload {
        qemu.arg("-drive").arg(drive(disk, "raw", true));
    }
    if let Some(disk) = data {
        qemu.arg("-drive").arg(drive(disk, "raw", false));
    }
    qemu.args(["-netdev", &hostfwd, "-device", "virtio-net-pci,netdev=net0"])
        .arg("-qmp")
        .arg(format!(
            "unix:{},server=on,wait=off",
            option_value(&qmp_socket)
        ))
        // A second monitor, for a test process's faults (this process holds
        // the first from the boot to `down`), and a third left free for
        // people and tools (see `MachineRecord::monitor_socket`).
        .arg("-qmp")
        .arg(format!(
            "unix:{},server=on,wait=off",
            option_value(&run_dir.join(FAULTS_QMP_SOCKET))
        ))
        .arg("-qmp")
        .arg(format!(
            "unix:{},server=on,wait=off",
            option_value(&run_dir.join(USER_MONITOR))
        ))
        .arg("-chardev")
        .arg(format!(
            "socket,path={},server=on,wait=off,id=qga0",
            option_value(&qga_socket)
        ))
        .args(["-device", "virtio-serial"])
        .args([
            "-device",
            "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
        ])
        .arg("-serial")
        // `file:` takes the rest of the value as the path, commas included.
        .arg(format!("file:{}", run_dir.join("console.log").display()))
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(run_dir.join("qemu.stderr.log"))
                .map_err(MachineError::io("create", run_dir.join("qemu.stderr.log")))?,
        );
    let mut child = qemu
        .spawn()
        .map_err(MachineError::io("start", PathBuf::from(QEMU)))?;
    let qemu_pid = child.id().map(|p| p as i32).unwrap_or_default();
    let deadline = tokio::time::Instant::from_std(started + spec.boot_limit);

    let qmp = connect_monitor(&mut child, &qmp_socket, run_dir, deadline).await?;
    let agent = tokio::select! {
        agent = Agent::connect(&qga_socket, deadline) => agent?,
        status = child.wait() => return Err(exited(status, run_dir)),
    };
    let Some(agent) = agent else {
        return Err(MachineError::BootTimeout {
            waited: spec.boot_limit,
            console_tail: console_tail(run_dir),
        });
    };
    Ok((child, qemu_pid, qmp, agent, ports))
}

/// `path` as a value of a QEMU option, whose values are separated by
/// commas: a comma in it is doubled (QEMU's escape).
fn option_value(path: &Path) -> String {
    path.display().to_string().replace(',', ",,")
}

fn drive(file: &Path, format: &str, read_only: bool) -> String {
    let mut d = format!("file={},format={format},if=virtio", option_value(file));
    if read_only {
        d.push_str(",readonly=on");
    }
    d
}

/// A small ext4 disk holding the payload files (`mkfs.ext4 -d`, no mount).
async fn payload_disk(
    spec: &MachineSpec,
    guard: &Guard,
    run_dir: &Path,
) -> Result<PathBuf, MachineError> {
    let dir = run_dir.join("payload");
    std::fs::create_dir(&dir).map_err(MachineError::io("create", &dir))?;
    let mut bytes = 0;
    for file in &spec.payload {
        let name = file.file_name().ok_or_else(|| MachineError::Io {
            what: "name",
            path: file.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        })?;
        bytes += std::fs::copy(file, dir.join(name)).map_err(MachineError::io("copy", file))?;
    }
    let disk = run_dir.join("payload.img");
    let file = std::fs::File::create(&disk).map_err(MachineError::io("create", &disk))?;
    // Room for the files and ext4's own (a few MiB), rounded to MiB.
    let size = (bytes * 5 / 4 + (16 << 20)).div_ceil(1 << 20) << 20;
    file.set_len(size)
        .map_err(MachineError::io("size", &disk))?;
    drop(file);
    let mut mkfs = guard.command("mkfs.ext4");
    mkfs.args(["-q", "-F", "-L", "testkit-payload", "-d"])
        .arg(&dir)
        .arg(&disk);
    run_bounded(mkfs, Duration::from_secs(120)).await?;
    std::fs::remove_dir_all(&dir).map_err(MachineError::io("remove", &dir))?;
    Ok(disk)
}

/// Free loopback ports, one for each guest port, held open together while
/// they are found so that no two are one.
fn forwarded_ports(guest_ports: &[u16]) -> Result<BTreeMap<u16, u16>, MachineError> {
    let listeners: Vec<std::net::TcpListener> = guest_ports
        .iter()
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<_, _>>()
        .map_err(MachineError::io(
            "find a free port on",
            PathBuf::from("127.0.0.1"),
        ))?;
    guest_ports
        .iter()
        .zip(&listeners)
        .map(|(g, l)| {
            l.local_addr()
                .map(|a| (*g, a.port()))
                .map_err(MachineError::io(
                    "find a free port on",
                    PathBuf::from("127.0.0.1"),
                ))
        })
        .collect()
}

/// Connects to QEMU's monitor at `socket` and negotiates, once QEMU
/// listens there; fails when QEMU exits first or at `deadline`.
///
/// The socket's file appears when QEMU binds it, before it listens: a
/// connect in between is refused (a boot failed so on a loaded machine),
/// so a refusal, like a missing file, is waited out.
async fn connect_monitor(
    child: &mut tokio::process::Child,
    socket: &Path,
    run_dir: &Path,
    deadline: tokio::time::Instant,
) -> Result<Qmp, MachineError> {
    loop {
        match tokio::net::UnixStream::connect(socket).await {
            Ok(stream) => return Qmp::negotiate(stream).await,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
                ) => {}
            Err(e) => {
                return Err(MachineError::Qmp {
                    command: "connect".to_owned(),
                    problem: format!("{}: {e}", socket.display()),
                })
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(exited(Ok(status), run_dir));
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(MachineError::BootTimeout {
                waited: Duration::ZERO,
                console_tail: console_tail(run_dir),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn exited(status: std::io::Result<std::process::ExitStatus>, run_dir: &Path) -> MachineError {
    let stderr = std::fs::read_to_string(run_dir.join("qemu.stderr.log")).unwrap_or_default();
    MachineError::QemuExited {
        status: match status {
            Ok(s) => s.to_string(),
            Err(e) => e.to_string(),
        },
        console_tail: format!("{}{}", tail(&stderr, 1000), console_tail(run_dir)),
    }
}

fn console_tail(run_dir: &Path) -> String {
    let text = std::fs::read(run_dir.join("console.log")).unwrap_or_default();
    tail(&String::from_utf8_lossy(&text), 1500)
}

/// TCG when asked or when KVM is not usable; KVM when `/dev/kvm` opens and
/// a probe guest (the image's kernel, no disk) prints its first line
/// under it within [`KVM_PROBE_LIMIT`]: on some hosts `/dev/kvm` opens
/// but a guest hangs before it prints anything.
async fn choose_accel(spec: &MachineSpec, guard: &Guard, run_dir: &Path) -> AccelChoice {
    let tcg = |why: String| AccelChoice {
        accel: Accel::Tcg,
        why,
    };
    if spec.accel == AccelPolicy::Tcg {
        return tcg("TCG was asked for".to_owned());
    }
    // What the host offers does not change while it runs: one probe (and
    // its bound) per boot of the host, kept next to the image cache, not
    // per machine.
    static PROBED: tokio::sync::OnceCell<AccelChoice> = tokio::sync::OnceCell::const_new();
    PROBED
        .get_or_init(|| async {
            let kept = spec.image.dir.parent().map(|c| c.join(".kvm-probe.json"));
            let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|id| id.trim().to_owned())
                .ok();
            if let (Some(kept), Some(boot_id)) = (&kept, &boot_id) {
                if let Some(choice) = probed_before(kept, boot_id) {
                    return choice;
                }
            }
            let choice = probe_kvm(spec, guard, run_dir).await;
            if let (Some(kept), Some(boot_id)) = (&kept, &boot_id) {
                let record = serde_json::json!({
                    "boot_id": boot_id, "accel": choice.accel, "why": choice.why,
                });
                // A cache: a failed write costs the next process a probe.
                let _ = std::fs::write(kept, record.to_string());
            }
            choice
        })
        .await
        .clone()
}

/// The probe's answer kept in `kept` by a process of this boot of the
/// host (`boot_id`), if there is one.
fn probed_before(kept: &Path, boot_id: &str) -> Option<AccelChoice> {
    let record: serde_json::Value = serde_json::from_slice(&std::fs::read(kept).ok()?).ok()?;
    if record["boot_id"].as_str() != Some(boot_id) {
        return None;
    }
    let accel = match record["accel"].as_str()? {
        "kvm" => Accel::Kvm,
        "tcg" => Accel::Tcg,
        _ => return None,
    };
    Some(AccelChoice {
        accel,
        why: format!(
            "{} (probed earlier since this host booted)",
            record["why"].as_str()?
        ),
    })
}

async fn probe_kvm(spec: &MachineSpec, guard: &Guard, run_dir: &Path) -> AccelChoice {
    let tcg = |why: String| AccelChoice {
        accel: Accel::Tcg,
        why,
    };
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
    {
        return tcg(format!("/dev/kvm cannot be opened: {e}"));
    }
    let log = run_dir.join("kvm-probe.log");
    let mut probe = guard.command(QEMU);
    probe
        .args(["-machine", "q35,accel=kvm", "-cpu", "host", "-m", "256"])
        .args(HEADLESS)
        .arg("-kernel")
        .arg(&spec.image.kernel)
        .args(["-append", "console=ttyS0 panic=-1"])
        .arg("-serial")
        .arg(format!("file:{}", log.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let Ok(mut child) = probe.spawn() else {
        return tcg("a KVM probe guest could not start".to_owned());
    };
    let printed = super::poll_until(KVM_PROBE_LIMIT, || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Linux version"))
    })
    .await;
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_file(&log);
    if printed {
        AccelChoice {
            accel: Accel::Kvm,
            why: "/dev/kvm opens and a probe guest ran under it".to_owned(),
        }
    } else {
        tcg(format!(
            "/dev/kvm opens, but a probe guest printed nothing under KVM within {KVM_PROBE_LIMIT:?}"
        ))
    }
}

#[cfg(test)]
mod option_tests {
    use super::*;

    /// A comma in a path would end QEMU's option value there: it is
    /// doubled, QEMU's escape.
    #[test]
    fn a_comma_in_a_path_is_escaped_in_qemu_s_options() {
        assert_eq!(
            drive(Path::new("/tmp/a,b/overlay.qcow2"), "qcow2", true),
            "file=/tmp/a,,b/overlay.qcow2,format=qcow2,if=virtio,readonly=on"
        );
        assert_eq!(option_value(Path::new("/plain")), "/plain");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsRawFd;

    /// QEMU binds its monitor's socket (the file appears) a moment before
    /// it listens: a connect in that moment is refused, and the boot must
    /// wait it out rather than fail.
    #[test]
    fn the_monitor_is_reached_though_its_socket_is_bound_before_it_listens() {
        use nix::sys::socket::{bind, listen, socket, AddressFamily, Backlog};
        use nix::sys::socket::{SockFlag, SockType, UnixAddr};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let fd = socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC,
            None,
        )
        .unwrap();
        bind(fd.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
        assert!(path.exists());
        // A monitor that listens only after a while, then greets and
        // accepts `qmp_capabilities`.
        let monitor = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            listen(&fd, Backlog::new(1).unwrap()).unwrap();
            let listener = std::os::unix::net::UnixListener::from(fd);
            let (mut stream, _) = listener.accept().unwrap();
            stream
                .write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n")
                .unwrap();
            let mut line = String::new();
            BufReader::new(stream.try_clone().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert!(line.contains("qmp_capabilities"), "{line}");
            stream.write_all(b"{\"return\": {}}\n").unwrap();
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let connected = rt.block_on(async {
            // Stands for QEMU's process: alive while the monitor starts.
            let mut qemu = tokio::process::Command::new("sleep")
                .arg("30")
                .kill_on_drop(true)
                .spawn()
                .unwrap();
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            connect_monitor(&mut qemu, &path, dir.path(), deadline).await
        });
        // Checked first: a refused connect leaves the monitor in `accept`.
        assert!(connected.is_ok(), "{connected:?}");
        monitor.join().unwrap();
    }
}
