//! A machine pod's life past the happy run, for real: kept with `--keep`
//! (installed by the installer `binaries`), listed by `pod ls`, ended by
//! `pod down` with nothing left; a guest that powers off mid-run failing
//! the run with a `pod` verdict naming the machine; and a failed boot
//! whose down phase says what became of its machine.
//!
//! Each test is one boot (tens of seconds under TCG). Needs what a machine
//! pod needs: see `machines.rs`.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use super::machines::{
    alive, machine_fixture, machine_of, machine_runner, overlay_in, running_test,
};
use crate::Ran;

/// Sandboxd's files for the installer `binaries`, in the suite's `vm/`:
/// the program (stripped), its unit, its system user, its settings, the
/// package's postinst (which makes the user and the token); and
/// `[pod.vm.binaries]` naming them, with `setup` (a TOML array of
/// commands) run in the guest.
fn with_binaries(suite: &Path, setup: &str) {
    let vm = suite.join("vm");
    std::fs::create_dir_all(&vm).unwrap();
    let stripped = std::process::Command::new("strip")
        .arg("-o")
        .arg(vm.join("sandboxd"))
        .arg(test_support::sandboxd_bin())
        .status()
        .unwrap();
    assert!(stripped.success(), "strip (binutils) failed");
    let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sandboxd/packaging/deb");
    for (from, to) in [
        ("sandboxd.service", "sandboxd.service"),
        ("sysusers.conf", "sysusers.conf"),
        ("default", "default"),
        ("postinst", "postinst"),
    ] {
        std::fs::copy(packaging.join(from), vm.join(to)).unwrap();
    }
    let toml = suite.join("testkit.toml");
    let mut text = std::fs::read_to_string(&toml).unwrap();
    text.push_str(&format!(
        r#"
[pod.vm.binaries]
files = [
  {{ from = "vm/sandboxd", to = "/usr/bin/sandboxd", mode = "0755" }},
  {{ from = "vm/sandboxd.service", to = "/etc/systemd/system/sandboxd.service" }},
  {{ from = "vm/sysusers.conf", to = "/usr/lib/sysusers.d/sandboxd.conf" }},
  {{ from = "vm/default", to = "/etc/default/sandboxd" }},
  {{ from = "vm/postinst", to = "/usr/lib/sandboxd/postinst", mode = "0755" }},
]
setup = {setup}
unit = "sandboxd.service"
"#
    ));
    std::fs::write(&toml, text).unwrap();
}

/// A run of `create_two` on a machine installed by `binaries` whose boot
/// fails: the run, and the evidence of its failed `up` phase.
fn failed_boot(suite: &Path) -> (Ran, String) {
    let ran = Ran::from(
        machine_runner()
            .args(["run", "--pod", "vm", "--installer", "binaries"])
            .arg(suite)
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    assert_ne!(ran.code, 0, "{}", ran.stdout);
    let (up, why) = ran.verdict("up");
    assert_eq!(up, "fail", "{why}");
    (ran, why)
}

/// The package's own set-up, run by hand: its user, its token.
const POSTINST: &str = r#"[["/usr/lib/sandboxd/postinst", "configure"]]"#;

/// A machine the test saw, ended (QEMU killed, its pod's dir removed) if
/// the test fails before `pod down` did it.
struct Seen {
    qemu: Option<i32>,
    private_dir: Option<PathBuf>,
}

impl Drop for Seen {
    fn drop(&mut self) {
        if let Some(pid) = self.qemu.filter(|p| alive(*p)) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
        if let Some(dir) = &self.private_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// One GET on 127.0.0.1: the status line.
fn get(url: &str, path: &str) -> std::io::Result<String> {
    let addr = url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

/// `--keep` leaves the machine up past the runner, saying how to reach it
/// (its forwarded port, its handle, console, QEMU log, monitor); `pod ls`
/// lists it as a machine; it answers on its port; `pod down` ends it, and
/// then no QEMU runs and no overlay, run dir or record is left. The product
/// came by the installer `binaries`: files copied, its unit started.
#[test]
fn a_kept_machine_is_listed_reached_and_brought_down_leaving_nothing() {
    let suite = machine_fixture();
    with_binaries(suite.path(), POSTINST);
    let pods = tempfile::tempdir().unwrap();
    let ran = Ran::from(
        machine_runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["run", "--pod", "vm", "--keep", "--installer", "binaries"])
            .arg(suite.path())
            .args(["-E", "test(create_two)"])
            .output()
            .unwrap(),
    );
    let mut seen = Seen {
        qemu: None,
        private_dir: None,
    };
    if let Some((qemu, private_dir)) = machine_of(pods.path()) {
        seen = Seen {
            qemu: Some(qemu),
            private_dir: Some(private_dir),
        };
    }
    assert_eq!(ran.code, 0, "{}\n{}", ran.stdout, ran.stderr);
    let all = format!("{}{}", ran.stdout, ran.stderr);
    for says in [
        "a machine: QEMU pid",
        "forwarded: 127.0.0.1:",
        "console:",
        "QEMU log:",
        "monitor:",
        "stop it:  testkit-runner pod down",
    ] {
        assert!(all.contains(says), "the keep note lacks {says:?}: {all}");
    }
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "skip", "{why}");
    assert!(why.contains("kept running (--keep)"), "{why}");
    let (qemu, private_dir) = (seen.qemu.unwrap(), seen.private_dir.clone().unwrap());
    let overlay = overlay_in(&private_dir).expect("the kept machine's overlay");
    assert!(alive(qemu), "QEMU {qemu} outlives the runner");

    let ls = Ran::from(
        crate::runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "ls"])
            .output()
            .unwrap(),
    );
    assert_eq!(ls.code, 0, "{}", ls.stderr);
    let line = ls
        .stdout
        .lines()
        .find(|l| l.contains(&format!("machine (QEMU pid {qemu}, image debian-12")))
        .unwrap_or_else(|| panic!("pod ls lists the machine: {}", ls.stdout));
    assert!(
        line.contains(" alive ") && line.contains(", kept)"),
        "{line}"
    );
    let name = line.split_whitespace().next().unwrap().to_owned();
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap()
        .trim_end_matches(',');
    let status = get(url, "/api/health").expect("the kept machine answers on its port");
    assert!(status.contains(" 200 "), "{status}");

    let down = Ran::from(
        crate::runner()
            .env("TESTKIT_PODS_DIR", pods.path())
            .args(["pod", "down", &name])
            .output()
            .unwrap(),
    );
    assert_eq!(down.code, 0, "{}\n{}", down.stdout, down.stderr);
    assert!(
        down.stdout.contains(&format!(
            "machine: QEMU (pid {qemu}) exited on SIGTERM, verified gone"
        )),
        "{}",
        down.stdout
    );
    assert!(!alive(qemu), "QEMU {qemu} outlived `pod down`");
    assert!(
        !overlay.exists(),
        "{} outlived `pod down`",
        overlay.display()
    );
    assert!(!private_dir.exists());
    assert!(!pods.path().join(&name).exists(), "its record outlived it");
}

/// Sends one QMP command on the machine's free monitor socket.
fn qmp(socket: &Path, command: &str) {
    let stream = UnixStream::connect(socket)
        .unwrap_or_else(|e| panic!("the monitor {}: {e}", socket.display()));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.contains("QMP"), "{line}");
    let mut w = stream;
    for c in ["qmp_capabilities", command] {
        writeln!(w, "{{\"execute\": \"{c}\"}}").unwrap();
        // Events (`POWERDOWN`) may come before the answer.
        loop {
            line.clear();
            reader.read_line(&mut line).unwrap();
            if !line.contains("\"event\"") {
                break;
            }
        }
        assert!(line.contains("\"return\""), "{c}: {line}");
    }
}

/// A guest powered off in the middle of a test (the ACPI power button, as
/// QMP `system_powerdown` presses it) fails the run with a `pod` verdict
/// that names the machine and what it did; the run never passes.
#[test]
fn a_guest_that_powers_off_mid_run_fails_the_run_naming_its_machine() {
    let suite = machine_fixture();
    let pods = tempfile::tempdir().unwrap();
    let mut running = running_test(suite.path(), pods.path(), "crash");
    let (qemu, private_dir) = machine_of(pods.path()).expect("the run's machine pod");
    let _seen = Seen {
        qemu: Some(qemu),
        private_dir: None,
    };
    let monitor = std::fs::read_dir(&private_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("monitor.sock"))
        .find(|p| p.exists())
        .expect("the machine's free monitor socket");
    qmp(&monitor, "system_powerdown");
    let child = running.0.take().unwrap();
    let ran = Ran::from(child.wait_with_output().unwrap());
    assert_ne!(ran.code, 0, "the run passed: {}", ran.stdout);
    let (verdict, evidence) = ran.verdict("pod");
    assert_eq!(verdict, "fail", "{evidence}");
    for says in [
        "the pod's machine (QEMU pid",
        "image debian-12",
        "went down mid-run: the guest powered off",
        "reboot: Power down",
    ] {
        assert!(evidence.contains(says), "{says:?} not in: {evidence}");
    }
    assert!(!alive(qemu));
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
}

/// A boot that fails once the machine runs (a setup command of the
/// installer fails) ends its machine, and the down phase says so, proven,
/// rather than skipping as if nothing had been made.
#[test]
fn a_failed_machine_boot_s_down_phase_says_what_became_of_its_machine() {
    let suite = machine_fixture();
    with_binaries(
        suite.path(),
        r#"[["sh", "-c", "echo the setup fails on purpose >&2; exit 3"]]"#,
    );
    let (ran, why) = failed_boot(suite.path());
    assert!(
        why.contains("run [pod.vm.binaries] setup") && why.contains("exit code 3"),
        "{why}"
    );
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
    assert!(
        why.contains("the failed boot ended what it had made of its machine"),
        "{why}"
    );
}

/// A product whose unit fails once installed (sandboxd refuses an unknown
/// option, restarts, and systemd gives up on it) fails the boot as soon as
/// the unit has failed, naming the unit and its last lines, rather than
/// when the machine's ceiling runs out with "health: connection refused".
#[test]
fn a_product_unit_that_fails_is_named_with_its_lines_without_waiting_for_the_ceiling() {
    let suite = machine_fixture();
    with_binaries(
        suite.path(),
        // Before the package's set-up, which (re)starts the service.
        r#"[["sh", "-c", "echo SANDBOXD_OPTS=--no-such-option >> /etc/default/sandboxd"], ["/usr/lib/sandboxd/postinst", "configure"]]"#,
    );
    let (ran, why) = failed_boot(suite.path());
    assert!(
        why.contains("unit(s) sandboxd.service failed after the install")
            && why.contains("--no-such-option"),
        "{why}"
    );
    assert!(
        !why.contains("ceiling"),
        "the boot waited for its ceiling: {why}"
    );
    let (down, why) = ran.verdict("down");
    assert_eq!(down, "pass", "{why}");
}
