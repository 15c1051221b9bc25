//! Faults a test injects into the nodes of its pod, owned like resources:
//! journaled before they are injected, undone at the end of the test
//! whatever happened (newest first, with its resources), each undo proven,
//! and undone by the reaper when the test process is killed.
//!
//! A pod of several containers (`[pod.container.nodes]`) takes them on its
//! nodes; a machine pod (`[pod.vm]`, `--pod vm`) on its one node,
//! `"machine"`, through QEMU's monitor and the guest agent. A fault that
//! cannot run on the pod is refused, saying where it runs.

use crate::engine::pod::fault::FaultAction;
pub use crate::engine::pod::fault::{Link, Partition, Runs};
use crate::engine::run::Run;
use crate::tracker::Tracker;

/// The faults of one test: [`Cx::faults`](crate::Cx::faults).
///
/// Each method injects one fault into a node of the pod and returns once
/// it took. A test that injects faults must have the pod to itself:
/// `#[testkit::test(exclusive)]`.
///
/// ```no_run
/// # use testkit::prelude::*;
/// # async fn t(cx: &mut Cx) -> testkit::Result {
/// cx.faults().pause("worker-2").await?;
/// // ... the gateway must notice ...
/// cx.faults().heal().await?; // or leave it to the end of the test
/// # Ok(()) }
/// ```
pub struct Faults<'a> {
    pub(crate) tracker: &'a Tracker,
    pub(crate) run: &'static Run,
    /// Whether the test has the pod to itself.
    pub(crate) exclusive: bool,
}

impl Faults<'_> {
    /// Stops the node (`docker stop`: SIGTERM, SIGKILL after 5 s); undone
    /// by starting it again. Refused on a machine pod (its QEMU could not
    /// be started again): [`pause`](Self::pause) or
    /// [`restart`](Self::restart) it.
    pub async fn stop(&self, node: &str) -> crate::Result {
        self.inject(node, FaultAction::Stop).await
    }

    /// Kills the node (SIGKILL); undone by starting it again. Refused on a
    /// machine pod, as [`stop`](Self::stop) is.
    pub async fn kill(&self, node: &str) -> crate::Result {
        self.inject(node, FaultAction::Kill).await
    }

    /// Freezes the node (`docker pause`; on a machine pod QMP `stop`, shown
    /// by `query-status`): its connections stay open and nothing answers;
    /// undone by thawing it (`cont`).
    pub async fn pause(&self, node: &str) -> crate::Result {
        self.inject(node, FaultAction::Pause).await
    }

    /// Restarts the node; its undo proves it back. On a machine pod, a reset
    /// of the guest (QMP `system_reset`): it returns once the guest has
    /// booted again (its boot id changed, its agent and service answer),
    /// which takes as long as a boot.
    pub async fn restart(&self, node: &str) -> crate::Result {
        self.inject(node, FaultAction::Restart).await
    }

    /// Cuts the node off from the peers `from` (their packets to and from
    /// it dropped); the tests still reach it. Undone by reconnecting it.
    pub async fn cut_off(&self, node: &str, from: &[&str]) -> crate::Result {
        if from.is_empty() {
            crate::bail!(
                "cut_off(\"{node}\", &[]): name the peers to cut it off from, or use isolate(\"{node}\")"
            );
        }
        let from = from.iter().map(|p| (*p).to_owned()).collect();
        self.inject(node, FaultAction::Cut { from, tests: false })
            .await
    }

    /// Cuts the node off from every peer and from the tests. On a machine
    /// pod, its network cable unplugged (QMP `set_link`), shown by the
    /// forwarded port no longer answering.
    pub async fn isolate(&self, node: &str) -> crate::Result {
        let action = FaultAction::Cut {
            from: Vec::new(),
            tests: true,
        };
        self.inject(node, action).await
    }

    /// Splits the pod's nodes by `shape` (drawn from its node list): the
    /// groups see nothing of each other, a cut between each pair kept
    /// apart; the tests still reach every node. Undone like a cut, every
    /// node proven back. A [`Partition::RandomHalves`] without a seed draws
    /// one, logged and journaled with the fault.
    ///
    /// ```no_run
    /// # use testkit::prelude::*;
    /// # async fn t(cx: &mut Cx) -> testkit::Result {
    /// use testkit::Partition;
    /// cx.faults().partition(Partition::Bridge { via: "worker-1".into() }).await?;
    /// # Ok(()) }
    /// ```
    pub async fn partition(&self, shape: Partition) -> crate::Result {
        let action = FaultAction::Partition {
            partition: shape,
            apart: Vec::new(),
        };
        self.inject("pod", action).await
    }

    /// Degrades every packet the node sends and receives (its loopback's
    /// aside): [`Link::loss`] drops each with a probability,
    /// [`Link::rate_kbit`] limits what it sends. Measured once in (a burst
    /// counted, a transfer timed), undone and proven gone. A kind a pod of
    /// containers cannot carry faithfully ([`Link::runs`]: delay, jitter,
    /// duplication, reordering, corruption need netem) is refused, saying
    /// where it runs.
    ///
    /// On a machine pod every kind runs, as a netem queue on the guest's
    /// interface (`tc qdisc … netem`, by the guest agent), read back from
    /// the guest's kernel, measured where it can be (a delay by timed
    /// round trips through the forwarded port, a loss or a duplication by
    /// netem's counters over datagrams the guest sends, a corruption by the
    /// guest's TCP retransmissions), and proven gone after the undo.
    ///
    /// ```no_run
    /// # use testkit::prelude::*;
    /// # async fn t(cx: &mut Cx) -> testkit::Result {
    /// use testkit::Link;
    /// cx.faults().degrade("worker-2", Link::loss(0.3)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn degrade(&self, node: &str, link: Link) -> crate::Result {
        self.inject(node, FaultAction::Link { link, peer: None })
            .await
    }

    /// Degrades only the packets between `node` and `peer`, both ways: a
    /// [`Link::loss`] (a rate is the node's interface's, all of it:
    /// [`degrade`](Self::degrade)).
    pub async fn degrade_link(&self, node: &str, peer: &str, link: Link) -> crate::Result {
        let action = FaultAction::Link {
            link,
            peer: Some(peer.to_owned()),
        };
        self.inject(node, action).await
    }

    /// Sets a machine pod's guest clock `by` ahead of the host's (the guest
    /// agent; the host's clock is never touched), shown within 5 s; undone
    /// by setting it to the host's, proven within 5 s. At least 10 s: less
    /// cannot be told from the time a command takes to reach an emulated
    /// guest. Refused on containers, which share their host's clock.
    pub async fn clock_forward(&self, node: &str, by: std::time::Duration) -> crate::Result {
        let offset_ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.inject(node, FaultAction::Clock { offset_ms }).await
    }

    /// Sets a machine pod's guest clock `by` behind the host's; as
    /// [`clock_forward`](Self::clock_forward).
    pub async fn clock_back(&self, node: &str, by: std::time::Duration) -> crate::Result {
        let offset_ms = -i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.inject(node, FaultAction::Clock { offset_ms }).await
    }

    /// Strobes a machine pod's guest clock: for `duration`, every `period`
    /// it jumps `by` ahead of the host's, then back, as a clock that keeps
    /// being corrected does (a loop in the guest; the host's clock is
    /// never touched). Shown by the guest's clock seen `by` ahead; undone
    /// by ending the loop and setting the clock to the host's, proven
    /// within 5 s. `by` at least 10 s, `period` at least 1 s, `duration`
    /// two periods to 10 minutes. Refused on containers, which share their
    /// host's clock.
    ///
    /// ```no_run
    /// # use testkit::prelude::*;
    /// # async fn t(cx: &mut Cx) -> testkit::Result {
    /// use std::time::Duration;
    /// cx.faults()
    ///     .clock_strobe("machine", Duration::from_secs(30), Duration::from_secs(2), Duration::from_secs(20))
    ///     .await?;
    /// // ... leases, tokens and timestamps must survive a clock that jumps ...
    /// # Ok(()) }
    /// ```
    pub async fn clock_strobe(
        &self,
        node: &str,
        by: std::time::Duration,
        period: std::time::Duration,
        duration: std::time::Duration,
    ) -> crate::Result {
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let action = FaultAction::ClockStrobe {
            offset_ms: i64::try_from(by.as_millis()).unwrap_or(i64::MAX),
            period_ms: ms(period),
            duration_ms: ms(duration),
        };
        self.inject(node, action).await
    }

    /// Fills a node's data disk: a file written into it until no byte is
    /// left, shown to have taken; undone by removing the file, proven by
    /// room again. On a pod of containers, the node's
    /// `[pod.container.nodes.NAME] disk` (a bounded tmpfs of its own):
    /// shown by a write that fails with ENOSPC, proven by a write that fits
    /// again; a node with no disk declared is refused, saying how to
    /// declare one; a node restarted while its disk is held full (a restart
    /// empties it) fails the undo, naming the restart. On a machine pod,
    /// node `"machine"`, the data disk of `[pod.vm] data_disk_mib`, mounted
    /// at `/var/lib/testkit-data` in the guest, shown by `df`.
    ///
    /// ```no_run
    /// # use testkit::prelude::*;
    /// # async fn t(cx: &mut Cx) -> testkit::Result {
    /// cx.faults().fill_disk("worker-1").await?;
    /// // ... writes to worker-1 must fail cleanly, reads must go on ...
    /// # Ok(()) }
    /// ```
    pub async fn fill_disk(&self, node: &str) -> crate::Result {
        let action = FaultAction::FillDisk {
            target: String::new(),
            file: String::new(),
        };
        self.inject(node, action).await
    }

    /// Undoes every fault of the test now, newest first, proving each: the
    /// node healthy, its peers reaching it. A fault that cannot be undone
    /// fails the test however it ends.
    pub async fn heal(&self) -> crate::Result {
        self.tracker.heal_faults().await
    }

    async fn inject(&self, node: &str, action: FaultAction) -> crate::Result {
        if !self.exclusive {
            crate::bail!(
                "refusing to inject a fault into `{node}`: a test that injects faults must have \
                 the pod to itself, or it breaks the tests that run beside it; mark it \
                 #[testkit::test(exclusive)]"
            );
        }
        let pod = crate::globals::require_pod()?;
        self.tracker.inject_fault(self.run, pod, node, action).await
    }
}
