//! A machine pod (`[pod.vm]`): QEMU booted on the cached image with the
//! suite's packages as its payload, the packages installed (`dpkg -i`, as
//! an administrator would), the first healthy answer on the forwarded
//! port, then the handle's fields read from files of the guest through its
//! agent (what the service writes at its first start is there by then);
//! and its stop, proven: QEMU gone, the overlay gone.
//!
//! The machine's run directory (overlay, sockets, console) lives in the
//! pod's private directory, so that whatever removes the one (the stop,
//! the runner's watchdog, `pod down`) removes the other. Its process group
//! is told to the boot's observer before QEMU starts, and its guard ends
//! it should this process die.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use super::spec::{
    BootObserver, BootStep, BootedMachine, LaunchError, LaunchSpec, LaunchedPod, MachineLaunch,
    MachineStop, StopError, StopReport,
};
use crate::config::GuestField;
use crate::machine::{Machine, MachineError, MachineObserver, MachineSpec, MachineStep};
use crate::pod::check::{check_health, HealthReport};
use crate::pod::handle::PodHandle;

/// Boots the machine pod `m` of `spec`, in `private_dir`.
pub(super) async fn boot(
    spec: &LaunchSpec,
    m: &MachineLaunch,
    private_dir: std::path::PathBuf,
) -> Result<LaunchedPod, LaunchError> {
    let started = Instant::now();
    let mut machine_spec = MachineSpec::new(m.image.clone());
    machine_spec.memory_mib = m.memory_mib;
    machine_spec.cpus = m.cpus;
    machine_spec.ports = vec![m.port];
    machine_spec.payload = super::installer::payload(m, &private_dir.join("payload"))
        .map_err(failed(spec, "gather its files"))?;
    machine_spec.run_parent = Some(private_dir.clone());
    machine_spec.boot_limit = m.ceiling;
    machine_spec.data_disk_mib = m.data_disk_mib;
    machine_spec.run_id = m.run_id.clone();
    let observer = spec.observer.clone();
    machine_spec.observer = Some(MachineObserver::new(move |step| {
        let step = match step {
            MachineStep::Group { pgid, start_ticks } => {
                BootStep::MachineGroup { pgid, start_ticks }
            }
            MachineStep::RunDir(dir) => BootStep::MachineDir(dir),
        };
        BootObserver::tell(observer.as_ref(), step);
    }));
    let mut machine = Machine::boot(&machine_spec)
        .await
        .map_err(failed(spec, "boot"))?;
    let (pgid, start_ticks) = machine.group();
    BootObserver::tell(spec.observer.as_ref(), BootStep::Pod { pgid, start_ticks });
    match up(spec, m, &mut machine, started).await {
        Ok((handle, health)) => Ok(LaunchedPod {
            handle,
            pid: machine.qemu_pid() as u32,
            pgid,
            start_ticks,
            home: private_dir.join("home"),
            private_dir,
            logs_dir: spec.logs_dir.clone(),
            health,
            boot_time: started.elapsed(),
            child: None,
            machine: Some(BootedMachine {
                machine,
                image: m.image.name.clone(),
                image_note: m.image_note.clone(),
            }),
        }),
        Err(e) => {
            keep_console(&machine, &spec.logs_dir);
            // What ending it left is part of the failure: the run's down
            // phase names it. Its guard ends what `down` could not.
            match machine.down().await {
                Ok(_) => Err(e),
                Err(left) => Err(LaunchError::MachineNotEnded {
                    boot: Box::new(e),
                    left: crate::errors::error_chain(&left),
                }),
            }
        }
    }
}

fn failed<'a>(
    spec: &'a LaunchSpec,
    what: &'a str,
) -> impl FnOnce(MachineError) -> LaunchError + 'a {
    move |source| LaunchError::Machine {
        what: what.to_owned(),
        logs: spec.logs_dir.clone(),
        source,
    }
}

/// From a booted guest to a pod that is up: its packages installed, its
/// handle made of what the guest holds, its health answered, all within
/// the machine's ceiling from `started`.
async fn up(
    spec: &LaunchSpec,
    m: &MachineLaunch,
    machine: &mut Machine,
    started: Instant,
) -> Result<(PodHandle, HealthReport), LaunchError> {
    // Before the packages: their maintainer scripts may set up the
    // product's data there.
    let data_dir = match m.data_disk_mib {
        Some(_) => Some(
            machine
                .mount_data_disk()
                .await
                .map_err(failed(spec, "mount its data disk"))?
                .to_owned(),
        ),
        None => None,
    };
    // The units that failed before the product came: what the image
    // itself leaves failed is not the product's failure.
    // (Not known, when the guest could not say: no unit is then taken
    // for the product's, rather than one the image always fails.)
    let failed_before = failed_units(machine).await.ok();
    let left = m.ceiling.saturating_sub(started.elapsed());
    let installed = super::installer::install(m, machine, left)
        .await
        .map_err(|(what, e)| failed(spec, what)(e))?;
    let log = spec.logs_dir.join("machine.install.log");
    let _ = std::fs::write(&log, installed);
    let port = machine
        .port(m.port)
        .map_err(failed(spec, "forward its port"))?;
    let base_url = format!("http://127.0.0.1:{port}");
    let health = wait_healthy(
        spec,
        &base_url,
        started,
        m.ceiling,
        machine,
        failed_before.as_ref(),
    )
    .await?;
    // Once it answers: what a service writes at its first start is there.
    let fields = read_fields(machine, &m.fields).await?;
    let access = crate::machine::MachineAccess::new(
        machine.run_dir().to_owned(),
        format!("{base_url}{}", spec.health_path),
        data_dir,
    );
    let handle = super::spec::handle_of_fields(spec, port, &fields)?.with_machine(access);
    Ok((handle, health))
}

/// The largest guest file a handle field is read from: a field is a
/// short value, and a guest file may be of any size.
const FIELD_FILE_MAX: usize = 64 * 1024;

/// Each of `[pod.vm] fields`, read in the guest.
async fn read_fields(
    machine: &mut Machine,
    fields: &BTreeMap<String, GuestField>,
) -> Result<BTreeMap<String, String>, LaunchError> {
    let mut values = BTreeMap::new();
    for (name, field) in fields {
        let wrong = |problem: String| LaunchError::GuestField {
            field: name.clone(),
            problem,
        };
        let bytes = machine
            .read_file_at_most(&field.file, FIELD_FILE_MAX)
            .await
            .map_err(|e| {
                wrong(format!(
                    "{} could not be read in the guest once the packages were installed: {}",
                    field.file,
                    crate::errors::error_chain(&e)
                ))
            })?;
        let text = String::from_utf8_lossy(&bytes);
        let value = match (&field.var, &field.pointer) {
            (Some(var), _) => value_of(&text, var).ok_or_else(|| {
                wrong(format!(
                    "{} has no line `{var}=…`: name the variable the file sets, or leave out \
                     `var` to take the whole file",
                    field.file
                ))
            })?,
            (None, Some(pointer)) => json_value_of(&text, pointer).ok_or_else(|| {
                wrong(format!(
                    "{} is not JSON with a string or a number at {pointer}: give the pointer \
                     of one, or leave out `pointer` to take the whole file",
                    field.file
                ))
            })?,
            (None, None) => text.trim().to_owned(),
        };
        if value.is_empty() {
            return Err(wrong(format!("{} gives an empty value", field.file)));
        }
        values.insert(name.clone(), value);
    }
    Ok(values)
}

/// The value of `var` in a file of `VAR=value` lines (an `export ` before
/// it and quotes around the value allowed, as a shell or systemd reads it).
fn value_of(text: &str, var: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let line = line.trim();
        let line = line.strip_prefix("export ").unwrap_or(line);
        let (key, value) = line.split_once('=')?;
        if key.trim() != var {
            return None;
        }
        let value = value.trim();
        let unquoted = ['"', '\'']
            .iter()
            .find_map(|q| value.strip_prefix(*q)?.strip_suffix(*q))
            .unwrap_or(value);
        Some(unquoted.to_owned())
    })
}

/// The string (or number, as text) at `pointer` of the JSON `text`.
fn json_value_of(text: &str, pointer: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    match value.pointer(pointer)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Asks the pod's health path at `base_url` every 200 ms until it answers
/// 2xx, or the ceiling (from `started`) passes. Meanwhile, every
/// [`GUEST_EVERY`], asks the guest which units failed: one that failed
/// since the install (not in `failed_before`, when that is known) ends
/// the wait at once, with its last lines, rather than at the ceiling;
/// and a guest whose
/// agent has not answered for [`SILENT_LIMIT`] is named as hung.
async fn wait_healthy(
    spec: &LaunchSpec,
    base_url: &str,
    started: Instant,
    ceiling: Duration,
    machine: &mut Machine,
    failed_before: Option<&BTreeSet<String>>,
) -> Result<HealthReport, LaunchError> {
    let mut asked = Instant::now();
    let mut silent_since: Option<Instant> = None;
    loop {
        let report = check_health(base_url, &spec.health_path, Duration::from_secs(2)).await;
        if report.ok() {
            return Ok(report);
        }
        if started.elapsed() >= ceiling {
            return Err(LaunchError::Timeout {
                which: format!(
                    "the machine's ceiling {} ([pod.vm] ceiling)",
                    humantime::format_duration(ceiling)
                ),
                waited: started.elapsed(),
                last_seen: format!("health {}", report.summary()),
                logs: spec.logs_dir.clone(),
            });
        }
        if asked.elapsed() >= GUEST_EVERY {
            asked = Instant::now();
            match failed_units(machine).await {
                Ok(now) => {
                    silent_since = None;
                    if let Some(before) = failed_before {
                        let new: Vec<&String> = now.difference(before).collect();
                        if !new.is_empty() {
                            return Err(unit_failed(spec, machine, &new).await);
                        }
                    }
                }
                Err(_) => {
                    let since = *silent_since.get_or_insert(asked);
                    if since.elapsed() >= SILENT_LIMIT {
                        return Err(LaunchError::GuestSilent {
                            silent: since.elapsed(),
                            console: crate::redact(&machine.console_tail()).into_owned(),
                            logs: spec.logs_dir.clone(),
                        });
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// How often the wait for health asks the guest about its units.
const GUEST_EVERY: Duration = Duration::from_secs(2);

/// How long the guest's agent may be silent (each question given
/// [`GUEST_ANSWER`]) before the guest is named as hung: long enough for a
/// guest under TCG on a loaded host.
const SILENT_LIMIT: Duration = Duration::from_secs(60);

/// How long one question to the guest's agent may take.
const GUEST_ANSWER: Duration = Duration::from_secs(10);

/// The units of the guest in the state `failed`.
async fn failed_units(machine: &mut Machine) -> Result<BTreeSet<String>, MachineError> {
    let argv = [
        "systemctl",
        "list-units",
        "--state=failed",
        "--no-legend",
        "--plain",
        "--full",
    ];
    let out = machine.exec(&argv, &[], GUEST_ANSWER).await?;
    Ok(out
        .stdout_text()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect())
}

/// The failure of the units `units`, with their last journal lines.
async fn unit_failed(spec: &LaunchSpec, machine: &mut Machine, units: &[&String]) -> LaunchError {
    let mut argv = vec!["journalctl", "--no-pager", "-q", "-n", "20"];
    for unit in units {
        argv.extend(["-u", unit.as_str()]);
    }
    let journal = match machine.exec(&argv, &[], GUEST_ANSWER).await {
        Ok(out) => out.stdout_text(),
        Err(e) => format!(
            "(the journal could not be read: {})",
            crate::errors::error_chain(&e)
        ),
    };
    let journal = journal
        .lines()
        .map(|l| format!("  {}", crate::pod::process::capped(l)))
        .collect::<Vec<_>>()
        .join("\n");
    LaunchError::UnitFailed {
        units: units
            .iter()
            .map(|u| u.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        journal: crate::redact(&journal).into_owned(),
        logs: spec.logs_dir.clone(),
    }
}

/// The guest's console, kept (capped, redacted) as `machine.console.log`.
fn keep_console(machine: &Machine, logs_dir: &Path) {
    let console = machine.run_dir().join("console.log");
    let _ = crate::redact::keep_capped(
        &console,
        &logs_dir.join("machine.console.log"),
        crate::redact::LOG_KEEP,
    );
}

/// Stops a machine pod: its console kept, the machine ended (`quit`,
/// QEMU killed past a bound), QEMU proven gone, its overlay proven gone,
/// the pod's private directory removed.
pub(super) async fn stop(
    booted: BootedMachine,
    private_dir: &Path,
    logs_dir: &Path,
) -> Result<StopReport, StopError> {
    let began = Instant::now();
    let machine = booted.machine;
    keep_console(&machine, logs_dir);
    let qemu_pid = machine.qemu_pid();
    let qemu_ticks = crate::process::start_ticks(qemu_pid);
    // Ended from outside already (`pod down`, a crash): said, not a failure.
    let already_gone = !qemu_ticks.is_some_and(|t| crate::process::is_running(qemu_pid, t));
    let run_dir = machine.run_dir().to_owned();
    let overlay = run_dir.join("overlay.qcow2");
    let processes = crate::process::group_members(machine.group().0).len();
    let problem = |problem: String| StopError::Machine { problem };
    let down = machine
        .down()
        .await
        .map_err(|e| problem(crate::errors::error_chain(&e)))?;
    if qemu_ticks.is_some_and(|t| crate::process::is_running(qemu_pid, t)) {
        return Err(problem(format!(
            "QEMU (pid {qemu_pid}) still runs after the machine was brought down"
        )));
    }
    if overlay.exists() || run_dir.exists() {
        return Err(problem(format!(
            "its overlay {} is still there after the machine was brought down",
            overlay.display()
        )));
    }
    if let Err(e) = std::fs::remove_dir_all(private_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(StopError::HomeSurvived {
                path: private_dir.to_owned(),
                problem: e.to_string(),
            });
        }
    }
    Ok(StopReport {
        processes,
        drained_after_term: down.exited_cleanly,
        killed: if down.exited_cleanly {
            Vec::new()
        } else {
            vec![qemu_pid]
        },
        removed: private_dir.to_owned(),
        duration: began.elapsed(),
        containers: None,
        machine: Some(MachineStop {
            qemu_pid,
            exited_cleanly: down.exited_cleanly,
            already_gone,
            run_dir,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::{json_value_of, value_of};

    #[test]
    fn a_field_is_the_string_at_its_pointer_of_a_json_file() {
        let file = r#"{"name": "sandboxd-k3v9", "n": 7, "o": {}}"#;
        assert_eq!(
            json_value_of(file, "/name").as_deref(),
            Some("sandboxd-k3v9")
        );
        assert_eq!(json_value_of(file, "/n").as_deref(), Some("7"));
        assert_eq!(json_value_of(file, "/o"), None);
        assert_eq!(json_value_of(file, "/missing"), None);
        assert_eq!(json_value_of("not json", "/name"), None);
    }

    #[test]
    fn a_field_is_the_value_of_its_variable_as_a_shell_reads_it() {
        let file = "# made at install\nOTHER=1\nSANDBOXD_TOKEN=abc123\n";
        assert_eq!(value_of(file, "SANDBOXD_TOKEN").as_deref(), Some("abc123"));
        assert_eq!(value_of("export T=\"q v\"\n", "T").as_deref(), Some("q v"));
        assert_eq!(value_of("T='x'", "T").as_deref(), Some("x"));
        assert_eq!(value_of("TT=1\nT_X=2\n", "T"), None);
        assert_eq!(value_of("", "T"), None);
    }
}
