//! Faults on a node's links: its packets lost at random, its sending rate
//! limited, and the kinds a pod of containers cannot carry faithfully.
//!
//! On a pod of containers a link fault is made inside the node's own
//! network namespace, entered through its container's process: a loss is
//! a pair of `iptables` rules there (`-m statistic --mode random`, in
//! `OUTPUT` and `INPUT`, for every packet but the loopback's or only
//! those to and from one peer), a rate a token bucket (`tc … tbf`) at the
//! root of the interface that holds its address on the pod's network.
//! Both are measured once in: a burst of numbered datagrams each way
//! between the node and a peer, counted, for a loss; a transfer to a peer,
//! timed, for a rate. Delay, jitter, duplication, reordering and
//! corruption need the kernel's `netem` queue, which a container only has
//! if its host's kernel does: they are refused on containers, never made
//! weaker, and run where a guest kernel of its own carries the node's
//! packets ([`Runs::MachinesOnly`]).
//!
//! On a machine pod every kind is one `netem` queue at the root of the
//! guest's interface ([`Link::netem_args`]), put there by the guest agent
//! (`tc qdisc replace … netem …`) and removed by its handle.

use serde::{Deserialize, Serialize};

/// The handle of the token bucket a rate fault puts at the root of the
/// node's interface: the undo removes that queue and no other.
pub(super) const RATE_HANDLE: &str = "7e57:";

/// The lowest loss a bounded burst shows to have taken, in parts per
/// million (1 %).
pub(super) const MIN_LOSS_PPM: u32 = 10_000;

/// The range of rates, in kbit/s, a measured transfer shows: below 8 the
/// token bucket cannot be made, above 100 Mbit/s the link itself may be
/// the slower.
pub(super) const RATE_KBIT: std::ops::RangeInclusive<u64> = 8..=100_000;

/// What is done to a node's packets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Link {
    /// Each packet dropped with probability `ppm` / 1 000 000, both ways.
    Loss {
        /// The probability, in parts per million.
        ppm: u32,
    },
    /// What the node sends limited to `kbit` kbit/s.
    Rate {
        /// The rate.
        kbit: u64,
    },
    /// Each packet held `ms`, give or take `jitter_ms` (netem).
    Delay {
        /// The delay.
        ms: u64,
        /// Its jitter.
        jitter_ms: u64,
    },
    /// Each packet sent twice with probability `ppm` (netem).
    Duplicate {
        /// The probability, in parts per million.
        ppm: u32,
    },
    /// Packets sent out of order with probability `ppm` (netem).
    Reorder {
        /// The probability, in parts per million.
        ppm: u32,
    },
    /// A bit of a packet flipped with probability `ppm` (netem).
    Corrupt {
        /// The probability, in parts per million.
        ppm: u32,
    },
}

/// Where a fault can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Runs {
    /// On a pod of containers and on machine pods.
    Anywhere,
    /// Only where the node has a kernel of its own, with `netem`: a
    /// machine pod's guest.
    MachinesOnly,
}

impl Runs {
    /// Where, in words.
    pub fn describe(self) -> &'static str {
        match self {
            Runs::Anywhere => "on containers and on machines",
            Runs::MachinesOnly => "only on machine pods, whose guests' kernels have netem",
        }
    }
}

/// A probability in parts per million, from one between 0 and 1; what is
/// not a probability becomes `u32::MAX`, which every check refuses.
fn ppm(p: f64) -> u32 {
    if (0.0..=1.0).contains(&p) {
        (p * 1e6).round() as u32
    } else {
        u32::MAX
    }
}

/// A probability in parts per million, as a percentage for people.
pub(super) fn percent(ppm: u32) -> String {
    let p = f64::from(ppm) / 1e4;
    format!("{}%", (p * 100.0).round() / 100.0)
}

impl Link {
    /// Each packet lost with probability `p` (0.01 to 1), both ways.
    pub fn loss(p: f64) -> Link {
        Link::Loss { ppm: ppm(p) }
    }

    /// What the node sends limited to `kbit` kbit/s (8 to 100 000).
    pub fn rate_kbit(kbit: u64) -> Link {
        Link::Rate { kbit }
    }

    /// Each packet held `delay`, give or take `jitter`: machine pods only.
    pub fn delay(delay: std::time::Duration, jitter: std::time::Duration) -> Link {
        Link::Delay {
            ms: delay.as_millis() as u64,
            jitter_ms: jitter.as_millis() as u64,
        }
    }

    /// Each packet sent twice with probability `p`: machine pods only.
    pub fn duplicate(p: f64) -> Link {
        Link::Duplicate { ppm: ppm(p) }
    }

    /// Packets reordered with probability `p`: machine pods only.
    pub fn reorder(p: f64) -> Link {
        Link::Reorder { ppm: ppm(p) }
    }

    /// Packets corrupted with probability `p`: machine pods only.
    pub fn corrupt(p: f64) -> Link {
        Link::Corrupt { ppm: ppm(p) }
    }

    /// Where it can run.
    pub fn runs(&self) -> Runs {
        match self {
            Link::Loss { .. } | Link::Rate { .. } => Runs::Anywhere,
            Link::Delay { .. }
            | Link::Duplicate { .. }
            | Link::Reorder { .. }
            | Link::Corrupt { .. } => Runs::MachinesOnly,
        }
    }

    /// What it does, in words: `a loss of 30%`.
    pub fn describe(&self) -> String {
        match self {
            Link::Loss { ppm } => format!("a loss of {}", percent(*ppm)),
            Link::Rate { kbit } => format!("a rate of {kbit} kbit/s"),
            Link::Delay { ms, jitter_ms } => format!("a delay of {ms} ms ± {jitter_ms} ms"),
            Link::Duplicate { ppm } => format!("a duplication of {}", percent(*ppm)),
            Link::Reorder { ppm } => format!("a reordering of {}", percent(*ppm)),
            Link::Corrupt { ppm } => format!("a corruption of {}", percent(*ppm)),
        }
    }

    /// The one word of its kind: `loss`, `rate`, `delay`, …
    pub fn word(&self) -> &'static str {
        match self {
            Link::Loss { .. } => "loss",
            Link::Rate { .. } => "rate",
            Link::Delay { .. } => "delay",
            Link::Duplicate { .. } => "duplicate",
            Link::Reorder { .. } => "reorder",
            Link::Corrupt { .. } => "corrupt",
        }
    }

    /// Why it cannot run on a pod of containers, when it cannot; or why
    /// its amount is out of range.
    pub(super) fn refused_on_containers(&self, peer: Option<&str>) -> Option<String> {
        match self {
            Link::Loss { ppm } if *ppm < MIN_LOSS_PPM || *ppm > 1_000_000 => Some(format!(
                "a loss must be a probability from 0.01 to 1 (got {}): below 1% a bounded \
                 burst cannot show it took",
                if *ppm == u32::MAX {
                    "no probability".to_owned()
                } else {
                    percent(*ppm)
                }
            )),
            Link::Rate { kbit } if !RATE_KBIT.contains(kbit) => Some(format!(
                "a rate must be from {} to {} kbit/s (got {kbit}): below, a token bucket \
                 cannot be made; above, the link itself may be slower and the limit could \
                 not be shown to take",
                RATE_KBIT.start(),
                RATE_KBIT.end()
            )),
            Link::Rate { .. } if peer.is_some() => Some(
                "a rate limits the node's interface, every packet it sends, not one link: \
                 give it to the node alone (degrade), without a peer"
                    .to_owned(),
            ),
            Link::Loss { .. } | Link::Rate { .. } => None,
            _ => Some(format!(
                "{} needs the kernel's netem queue (sch_netem) on the node's path, and a \
                 container's packets pass through its host's kernel, which testkit shapes \
                 only with iptables and a token bucket (tbf) — a {} made with those would \
                 be silently weaker than asked. It runs {}: run the suite on its machine \
                 pod (`[pod.vm]` in testkit.toml, `testkit-runner run SUITE --pod vm`) and \
                 degrade its node `machine`, or use a loss or a rate here",
                self.describe(),
                self.word(),
                self.runs().describe()
            )),
        }
    }
}

/// The handle of the netem queue a link fault puts at the root of a machine
/// pod guest's interface: the undo removes that queue and no other.
pub(super) const NETEM_HANDLE: &str = "7e58:";

/// The delay netem needs to reorder (it sends the packets it reorders at
/// once and holds the others this long).
pub(super) const REORDER_DELAY_MS: u64 = 10;

/// The longest delay (and jitter) asked of a machine's link, in ms: more
/// makes every exchange with the guest time out rather than slow down.
pub(super) const MAX_DELAY_MS: u64 = 10_000;

impl Link {
    /// Why it cannot run on a machine pod's guest, when its amount is out
    /// of range (every kind runs there, with netem).
    pub(super) fn refused_on_machines(&self) -> Option<String> {
        let probability = |ppm: u32, what: &str| {
            (ppm == 0 || ppm > 1_000_000).then(|| {
                format!(
                    "{what} must be a probability above 0 and at most 1 (got {})",
                    if ppm == u32::MAX {
                        "no probability".to_owned()
                    } else {
                        percent(ppm)
                    }
                )
            })
        };
        match self {
            Link::Loss { ppm } => probability(*ppm, "a loss"),
            Link::Duplicate { ppm } => probability(*ppm, "a duplication"),
            Link::Reorder { ppm } => probability(*ppm, "a reordering"),
            Link::Corrupt { ppm } => probability(*ppm, "a corruption"),
            Link::Rate { kbit } if !RATE_KBIT.contains(kbit) => Some(format!(
                "a rate must be from {} to {} kbit/s (got {kbit})",
                RATE_KBIT.start(),
                RATE_KBIT.end()
            )),
            Link::Delay { ms, .. } if *ms == 0 || *ms > MAX_DELAY_MS => Some(format!(
                "a delay must be from 1 ms to {MAX_DELAY_MS} ms (got {ms} ms)"
            )),
            Link::Delay { ms, jitter_ms } if jitter_ms > ms => Some(format!(
                "a jitter ({jitter_ms} ms) larger than its delay ({ms} ms) would ask for \
                 negative delays: give at most the delay"
            )),
            _ => None,
        }
    }

    /// The arguments of `tc qdisc … netem` that make it.
    pub(super) fn netem_args(&self) -> Vec<String> {
        let p = |ppm: &u32| format!("{}%", f64::from(*ppm) / 1e4);
        match self {
            Link::Loss { ppm } => vec!["loss".into(), p(ppm)],
            Link::Rate { kbit } => vec!["rate".into(), format!("{kbit}kbit")],
            Link::Delay { ms, jitter_ms } => {
                let mut args = vec!["delay".into(), format!("{ms}ms")];
                if *jitter_ms > 0 {
                    args.push(format!("{jitter_ms}ms"));
                }
                args
            }
            Link::Duplicate { ppm } => vec!["duplicate".into(), p(ppm)],
            Link::Reorder { ppm } => vec![
                "delay".into(),
                format!("{REORDER_DELAY_MS}ms"),
                "reorder".into(),
                p(ppm),
            ],
            Link::Corrupt { ppm } => vec!["corrupt".into(), p(ppm)],
        }
    }
}

/// The token bucket of a rate fault, as planned: enough to remove it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Shaping {
    /// The node's interface on the pod's network, in its namespace.
    pub interface: String,
    /// The queue's handle, `7e57:`.
    pub handle: String,
    /// The rate, kbit/s.
    pub kbit: u64,
    /// The bucket, in bytes.
    pub burst: u64,
}

impl Shaping {
    /// A token bucket of `kbit` on `interface`: a burst of a tenth of a
    /// second's worth, 16 KiB at least.
    pub fn new(interface: String, kbit: u64) -> Shaping {
        Shaping {
            interface,
            handle: RATE_HANDLE.to_owned(),
            kbit,
            burst: (kbit * 1000 / 8 / 10).max(16 * 1024),
        }
    }

    /// How many bytes the measuring transfer sends: the burst, and a
    /// second and a half at the rate (64 KiB at least, 32 MiB at most).
    pub fn probe_bytes(&self) -> u64 {
        self.burst + (self.kbit * 1000 / 8 * 3 / 2).clamp(64 * 1024, 32 * 1024 * 1024)
    }

    /// Whether a measured rate, bits per second past the burst, shows the
    /// limit took: at most a quarter above it.
    pub fn took(&self, measured_bps: f64) -> bool {
        measured_bps > 0.0 && measured_bps <= self.kbit as f64 * 1000.0 * 1.25
    }
}

/// How many datagrams each way measure a loss of `ppm`: about 30 lost, 300
/// to 3 000 sent.
pub(super) fn probe_count(ppm: u32) -> u32 {
    let p = f64::from(ppm.max(1)) / 1e6;
    ((30.0 / p).ceil() as u32).clamp(300, 3000)
}

/// Whether `arrived` of `sent` datagrams show a loss of `ppm` took: the
/// share lost is no less than expected less four standard deviations, and
/// no less than half the loss asked for (so that a small loss is never
/// shown by a burst that lost nothing). More loss is not this fault's to
/// refuse: another fault of the test on the same path adds its own (a path
/// down before the fault went in is refused by [`baseline_up`]).
pub(super) fn loss_took(ppm: u32, sent: u32, arrived: u32) -> bool {
    let p = f64::from(ppm) / 1e6;
    let n = f64::from(sent.max(1));
    let lost = f64::from(sent.saturating_sub(arrived)) / n;
    let sigma = (p * (1.0 - p) / n).sqrt();
    sent > arrived && lost >= (p - 4.0 * sigma).max(p / 2.0)
}

/// How many datagrams each way show the path whole before a loss goes in.
pub(super) const BASELINE_COUNT: u32 = 50;

/// Whether `arrived` of `sent` datagrams, before any loss of this fault,
/// show a path that is up: one in ten. A cut or a partition drops every
/// one; a loss the test already holds on the path drops only its share
/// (more loss is not this fault's to refuse), and a loaded machine a few.
pub(super) fn baseline_up(sent: u32, arrived: u32) -> bool {
    u64::from(arrived) * 10 >= u64::from(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_says_where_it_runs_and_netem_kinds_are_refused_on_containers() {
        for link in [Link::loss(0.3), Link::rate_kbit(1000)] {
            assert_eq!(link.runs(), Runs::Anywhere);
            assert_eq!(link.refused_on_containers(None), None);
        }
        let second = std::time::Duration::from_millis(100);
        for link in [
            Link::delay(second, second / 5),
            Link::duplicate(0.1),
            Link::reorder(0.1),
            Link::corrupt(0.1),
        ] {
            assert_eq!(link.runs(), Runs::MachinesOnly);
            let why = link.refused_on_containers(None).expect("refused");
            for said in ["netem", "machine pod", "silently weaker"] {
                assert!(why.contains(said), "`{said}` in: {why}");
            }
        }
    }

    #[test]
    fn out_of_range_amounts_are_refused_saying_the_range() {
        for p in [0.0, 0.001, 1.5, f64::NAN, -1.0] {
            let why = Link::loss(p).refused_on_containers(None).expect("refused");
            assert!(why.contains("from 0.01 to 1"), "{p}: {why}");
        }
        assert!(Link::rate_kbit(1).refused_on_containers(None).is_some());
        let why = Link::rate_kbit(1000)
            .refused_on_containers(Some("gateway"))
            .expect("a rate per link is refused");
        assert!(why.contains("without a peer"), "{why}");
    }

    #[test]
    fn a_burst_shows_a_loss_took_only_when_enough_was_lost() {
        let ppm = 300_000;
        let n = probe_count(ppm);
        assert_eq!(n, 300);
        assert!(loss_took(ppm, n, 210), "30% lost");
        assert!(loss_took(ppm, n, 0), "more lost is another fault's too");
        assert!(!loss_took(ppm, n, 299), "nothing lost: it did not take");
        assert!(!loss_took(ppm, n, 250), "17% lost of 30% is weaker");
        assert_eq!(probe_count(10_000), 3000);
        // A small loss is not shown by a burst that lost nothing, nor by
        // one that lost a few where it asked for many.
        for ppm in [10_000, 50_000, 60_000] {
            let n = probe_count(ppm);
            assert!(!loss_took(ppm, n, n), "{ppm} ppm: nothing lost");
            let expected = (u64::from(n) * u64::from(ppm) / 1_000_000) as u32;
            assert!(
                !loss_took(ppm, n, n - expected / 3),
                "{ppm} ppm: a third of the loss"
            );
            assert!(loss_took(ppm, n, n - expected), "{ppm} ppm: as asked");
        }
    }

    #[test]
    fn a_path_down_before_the_fault_is_not_a_baseline() {
        assert!(baseline_up(BASELINE_COUNT, BASELINE_COUNT));
        assert!(baseline_up(BASELINE_COUNT, 45));
        // A path another loss of the test holds at 80% is up.
        assert!(baseline_up(BASELINE_COUNT, 10));
        assert!(!baseline_up(BASELINE_COUNT, 4));
        assert!(!baseline_up(BASELINE_COUNT, 0));
    }
}
