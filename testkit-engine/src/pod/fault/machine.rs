//! Faults of a machine pod (`[pod.vm]`): its one node, [`MACHINE_NODE`],
//! is the guest, driven through QEMU's monitor and the guest agent
//! ([`MachineAccess`]), from the test process or its reaper.
//!
//! - A pause is QMP `stop`, shown by `query-status` (`paused`), undone by
//!   `cont`.
//! - A restart is a reset (QMP `system_reset`, with QEMU told to reboot the
//!   guest rather than end), shown by the guest's boot id changing once its
//!   agent answers again.
//! - An isolation unplugs the guest's network cable (QMP `set_link`),
//!   shown by the forwarded port no longer answering.
//! - A link fault is a `netem` queue at the root of the guest's interface,
//!   read back from the guest's kernel, and measured where a measure
//!   exists: a timed round trip through the forwarded port for a delay,
//!   netem's own counters over a burst of datagrams the guest sends for a
//!   loss or a duplication, the guest's TCP retransmissions for a
//!   corruption.
//! - A clock jump sets the guest's clock (the guest agent), shown and
//!   undone against the host's. A clock strobe is a loop in the guest
//!   (started by the agent, its pid in [`STROBE_PID`]) that jumps the
//!   clock ahead and back every period for its duration, shown by the
//!   guest's clock seen ahead; undone by ending the loop and setting the
//!   clock to the host's.
//! - A full disk is a file written on the data disk until it has no room
//!   (`df` says so), undone by removing that file.
//!
//! Every undo is proven: the guest runs (`query-status`), its agent
//! answers, its service answers its health check on the forwarded port,
//! and nothing of the fault is left (no queue, the clock within
//! [`CLOCK_SLACK`] of the host's, the file gone and room on the disk).
//! Stopping or killing the machine is refused: the test cannot start QEMU
//! again, so neither could be undone.

use std::time::{Duration, Instant};

use super::link::{self, Link, NETEM_HANDLE};
use super::{Fault, FaultAction, FaultError, Reverted};
use crate::machine::{host_time_ns, MachineAccess, DATA_LABEL};
use crate::pod::check::check_health;

/// The name of a machine pod's one node.
pub const MACHINE_NODE: &str = "machine";

/// The longest an undo and its proof may take on a machine: a guest that
/// was reset boots again within it, under emulation (TCG) on a loaded host.
pub const MACHINE_UNDO_LIMIT: Duration = Duration::from_secs(300);

/// How far the guest's clock may be from the host's once set: a command
/// through the guest agent of an emulated guest takes up to a second or two.
pub const CLOCK_SLACK: Duration = Duration::from_secs(5);

/// Where the guest keeps the pid of a clock strobe's loop while it runs.
const STROBE_PID: &str = "/run/testkit-clock-strobe.pid";

/// The shortest strobe period: each jump goes through a `date` in an
/// emulated guest, and must be seen by the agent within a period or two.
const STROBE_PERIOD_MIN: Duration = Duration::from_secs(1);

/// The longest a strobe may last: fault tests stay bounded in time.
const STROBE_DURATION_MAX: Duration = Duration::from_secs(600);

/// The file a full-disk fault writes, in the data disk's mount.
const FILL_FILE: &str = ".testkit-fill";

/// What a full disk has left, at most.
const FULL_BELOW: u64 = 1 << 20;

/// How long one health check through the forwarded port may take.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(3);

/// How long one guest command of a fault may take.
const GUEST_LIMIT: Duration = Duration::from_secs(60);

fn refused(node: &str, action: FaultAction, why: impl Into<String>) -> FaultError {
    FaultError::Refused {
        fault: Fault::of_machine(node, action, "").describe(),
        why: why.into(),
    }
}

/// Plans `action` on the machine: refuses what a machine pod cannot carry,
/// or could not undo.
pub(super) fn plan(
    access: &MachineAccess,
    node: &str,
    action: FaultAction,
) -> Result<Fault, FaultError> {
    if node != MACHINE_NODE {
        return Err(refused(
            node,
            action,
            format!("a machine pod has one node, `{MACHINE_NODE}`: name it"),
        ));
    }
    match &action {
        FaultAction::Pause | FaultAction::Restart => {}
        FaultAction::Stop | FaultAction::Kill => {
            return Err(refused(
                node,
                action,
                "a machine pod's QEMU cannot be started again from a test, so a stopped or \
                 killed machine could not be undone: use pause (frozen, then resumed) or \
                 restart (a reset of the guest, which boots again)",
            ))
        }
        FaultAction::Cut { from, tests } if from.is_empty() && *tests => {}
        FaultAction::Cut { .. } | FaultAction::Partition { .. } => {
            return Err(refused(
                node,
                action,
                format!(
                    "a machine pod has no peers to cut it off from: isolate(\"{MACHINE_NODE}\") \
                     unplugs its network cable"
                ),
            ))
        }
        FaultAction::Link { peer: Some(_), .. } => {
            return Err(refused(
                node,
                action,
                format!("a machine pod has no peers: degrade(\"{MACHINE_NODE}\", …) its own link"),
            ))
        }
        FaultAction::Link { link, peer: None } => {
            if let Some(why) = link.refused_on_machines() {
                return Err(FaultError::LinkRefused {
                    link: link.describe(),
                    node: node.to_owned(),
                    why,
                });
            }
        }
        FaultAction::Clock { offset_ms } => {
            let least = 2 * CLOCK_SLACK.as_millis() as u64;
            if offset_ms.unsigned_abs() < least {
                return Err(refused(
                    node,
                    action,
                    format!(
                        "a jump under {} cannot be told from the time a command takes to reach \
                         an emulated guest ({} either way): give a larger one",
                        humantime::format_duration(Duration::from_millis(least)),
                        humantime::format_duration(CLOCK_SLACK)
                    ),
                ));
            }
        }
        FaultAction::ClockStrobe {
            offset_ms,
            period_ms,
            duration_ms,
        } => {
            let least = 2 * CLOCK_SLACK.as_millis() as u64;
            let why = if *offset_ms < 0 || offset_ms.unsigned_abs() < least {
                Some(format!(
                    "a strobe jumps ahead by at least {} (less cannot be told from the time a                      command takes to reach an emulated guest): give a larger one",
                    humantime::format_duration(Duration::from_millis(least))
                ))
            } else if *period_ms < STROBE_PERIOD_MIN.as_millis() as u64 {
                Some(format!(
                    "a strobe's period is at least {}: each jump is a command in an emulated guest",
                    humantime::format_duration(STROBE_PERIOD_MIN)
                ))
            } else if *duration_ms < 2 * period_ms
                || *duration_ms > STROBE_DURATION_MAX.as_millis() as u64
            {
                Some(format!(
                    "a strobe lasts two periods at least and {} at most",
                    humantime::format_duration(STROBE_DURATION_MAX)
                ))
            } else {
                None
            };
            if let Some(why) = why {
                return Err(refused(node, action, why));
            }
        }
        FaultAction::FillDisk { .. } => {
            if access.data_dir.is_none() {
                return Err(refused(
                    node,
                    action,
                    "the machine has no data disk: give it one with `data_disk_mib` in \
                     [pod.vm] (mounted at /var/lib/testkit-data in the guest)",
                ));
            }
        }
    }
    Ok(Fault::of_machine(
        node,
        action,
        &access.run_dir.display().to_string(),
    ))
}

/// Injects a planned fault, and shows that it took.
pub(super) async fn inject(access: &MachineAccess, fault: &Fault) -> Result<(), FaultError> {
    let did_not_take = |status: String| FaultError::DidNotTake {
        fault: fault.describe(),
        status,
    };
    let not_measured = |measured: String| FaultError::NotMeasured {
        fault: fault.describe(),
        measured,
    };
    let wrap = |source: FaultError| FaultError::Inject {
        fault: fault.describe(),
        source: Box::new(source),
    };
    match &fault.action {
        FaultAction::Pause => {
            access.qmp("stop", None).await.map_err(|e| wrap(e.into()))?;
            let status = access.status().await?;
            if status != "paused" {
                return Err(did_not_take(format!("{status} (query-status)")));
            }
        }
        FaultAction::Restart => {
            let before = boot_id(access).await?;
            // What the guest has written is on its disk first: a reset
            // drops its page cache, and a product installed a minute ago
            // (its token, its config) would come back without its files,
            // a fault of the disk's rather than the restart asked for.
            // Best effort: a guest that cannot sync is reset all the same.
            let _ = access.exec(&["sync"], Duration::from_secs(30)).await;
            // A machine pod's QEMU ends when its guest resets (a guest that
            // reboots on its own is a pod gone): for this reset, it boots.
            access
                .on_reboot("reset")
                .await
                .map_err(|e| wrap(e.into()))?;
            let reset = access.qmp("system_reset", None).await;
            let back = match reset {
                Ok(_) => wait_guest(access, Instant::now() + MACHINE_UNDO_LIMIT).await,
                Err(e) => Err(wrap(e.into())),
            };
            access.on_reboot("shutdown").await?;
            back?;
            if let Some(dir) = &access.data_dir {
                // The guest's fstab names it (`nofail`: the boot does not
                // wait for it); mounted now if the boot has not yet.
                access
                    .sh(
                        &format!(
                            "mountpoint -q {dir} || mount LABEL={DATA_LABEL} {dir} || \
                             mountpoint -q {dir}"
                        ),
                        GUEST_LIMIT,
                    )
                    .await?;
            }
            let after = boot_id(access).await?;
            if after == before {
                return Err(did_not_take(format!(
                    "its boot id is still {before}: the guest did not boot again"
                )));
            }
        }
        FaultAction::Cut { .. } => {
            access.set_link(false).await.map_err(|e| wrap(e.into()))?;
            let report = check_health(&access.health_url, "", HEALTH_TIMEOUT).await;
            if report.ok() {
                return Err(not_measured(format!(
                    "{} still answers through the forwarded port with the link down",
                    access.health_url
                )));
            }
        }
        FaultAction::Link { link, .. } => {
            let before = match link {
                Link::Delay { .. } => Some(round_trip(access, 5, HEALTH_TIMEOUT).await?),
                _ => None,
            };
            let mut script = format!(
                "tc qdisc replace dev {} root handle {NETEM_HANDLE} netem",
                access.interface
            );
            for arg in link.netem_args() {
                script.push(' ');
                script.push_str(&arg);
            }
            access
                .sh(&script, GUEST_LIMIT)
                .await
                .map_err(|e| wrap(e.into()))?;
            let shown = netem_root(access).await?.ok_or_else(|| {
                not_measured(format!(
                    "no netem queue {NETEM_HANDLE} at the root of the guest's {} after `{script}`",
                    access.interface
                ))
            })?;
            measure(access, fault, link, &shown, before).await?;
        }
        FaultAction::Clock { offset_ms } => {
            let target = host_time_ns() + offset_ms * 1_000_000;
            access
                .set_guest_time_ns(target)
                .await
                .map_err(|e| wrap(e.into()))?;
            let off = guest_offset_ms(access).await?;
            if (off - offset_ms).unsigned_abs() > CLOCK_SLACK.as_millis() as u64 {
                return Err(not_measured(format!(
                    "the guest's clock is {off} ms from the host's, {offset_ms} ms asked"
                )));
            }
        }
        FaultAction::ClockStrobe {
            offset_ms,
            period_ms,
            duration_ms,
        } => {
            access
                .sh(
                    &strobe_script(*offset_ms, *period_ms, *duration_ms),
                    GUEST_LIMIT,
                )
                .await
                .map_err(|e| wrap(e.into()))?;
            // Shown by the clock seen ahead within two periods (and the
            // slack of a command's way to the guest).
            let slack = CLOCK_SLACK.as_millis() as u64;
            let until = Instant::now() + Duration::from_millis(2 * period_ms) + CLOCK_SLACK;
            let mut seen = Vec::new();
            loop {
                let off = guest_offset_ms(access).await?;
                if (off - offset_ms).unsigned_abs() <= slack {
                    break;
                }
                seen.push(off);
                if Instant::now() >= until {
                    return Err(not_measured(format!(
                        "the guest's clock was never seen {offset_ms} ms ahead of the host's                          (seen: {} ms)",
                        seen.iter()
                            .map(|o| o.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        FaultAction::FillDisk { .. } => {
            let dir = data_dir(access)?;
            let fill = format!(
                "dd if=/dev/zero of={dir}/{FILL_FILE} bs=1M 2>/dev/null; sync; \
                 df -B1 --output=avail {dir} | tail -n 1"
            );
            let avail = access
                .sh(&fill, Duration::from_secs(300))
                .await
                .map_err(|e| wrap(e.into()))?;
            let avail: u64 = avail.trim().parse().map_err(|_| {
                not_measured(format!("df of {dir} said {avail:?}, not a number of bytes"))
            })?;
            if avail >= FULL_BELOW {
                return Err(not_measured(format!(
                    "{dir} still has {avail} bytes free once filled"
                )));
            }
        }
        FaultAction::Stop | FaultAction::Kill | FaultAction::Partition { .. } => {
            unreachable!("refused by plan")
        }
    }
    Ok(())
}

/// Shows a link fault took: its queue's parameters as the guest's kernel
/// reads them back, and a measure for the kinds that have one.
async fn measure(
    access: &MachineAccess,
    fault: &Fault,
    link: &Link,
    shown: &str,
    before: Option<Duration>,
) -> Result<(), FaultError> {
    let not_measured = |measured: String| FaultError::NotMeasured {
        fault: fault.describe(),
        measured,
    };
    let word = match link {
        Link::Loss { .. } => "loss",
        Link::Rate { .. } => "rate",
        Link::Delay { .. } | Link::Reorder { .. } => "delay",
        Link::Duplicate { .. } => "duplicate",
        Link::Corrupt { .. } => "corrupt",
    };
    if !shown.contains(word) {
        return Err(not_measured(format!(
            "the guest's kernel shows the queue as `{}`, without `{word}`",
            shown.trim()
        )));
    }
    match link {
        Link::Delay { ms, jitter_ms } => {
            let limit = HEALTH_TIMEOUT + Duration::from_millis(8 * (ms + jitter_ms));
            let after = round_trip(access, 5, limit).await?;
            let before = before.unwrap_or_default();
            let least = Duration::from_millis(ms - jitter_ms);
            if after.saturating_sub(before) < least {
                return Err(not_measured(format!(
                    "a health check through the forwarded port took {after:?} (median of 5), \
                     {before:?} before: less than {least:?} slower"
                )));
            }
        }
        Link::Loss { ppm } | Link::Duplicate { ppm } => {
            let sent = link::probe_count(*ppm);
            let (out_before, dropped_before) = counters(access).await?;
            burst(access, sent).await?;
            let (out_after, dropped_after) = counters(access).await?;
            let (out, dropped) = (out_after - out_before, dropped_after - dropped_before);
            let took = match link {
                // Of `out + dropped` packets in, `out` left: the datagrams
                // and the guest's own few.
                Link::Loss { .. } => link::loss_took(*ppm, (out + dropped) as u32, out as u32),
                // Each duplicate leaves as a packet of its own: an excess
                // over the datagrams sent, read as a loss would be.
                _ => {
                    let extra = out.saturating_sub(u64::from(sent)) as u32;
                    link::loss_took(*ppm, sent, sent.saturating_sub(extra))
                }
            };
            if !took {
                return Err(not_measured(format!(
                    "{sent} datagrams sent by the guest: its netem queue passed {out} packets \
                     and dropped {dropped}"
                )));
            }
        }
        Link::Corrupt { .. } => {
            let before = retransmissions(access).await?;
            round_trip(access, 10, HEALTH_TIMEOUT * 4).await.ok();
            let after = retransmissions(access).await?;
            if after <= before {
                return Err(not_measured(
                    "10 health checks through the forwarded port made the guest retransmit \
                     no TCP segment: nothing it sent arrived corrupted"
                        .to_owned(),
                ));
            }
        }
        // Read back from the kernel only: netem counts no reordering, and a
        // rate is what its queue's parameters say.
        Link::Rate { .. } | Link::Reorder { .. } => {}
    }
    Ok(())
}

/// The median of `n` timed health checks through the forwarded port; an
/// error when fewer than half answered.
async fn round_trip(
    access: &MachineAccess,
    n: usize,
    timeout: Duration,
) -> Result<Duration, FaultError> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        if check_health(&access.health_url, "", timeout).await.ok() {
            times.push(started.elapsed());
        }
    }
    if times.len() * 2 < n {
        return Err(FaultError::NotMeasured {
            fault: "a round trip".to_owned(),
            measured: format!(
                "only {} of {n} health checks of {} answered within {timeout:?}",
                times.len(),
                access.health_url
            ),
        });
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// `n` datagrams sent by the guest out of its interface (to QEMU's
/// gateway, which drops them: they are counted by the queue on the way).
async fn burst(access: &MachineAccess, n: u32) -> Result<(), FaultError> {
    let script = format!(
        "exec 2>/dev/null; i=0; while [ $i -lt {n} ]; do echo x >/dev/udp/10.0.2.2/9; \
         i=$((i+1)); done; true"
    );
    access
        .exec(&["bash", "-c", &script], Duration::from_secs(300))
        .await?;
    Ok(())
}

/// The netem queue's counters: packets sent, packets dropped.
async fn counters(access: &MachineAccess) -> Result<(u64, u64), FaultError> {
    let text = access
        .sh(
            &format!("tc -s qdisc show dev {}", access.interface),
            GUEST_LIMIT,
        )
        .await?;
    parse_counters(&text).ok_or_else(|| FaultError::NotMeasured {
        fault: "netem's counters".to_owned(),
        measured: format!("no counters of the queue {NETEM_HANDLE} in {text:?}"),
    })
}

/// `Sent <bytes> bytes <packets> pkt (dropped <n>, …` of the queue
/// [`NETEM_HANDLE`] in `tc -s qdisc show`.
fn parse_counters(text: &str) -> Option<(u64, u64)> {
    let mut lines = text.lines();
    lines.find(|l| l.contains(&format!("netem {NETEM_HANDLE}")))?;
    let sent = lines.next()?.trim();
    let words: Vec<&str> = sent.split_whitespace().collect();
    let packets = words.get(3)?.parse().ok()?;
    let dropped = words
        .get(6)?
        .trim_end_matches(',')
        .trim_end_matches(')')
        .parse()
        .ok()?;
    Some((packets, dropped))
}

/// The TCP segments the guest has retransmitted since it booted.
async fn retransmissions(access: &MachineAccess) -> Result<u64, FaultError> {
    let text = access.sh("cat /proc/net/snmp", GUEST_LIMIT).await?;
    parse_retransmissions(&text).ok_or_else(|| FaultError::NotMeasured {
        fault: "the guest's TCP counters".to_owned(),
        measured: "no RetransSegs in /proc/net/snmp".to_owned(),
    })
}

fn parse_retransmissions(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let names: Vec<&str> = tcp.next()?.split_whitespace().collect();
    let values: Vec<&str> = tcp.next()?.split_whitespace().collect();
    let at = names.iter().position(|n| *n == "RetransSegs")?;
    values.get(at)?.parse().ok()
}

/// The guest's netem queue of [`NETEM_HANDLE`] at the root of its
/// interface, as `tc qdisc show` prints it; `None` when there is none.
async fn netem_root(access: &MachineAccess) -> Result<Option<String>, FaultError> {
    let text = access
        .sh(
            &format!("tc qdisc show dev {}", access.interface),
            GUEST_LIMIT,
        )
        .await?;
    Ok(text
        .lines()
        .find(|l| l.contains(&format!("netem {NETEM_HANDLE} root")))
        .map(str::to_owned))
}

/// The guest's clock less the host's, in ms.
async fn guest_offset_ms(access: &MachineAccess) -> Result<i64, FaultError> {
    let before = host_time_ns();
    let guest = access.guest_time_ns().await?;
    let after = host_time_ns();
    Ok((guest - (before + after) / 2) / 1_000_000)
}

/// The guest script that starts a clock strobe: a loop in a session of
/// its own (it outlives the agent's command), named
/// `testkit-clock-strobe-loop` in its arguments so that it can be found, that jumps the clock
/// `offset_ms` ahead, then back, every `period_ms`, for `duration_ms` by
/// the guest's uptime (a jumping clock cannot time it), and leaves the
/// clock where it found it. Relative `date -s` keeps the sub-second part:
/// the flips do not drift.
fn strobe_script(offset_ms: i64, period_ms: u64, duration_ms: u64) -> String {
    let offset_s = offset_ms / 1000;
    let period = format!("{}.{:03}", period_ms / 1000, period_ms % 1000);
    let duration_s = duration_ms.div_ceil(1000);
    format!(
        "setsid sh -c 'end=$(( $(cut -d. -f1 /proc/uptime) + {duration_s} )); ahead=0; \
         while [ \"$(cut -d. -f1 /proc/uptime)\" -lt \"$end\" ]; do \
           if [ $ahead = 0 ]; then date -s \"{offset_s} seconds\" >/dev/null; ahead=1; \
           else date -s \"{offset_s} seconds ago\" >/dev/null; ahead=0; fi; \
           sleep {period}; \
         done; \
         if [ $ahead = 1 ]; then date -s \"{offset_s} seconds ago\" >/dev/null; fi; \
         rm -f {STROBE_PID}' testkit-clock-strobe-loop </dev/null >/dev/null 2>&1 & \
         echo $! > {STROBE_PID}"
    )
}

/// The guest's boot id: another after each boot.
async fn boot_id(access: &MachineAccess) -> Result<String, FaultError> {
    Ok(access
        .sh("cat /proc/sys/kernel/random/boot_id", GUEST_LIMIT)
        .await?
        .trim()
        .to_owned())
}

fn data_dir(access: &MachineAccess) -> Result<&str, FaultError> {
    access
        .data_dir
        .as_deref()
        .ok_or_else(|| FaultError::Refused {
            fault: "fill the data disk".to_owned(),
            why: "the machine has no data disk ([pod.vm] data_disk_mib)".to_owned(),
        })
}

/// Waits until the guest runs, its agent answers and its service answers
/// its health check, or `deadline`.
async fn wait_guest(access: &MachineAccess, deadline: Instant) -> Result<(), FaultError> {
    loop {
        let status = access.status().await?;
        let last = if status != "running" {
            format!("QEMU says the guest is {status}")
        } else {
            let left = deadline.saturating_duration_since(Instant::now());
            if !access
                .agent_answers(left.clamp(Duration::from_secs(1), Duration::from_secs(30)))
                .await
            {
                "its guest agent does not answer".to_owned()
            } else {
                let report = check_health(&access.health_url, "", HEALTH_TIMEOUT).await;
                if report.ok() {
                    return Ok(());
                }
                format!("its health check: {}", report.summary())
            }
        };
        if Instant::now() >= deadline {
            return Err(FaultError::NotBack { status: last });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Undoes the faults of one test on the machine, given oldest first: all
/// reverted, newest first, then each proven, newest first, within `limit`
/// from now. The outcomes are in the order given.
pub(super) async fn undo_all(
    access: &MachineAccess,
    faults: &[Fault],
    limit: Duration,
) -> Vec<Result<Reverted, FaultError>> {
    let deadline = Instant::now() + limit;
    let mut outcomes: Vec<Result<Reverted, FaultError>> = Vec::with_capacity(faults.len());
    for fault in faults.iter().rev() {
        outcomes.push(revert(access, fault).await);
    }
    outcomes.reverse();
    for (fault, outcome) in faults.iter().zip(outcomes.iter_mut()).rev() {
        if outcome.is_ok() {
            if let Err(why) = prove(access, fault, deadline).await {
                *outcome = Err(why);
            }
        }
    }
    outcomes
}

/// Reverts what was done of a fault; what it found.
async fn revert(access: &MachineAccess, fault: &Fault) -> Result<Reverted, FaultError> {
    let found = match &fault.action {
        FaultAction::Pause => {
            let paused = access.status().await? == "paused";
            if paused {
                access.qmp("cont", None).await?;
            }
            paused
        }
        FaultAction::Restart => {
            // As a machine pod runs: a guest that resets ends QEMU. Nothing
            // else of a reset is left to undo, only its proof.
            access.on_reboot("shutdown").await?;
            true
        }
        FaultAction::Cut { .. } => {
            // QMP tells no link's state: plugged in again whatever it was.
            access.set_link(true).await?;
            true
        }
        FaultAction::Link { .. } => match netem_root(access).await? {
            Some(_) => {
                access
                    .sh(
                        &format!(
                            "tc qdisc del dev {} root handle {NETEM_HANDLE}",
                            access.interface
                        ),
                        GUEST_LIMIT,
                    )
                    .await?;
                true
            }
            None => false,
        },
        FaultAction::Clock { .. } => {
            let off = guest_offset_ms(access).await?;
            let away = off.unsigned_abs() > CLOCK_SLACK.as_millis() as u64;
            if away {
                access.set_guest_time_ns(host_time_ns()).await?;
            }
            away
        }
        FaultAction::ClockStrobe { .. } => {
            // The loop first: it would jump the clock again.
            let stopped = access
                .sh(
                    &format!(
                        "if [ -e {STROBE_PID} ]; then kill \"$(cat {STROBE_PID})\" 2>/dev/null; \
                         rm -f {STROBE_PID}; echo stopped; fi"
                    ),
                    GUEST_LIMIT,
                )
                .await?
                .contains("stopped");
            let away =
                guest_offset_ms(access).await?.unsigned_abs() > CLOCK_SLACK.as_millis() as u64;
            if away {
                access.set_guest_time_ns(host_time_ns()).await?;
            }
            stopped || away
        }
        FaultAction::FillDisk { .. } => {
            let dir = data_dir(access)?;
            let removed = access
                .sh(
                    &format!(
                        "if [ -e {dir}/{FILL_FILE} ]; then rm -f {dir}/{FILL_FILE} && sync && \
                         echo removed; fi"
                    ),
                    GUEST_LIMIT,
                )
                .await?;
            removed.contains("removed")
        }
        FaultAction::Stop | FaultAction::Kill | FaultAction::Partition { .. } => false,
    };
    Ok(if found {
        Reverted::Undone
    } else {
        Reverted::AlreadyUndone
    })
}

/// Proves a reverted fault undone before `deadline`: the guest runs, its
/// agent and its service answer, and nothing of the fault is left.
async fn prove(access: &MachineAccess, fault: &Fault, deadline: Instant) -> Result<(), FaultError> {
    wait_guest(access, deadline).await?;
    let still = |what: String| FaultError::StillThere { what };
    match &fault.action {
        FaultAction::Link { .. } => {
            if let Some(queue) = netem_root(access).await? {
                return Err(still(format!(
                    "the netem queue `{}` on the guest's {}",
                    queue.trim(),
                    access.interface
                )));
            }
        }
        FaultAction::Clock { .. } | FaultAction::ClockStrobe { .. } => {
            if matches!(fault.action, FaultAction::ClockStrobe { .. }) {
                let running = access
                    .sh(
                        &format!(
                            "if [ -e {STROBE_PID} ]; then echo running; fi; \
                             grep -qsa 'testkit-clock-strobe-loo[p]' /proc/[0-9]*/cmdline && echo running; true"
                        ),
                        GUEST_LIMIT,
                    )
                    .await?;
                if running.contains("running") {
                    return Err(still(format!(
                        "the strobe's loop in the guest ({STROBE_PID})"
                    )));
                }
            }
            let off = guest_offset_ms(access).await?;
            if off.unsigned_abs() > CLOCK_SLACK.as_millis() as u64 {
                return Err(still(format!(
                    "the jump: the guest's clock is {off} ms from the host's (at most {} ms \
                     once undone)",
                    CLOCK_SLACK.as_millis()
                )));
            }
        }
        FaultAction::FillDisk { .. } => {
            let dir = data_dir(access)?;
            let avail = access
                .sh(
                    &format!(
                        "test ! -e {dir}/{FILL_FILE} && df -B1 --output=avail {dir} | tail -n 1"
                    ),
                    GUEST_LIMIT,
                )
                .await
                .map_err(|_| still(format!("{dir}/{FILL_FILE}")))?;
            let avail: u64 = avail.trim().parse().unwrap_or(0);
            if avail < FULL_BELOW {
                return Err(still(format!(
                    "the full disk: {dir} has {avail} bytes free after the undo"
                )));
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill_disk() -> FaultAction {
        FaultAction::FillDisk {
            target: String::new(),
            file: String::new(),
        }
    }

    fn strobe(offset_ms: i64, period_ms: u64, duration_ms: u64) -> FaultAction {
        FaultAction::ClockStrobe {
            offset_ms,
            period_ms,
            duration_ms,
        }
    }

    /// The strobe's loop runs for its duration by the guest's uptime,
    /// flips by relative jumps, and names itself for the proof to find.
    #[test]
    fn a_strobe_is_a_loop_in_a_session_of_its_own_timed_by_the_uptime() {
        let script = strobe_script(30_000, 1_500, 20_500);
        for part in [
            "setsid sh -c '",
            "+ 21 ))",
            "date -s \"30 seconds\"",
            "date -s \"30 seconds ago\"",
            "sleep 1.500;",
            "' testkit-clock-strobe-loop </dev/null",
            "echo $! > /run/testkit-clock-strobe.pid",
        ] {
            assert!(script.contains(part), "`{part}` in: {script}");
        }
    }

    fn access(data: bool) -> MachineAccess {
        MachineAccess::new(
            "/tmp/m".into(),
            "http://127.0.0.1:1/health".into(),
            data.then(|| crate::machine::DATA_DIR.to_owned()),
        )
    }

    #[test]
    fn what_a_machine_cannot_undo_or_carry_is_refused_saying_what_runs() {
        let a = access(false);
        for (node, action, said) in [
            ("gateway", FaultAction::Pause, "one node, `machine`"),
            ("machine", FaultAction::Kill, "use pause"),
            ("machine", FaultAction::Stop, "restart"),
            (
                "machine",
                FaultAction::Cut {
                    from: vec!["x".into()],
                    tests: false,
                },
                "isolate(\"machine\")",
            ),
            ("machine", fill_disk(), "data_disk_mib"),
            ("machine", FaultAction::Clock { offset_ms: 3_000 }, "larger"),
            ("machine", strobe(3_000, 1_000, 10_000), "larger"),
            ("machine", strobe(-30_000, 1_000, 10_000), "larger"),
            (
                "machine",
                strobe(30_000, 500, 10_000),
                "period is at least 1s",
            ),
            (
                "machine",
                strobe(30_000, 2_000, 3_000),
                "two periods at least",
            ),
            ("machine", strobe(30_000, 2_000, 3_600_000), "10m at most"),
            (
                "machine",
                FaultAction::Link {
                    link: Link::loss(0.3),
                    peer: Some("x".into()),
                },
                "no peers",
            ),
            (
                "machine",
                FaultAction::Link {
                    link: Link::delay(Duration::from_millis(10), Duration::from_millis(20)),
                    peer: None,
                },
                "larger than its delay",
            ),
        ] {
            let e = plan(&a, node, action).unwrap_err().to_string();
            assert!(e.contains(said), "`{said}` in: {e}");
        }
        for action in [
            FaultAction::Pause,
            FaultAction::Restart,
            FaultAction::Clock {
                offset_ms: -3_600_000,
            },
            strobe(30_000, 2_000, 20_000),
            FaultAction::Cut {
                from: Vec::new(),
                tests: true,
            },
            FaultAction::Link {
                link: Link::corrupt(0.1),
                peer: None,
            },
        ] {
            let fault = plan(&a, MACHINE_NODE, action).unwrap();
            assert_eq!(Fault::from_json(&fault.to_json()).unwrap(), fault);
            if let FaultAction::Cut { .. } = fault.action {
                assert_eq!(fault.describe(), "unplug machine's network cable");
            }
        }
        assert!(plan(&access(true), MACHINE_NODE, fill_disk()).is_ok());
    }

    #[test]
    fn netem_counters_and_tcp_retransmissions_are_read_from_the_guest_s_words() {
        let tc = "qdisc netem 7e58: root refcnt 2 limit 1000 loss 30%\n \
                  Sent 10290 bytes 245 pkt (dropped 105, overlimits 0 requeues 0)\n \
                  backlog 0b 0p requeues 0\n";
        assert_eq!(parse_counters(tc), Some((245, 105)));
        assert_eq!(parse_counters("qdisc pfifo_fast 0: root\n Sent 1 bytes 1 pkt (dropped 0, overlimits 0 requeues 0)\n"), None);
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\n\
                    Tcp: 1 200 120000 -1 0 12 0 0 1 300 280 7 0 0 0\n";
        assert_eq!(parse_retransmissions(snmp), Some(7));
    }

    #[test]
    fn each_link_kind_is_one_netem_queue_s_arguments() {
        let ms = Duration::from_millis;
        assert_eq!(
            Link::delay(ms(200), ms(50)).netem_args(),
            ["delay", "200ms", "50ms"]
        );
        assert_eq!(Link::loss(0.25).netem_args(), ["loss", "25%"]);
        assert_eq!(
            Link::reorder(0.5).netem_args(),
            ["delay", "10ms", "reorder", "50%"]
        );
        assert_eq!(Link::rate_kbit(512).netem_args(), ["rate", "512kbit"]);
        assert!(Link::loss(0.0).refused_on_machines().is_some());
        assert!(Link::duplicate(0.1).refused_on_machines().is_none());
    }
}
