//! Stop: the containers first, then the process group, then the private
//! directory, each proven gone; the logs kept, redacted.

use std::path::Path;
use std::time::{Duration, Instant};

use super::spec::{LaunchedPod, StopError, StopReport};
use crate::pod::container::{self, ContainerRecord};
use crate::process;

impl LaunchedPod {
    /// Stops the pod: SIGTERM to its group, waits up to `grace` for the tree
    /// to drain, SIGKILLs what remains, deletes its HOME, and verifies both.
    pub async fn stop(mut self, grace: Duration) -> Result<StopReport, StopError> {
        if let Some(machine) = self.machine.take() {
            return super::machine::stop(machine, &self.private_dir, &self.logs_dir).await;
        }
        let stdout_raw = self.private_dir.join("stdout.raw");
        let stderr_log = self.logs_dir.join("pod.stderr.log");
        let child = self.child.take();
        let reaper = child.map(|mut c| tokio::spawn(async move { c.wait().await }));
        let result = stop_group(
            self.pgid,
            self.start_ticks,
            (&self.private_dir, Some(&self.logs_dir)),
            grace,
            || keep_logs(&stdout_raw, &self.logs_dir, &stderr_log),
        )
        .await;
        if let Some(r) = reaper {
            r.abort();
        }
        result
    }
}

/// Stops the pod whose group is `pgid` and whose private directory is
/// `private_dir` (a pod started by another process, or one whose launcher
/// died). `start_ticks` guards against a reused pid. Dead pods are reclaimed:
/// their directory is deleted and verified gone.
pub async fn stop_recorded(
    pgid: i32,
    start_ticks: Option<u64>,
    private_dir: &Path,
    logs_dir: Option<&Path>,
    grace: Duration,
) -> Result<StopReport, StopError> {
    let stdout_raw = private_dir.join("stdout.raw");
    stop_group(pgid, start_ticks, (private_dir, logs_dir), grace, || {
        if let Some(logs) = logs_dir {
            keep_logs(&stdout_raw, logs, &logs.join("pod.stderr.log"))
        }
    })
    .await
}

async fn stop_group(
    pgid: i32,
    start_ticks: Option<u64>,
    (private_dir, logs_dir): (&Path, Option<&Path>),
    grace: Duration,
    save_logs: impl FnOnce(),
) -> Result<StopReport, StopError> {
    let began = Instant::now();
    // A machine pod's machine (one kept by `--keep`, or whose run is gone):
    // QEMU is in the group, its overlay in the private dir; both are
    // proven gone below.
    let machine = crate::machine::MachineRecord::of_pod(private_dir)
        .map(|record| (record.qemu_running(), record));
    // The container first: its `docker run` waits for it, and the daemon
    // keeps it whatever becomes of that process.
    let containers = match ContainerRecord::read(private_dir) {
        Some(record) => match container::stop_keeping_node_logs(&record, logs_dir, grace).await {
            Ok(stop) => Some(stop),
            Err(problem) => {
                let _ = process::terminate_group(pgid, start_ticks, grace).await;
                save_logs();
                return Err(StopError::Containers {
                    problem: crate::errors::error_chain(&problem),
                });
            }
        },
        None => None,
    };
    let ended = match process::terminate_group(pgid, start_ticks, grace).await {
        Ok(ended) => ended,
        Err(survivors) => {
            save_logs();
            return Err(StopError::Survivors { pgid, survivors });
        }
    };
    save_logs();
    if let Err(e) = std::fs::remove_dir_all(private_dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(StopError::HomeSurvived {
                path: private_dir.to_owned(),
                problem: e.to_string(),
            });
        }
    }
    if private_dir.exists() {
        return Err(StopError::HomeSurvived {
            path: private_dir.to_owned(),
            problem: "it still exists after deletion".to_owned(),
        });
    }
    let machine = match machine {
        Some((_, record)) if record.qemu_running() || record.run_dir.exists() => {
            return Err(StopError::Machine {
                problem: format!(
                    "QEMU (pid {}) running: {}; its overlay's dir {} there: {}",
                    record.qemu_pid,
                    record.qemu_running(),
                    record.run_dir.display(),
                    record.run_dir.exists()
                ),
            })
        }
        Some((was_running, record)) => Some(super::spec::MachineStop {
            qemu_pid: record.qemu_pid,
            exited_cleanly: was_running && ended.killed.is_empty(),
            already_gone: !was_running,
            run_dir: record.run_dir,
        }),
        None => None,
    };
    Ok(StopReport {
        processes: ended.processes,
        drained_after_term: ended.killed.is_empty(),
        killed: ended.killed,
        removed: private_dir.to_owned(),
        duration: began.elapsed(),
        containers,
        machine,
    })
}

/// Copies the raw stdout, redacted, to the logs folder, and redacts stderr
/// in place.
pub(super) fn keep_logs(stdout_raw: &Path, logs_dir: &Path, stderr_log: &Path) {
    use crate::redact::{keep_capped, LOG_KEEP};
    register_printed_handle(stdout_raw, LOG_KEEP / 2);
    // Each log is kept as a test's output is: its first and last part,
    // whatever the pod printed, read no further than that.
    let _ = keep_capped(stdout_raw, &logs_dir.join("pod.stdout.log"), LOG_KEEP);
    // The pod wrote its stderr into the logs folder itself: a copy that
    // could not be kept redacted (a full disk) must not stay unredacted.
    if let Err(e) = keep_capped(stderr_log, stderr_log, LOG_KEEP) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!(
                "testkit: {} could not be kept redacted ({e}): removed",
                stderr_log.display()
            );
            let _ = std::fs::remove_file(stderr_log);
        }
    }
}

/// Registers the secrets of the handle the pod printed in the first or last
/// `part` bytes of its output (the parts that are kept). The process that
/// stops a pod may not be the one that read its handle (`pod down` of a
/// kept pod), so they are registered from the output itself.
fn register_printed_handle(stdout_raw: &Path, part: u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(stdout_raw) else {
        return;
    };
    let size = file.metadata().map_or(0, |m| m.len());
    let mut head = Vec::new();
    let _ = (&file).take(part).read_to_end(&mut head);
    let mut tail = Vec::new();
    if size > part
        && file
            .seek(SeekFrom::Start(size.saturating_sub(part).max(part)))
            .is_ok()
    {
        let _ = (&file).take(part).read_to_end(&mut tail);
    }
    for text in [head, tail] {
        let text = String::from_utf8_lossy(&text);
        for line in text.lines().filter(|l| l.trim_start().starts_with('{')) {
            let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(line.trim()) else {
                continue;
            };
            if !obj.contains_key("token") {
                continue;
            }
            for (key, value) in &obj {
                if let (false, Some(v)) = (
                    matches!(key.as_str(), "name" | "base_url" | "health"),
                    value.as_str(),
                ) {
                    crate::register_secret(v);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keep_logs;
    use crate::redact::LOG_KEEP;

    #[test]
    fn a_pod_that_prints_more_than_its_logs_keep_leaves_their_ends_redacted() {
        let dir = tempfile::tempdir().unwrap();
        let (raw, err) = (
            dir.path().join("stdout.raw"),
            dir.path().join("pod.stderr.log"),
        );
        let handle = r#"{"base_url": "http://127.0.0.1:1", "token": "tok-printed-handle-5150"}"#;
        let filler = "x".repeat(1 << 20) + "\n";
        let mut out = format!("{handle}\n");
        for _ in 0..24 {
            out.push_str(&filler);
        }
        out.push_str("last words tok-printed-handle-5150\n");
        std::fs::write(&raw, &out).unwrap();
        std::fs::write(&err, &out).unwrap();
        keep_logs(&raw, dir.path(), &err);
        for kept in [dir.path().join("pod.stdout.log"), err] {
            let text = std::fs::read_to_string(&kept).unwrap();
            assert!(
                text.len() as u64 <= LOG_KEEP + 100,
                "{}: {} bytes",
                kept.display(),
                text.len()
            );
            assert!(text.contains("bytes dropped"), "{}", kept.display());
            assert!(!text.contains("tok-printed-handle"), "{}", kept.display());
            assert!(
                text.ends_with("last words [REDACTED]\n"),
                "{}",
                kept.display()
            );
        }
    }
}
