//! Which worker holds which sandbox, and which workers are live.
//!
//! The map is a cache of the workers' own state: it is filled by creates,
//! by every listing relayed, and by a full re-read of a worker's listing
//! whenever the worker is taken back. It is what the gateway still knows
//! about a down worker's sandboxes, which it shows as `lost`.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::api::Sandbox;
use crate::listing::ListQuery;

/// A worker is down once it has had no successful heartbeat for this long.
pub(crate) const DOWN_AFTER: Duration = Duration::from_millis(600);

/// One `--worker`, with the HTTP client the gateway talks to it with. Each
/// worker has its own client, so its cookie jar holds that worker's session
/// only (workers on one host would otherwise overwrite each other's).
pub(crate) struct Worker {
    /// `--worker NAME=...`.
    pub(crate) name: String,
    /// Base URL, no trailing slash.
    pub(crate) url: String,
    /// Keeps the worker's session cookie: it outlives the worker's token window.
    pub(crate) client: reqwest::Client,
}

/// What the heartbeat learnt of a worker.
#[derive(Default)]
struct Health {
    /// The last successful heartbeat (or re-read).
    last_ok: Option<Instant>,
    /// Taken back: its listing was re-read since it was last down. A worker
    /// is live when it is a member and `last_ok` is recent.
    member: bool,
    /// The first heartbeat (and re-read) finished, whatever its outcome.
    probed: bool,
    /// The instance name its heartbeats answer, and the latest moment its
    /// process can have started (receipt of an answer minus the uptime it
    /// gave). A restart between two heartbeats shows as another name (another
    /// HOME) or as an answer whose earliest possible start is after that.
    boot: Option<(String, Instant)>,
}

/// A sandbox name's worker, and the sandbox as last seen there.
struct Placed {
    worker: usize,
    /// `None` while its create is in flight.
    sandbox: Option<Sandbox>,
    /// When it was last confirmed, in [`Inner::seq`] ticks: a listing only
    /// removes entries older than itself.
    seq: u64,
}

struct Inner {
    health: Vec<Health>,
    map: BTreeMap<String, Placed>,
    seq: u64,
}

/// Where a name is, as [`Cluster::locate`] answers.
pub(crate) struct Located {
    /// Index of the worker in [`Cluster::workers`].
    pub(crate) worker: usize,
    /// Whether that worker is live now.
    pub(crate) live: bool,
    /// The sandbox as last seen (`None` while its create is in flight).
    pub(crate) sandbox: Option<Sandbox>,
}

/// Why [`Cluster::reserve`] placed nothing.
pub(crate) enum Refused {
    /// No worker is live.
    NoneLive,
    /// The name is already placed on this worker.
    Taken(Located),
}

/// One row of `GET /api/cluster`.
pub(crate) struct WorkerView {
    pub(crate) live: bool,
    pub(crate) sandboxes: usize,
    pub(crate) last_seen: Option<Duration>,
}

/// The workers, their health and the placements.
pub(crate) struct Cluster {
    /// In `--worker` order.
    pub(crate) workers: Vec<Worker>,
    inner: Mutex<Inner>,
}

fn is_live(h: &Health, now: Instant) -> bool {
    h.member
        && h.last_ok
            .is_some_and(|t| now.duration_since(t) <= DOWN_AFTER)
}

impl Cluster {
    /// Every worker starts down: it is taken back on its first heartbeat.
    pub(crate) fn new(workers: Vec<Worker>) -> Self {
        let health = workers.iter().map(|_| Health::default()).collect();
        Cluster {
            workers,
            inner: Mutex::new(Inner {
                health,
                map: BTreeMap::new(),
                seq: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live workers' indexes.
    pub(crate) fn live_workers(&self) -> Vec<usize> {
        let inner = self.lock();
        let now = Instant::now();
        (0..self.workers.len())
            .filter(|&i| is_live(&inner.health[i], now))
            .collect()
    }

    /// Whether every worker had its first heartbeat.
    pub(crate) fn all_probed(&self) -> bool {
        self.lock().health.iter().all(|h| h.probed)
    }

    /// Whether worker `i` is live now.
    pub(crate) fn live(&self, i: usize) -> bool {
        is_live(&self.lock().health[i], Instant::now())
    }

    /// Whether worker `i` had a successful heartbeat within [`DOWN_AFTER`]:
    /// unlike [`Cluster::live`], true while a worker that came back is being
    /// taken back, so that requests in flight to it are not given up.
    pub(crate) fn heard_from(&self, i: usize) -> bool {
        let inner = self.lock();
        let h = &inner.health[i];
        h.last_ok.is_some_and(|t| t.elapsed() <= DOWN_AFTER)
    }

    /// Records a successful heartbeat sent at `sent` and answered by the
    /// instance `name` up for `uptime_ms`; answers whether the worker must be
    /// taken back (it was down, never seen, or restarted since the last
    /// heartbeat), in which case it stays reported down until
    /// [`Cluster::taken_back`].
    pub(crate) fn heartbeat_ok(&self, i: usize, name: &str, uptime_ms: u64, sent: Instant) -> bool {
        let mut inner = self.lock();
        let now = Instant::now();
        let h = &mut inner.health[i];
        let up = Duration::from_millis(uptime_ms);
        // The process started between `sent - up - 1ms` and `now - up`.
        let earliest = sent.checked_sub(up + Duration::from_millis(1));
        let latest = now.checked_sub(up);
        let restarted = match &h.boot {
            Some((n, _)) if n != name => true,
            Some((_, l)) => earliest.is_some_and(|e| e > *l),
            None => false,
        };
        let back = !is_live(h, now) || restarted;
        match (&mut h.boot, latest) {
            (Some((_, l)), Some(latest)) if !restarted => *l = (*l).min(latest),
            (_, Some(latest)) => h.boot = Some((name.to_string(), latest)),
            (_, None) => h.boot = None,
        }
        h.member &= !back;
        h.last_ok = Some(now);
        back
    }

    /// Records a failed heartbeat (or forward); answers true when this is
    /// what made the worker down, so that the caller says so once.
    pub(crate) fn heartbeat_failed(&self, i: usize) -> bool {
        let mut inner = self.lock();
        let now = Instant::now();
        let h = &mut inner.health[i];
        h.probed = true;
        if h.member && !is_live(h, now) {
            h.member = false;
            return true;
        }
        false
    }

    /// Marks worker `i` down now (it refused a connection); answers whether it was live.
    pub(crate) fn mark_down(&self, i: usize) -> bool {
        let mut inner = self.lock();
        let was = is_live(&inner.health[i], Instant::now());
        inner.health[i].member = false;
        was
    }

    /// The worker answered and its listing was re-read (`Some`), or the
    /// re-read failed (`None`, it stays down).
    pub(crate) fn taken_back(&self, i: usize, listing: Option<(u64, Vec<Sandbox>)>) {
        let mut inner = self.lock();
        inner.health[i].probed = true;
        let Some((before, items)) = listing else {
            return;
        };
        inner
            .map
            .retain(|_, p| p.worker != i || p.sandbox.is_none() || p.seq >= before);
        for sb in items {
            record_in(&mut inner, i, sb);
        }
        let h = &mut inner.health[i];
        h.member = true;
        // The listing answered: proof of life as good as a heartbeat.
        h.last_ok = Some(Instant::now());
    }

    /// The current tick, to pass to [`Cluster::prune`] or [`Cluster::taken_back`]
    /// for a listing requested now.
    pub(crate) fn seq(&self) -> u64 {
        self.lock().seq
    }
}

fn record_in(inner: &mut Inner, worker: usize, sb: Sandbox) {
    inner.seq += 1;
    let seq = inner.seq;
    inner.map.insert(
        sb.name.clone(),
        Placed {
            worker,
            sandbox: Some(sb),
            seq,
        },
    );
}

impl Cluster {
    /// Places a new name on the live worker with the fewest sandboxes (ties
    /// by name), reserving it so that a concurrent create of the same name
    /// goes to the same worker.
    pub(crate) fn reserve(&self, name: &str) -> Result<usize, Refused> {
        let mut inner = self.lock();
        let now = Instant::now();
        if let Some(p) = inner.map.get(name) {
            return Err(Refused::Taken(Located {
                worker: p.worker,
                live: is_live(&inner.health[p.worker], now),
                sandbox: p.sandbox.clone(),
            }));
        }
        let mut counts = vec![0usize; self.workers.len()];
        for p in inner.map.values() {
            counts[p.worker] += 1;
        }
        let best = (0..self.workers.len())
            .filter(|&i| is_live(&inner.health[i], now))
            .min_by(|&a, &b| {
                (counts[a], &self.workers[a].name).cmp(&(counts[b], &self.workers[b].name))
            })
            .ok_or(Refused::NoneLive)?;
        inner.seq += 1;
        let seq = inner.seq;
        let placed = Placed {
            worker: best,
            sandbox: None,
            seq,
        };
        inner.map.insert(name.to_string(), placed);
        Ok(best)
    }

    /// Drops the reservation of a create that failed.
    pub(crate) fn unreserve(&self, name: &str, worker: usize) {
        let mut inner = self.lock();
        if inner
            .map
            .get(name)
            .is_some_and(|p| p.worker == worker && p.sandbox.is_none())
        {
            inner.map.remove(name);
        }
    }

    /// Records a sandbox as its worker answered it.
    pub(crate) fn record(&self, worker: usize, sb: Sandbox) {
        record_in(&mut self.lock(), worker, sb);
    }

    /// Forgets a name its worker says it does not hold.
    pub(crate) fn forget(&self, name: &str, worker: usize) {
        let mut inner = self.lock();
        if inner.map.get(name).is_some_and(|p| p.worker == worker) {
            inner.map.remove(name);
        }
    }

    /// Where `name` is, if known.
    pub(crate) fn locate(&self, name: &str) -> Option<Located> {
        let inner = self.lock();
        let p = inner.map.get(name)?;
        Some(Located {
            worker: p.worker,
            live: is_live(&inner.health[p.worker], Instant::now()),
            sandbox: p.sandbox.clone(),
        })
    }

    /// Records one page of worker `i`'s listing for `q`, requested at tick
    /// `before`, and forgets what that page shows gone: names of the range it
    /// covers (up to its last item when there are more pages) that it lacks.
    pub(crate) fn prune(
        &self,
        i: usize,
        q: &ListQuery,
        before: u64,
        items: &[Sandbox],
        more: bool,
    ) {
        let mut inner = self.lock();
        let last = items.last().map(|s| s.name.clone());
        if q.labels.is_empty() {
            let listed: std::collections::BTreeSet<&str> =
                items.iter().map(|s| s.name.as_str()).collect();
            inner.map.retain(|name, p| {
                let covered = p.worker == i
                    && p.sandbox.is_some()
                    && p.seq < before
                    && name.starts_with(&q.prefix)
                    && q.after.as_ref().is_none_or(|a| name > a)
                    && (!more || last.as_ref().is_some_and(|l| name <= l));
                !covered || listed.contains(name.as_str())
            });
        }
        for sb in items {
            record_in(&mut inner, i, sb.clone());
        }
    }

    /// The sandboxes of down workers that `q` matches, with their worker.
    pub(crate) fn lost(&self, q: &ListQuery) -> Vec<(Sandbox, usize)> {
        let inner = self.lock();
        let now = Instant::now();
        inner
            .map
            .values()
            .filter(|p| !is_live(&inner.health[p.worker], now))
            .filter_map(|p| Some((p.sandbox.clone()?, p.worker)))
            .filter(|(sb, _)| q.matches(sb))
            .collect()
    }

    /// Every worker's state, for `GET /api/cluster`.
    pub(crate) fn view(&self) -> Vec<WorkerView> {
        let inner = self.lock();
        let now = Instant::now();
        (0..self.workers.len())
            .map(|i| WorkerView {
                live: is_live(&inner.health[i], now),
                sandboxes: inner
                    .map
                    .values()
                    .filter(|p| p.worker == i && p.sandbox.is_some())
                    .count(),
                last_seen: inner.health[i].last_ok.map(|t| now.duration_since(t)),
            })
            .collect()
    }
}
