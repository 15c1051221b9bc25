//! Budgets: at most N live resources of a kind per run, across every test
//! process of the run. A slot is an exclusive `flock` on one of N files under
//! `<results>/budgets/<kind>/`; the kernel releases it when its holder dies.
//!
//! A holder writes who it is (test, pid, resource) into its slot's file, so
//! that a test that waits says, while it waits, who holds the slots. Tests
//! that each hold slots and wait for more wait for each other: a wait in
//! which no slot of the kind changes hands for its bound
//! (`TESTKIT_BUDGET_WAIT`) gives up with an error naming the kind, the
//! budget, the holders and the mend. The bound counts from the last slot
//! freed, not from the start of the wait: a long queue that moves is no
//! deadlock.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tokio::time::Instant;

use crate::wait::Secs;

/// How often a waiting test tries the slots again.
const POLL: Duration = Duration::from_millis(50);

/// How often a waiting test reads who holds the slots (a change is a slot
/// freed), and at most how often its log says it still waits.
const LOOK: Duration = Duration::from_secs(1);
const REPORT_EVERY: Duration = Duration::from_secs(10);

/// Who holds a slot: written into its file while it is held.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// The test's full name.
    pub test: String,
    /// Its process.
    pub pid: u32,
    /// The resource the slot is for.
    pub resource: String,
}

impl Holder {
    /// The holder `test` of this process, for `resource`.
    pub fn new(test: &str, resource: &str) -> Holder {
        Holder {
            test: test.to_owned(),
            pid: std::process::id(),
            resource: resource.to_owned(),
        }
    }
}

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    lock: Flock<File>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Emptied before the lock goes: a free slot names no holder.
        let _ = self.lock.set_len(0);
    }
}

/// Why no slot was taken.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// The slots' files could not be used.
    #[error("failed to take a `{kind}` budget slot under {}: {cause}", dir.display())]
    Io {
        /// The kind.
        kind: String,
        /// Its slots' folder.
        dir: PathBuf,
        /// What failed.
        cause: std::io::Error,
    },
    /// No slot changed hands for the bound.
    #[error(
        "no `{kind}` slot was freed in {} (TESTKIT_BUDGET_WAIT; waited {} in all): the budget \
         of `{kind}` is {budget} and all {budget} are held: {}. Tests that hold slots while they \
         wait for more wait for each other: raise `budget` in [resources.{kind}] of \
         testkit.toml, or create fewer `{kind}` at once (delete one, and `cx.forget` it, before \
         creating the next); if a slot is meant to be held this long, raise TESTKIT_BUDGET_WAIT",
        humantime::format_duration(*bound),
        Secs(*waited),
        describe(holders, me)
    )]
    Stalled {
        /// The kind.
        kind: String,
        /// Its budget.
        budget: usize,
        /// `TESTKIT_BUDGET_WAIT`.
        bound: Duration,
        /// How long the test waited in all.
        waited: Duration,
        /// Who held the slots when it gave up.
        holders: Vec<Holder>,
        /// The test that waited.
        me: Holder,
    },
}

/// The holders, grouped by test: `` `a::b` (pid 12, 2 slots: n1, n2) ``.
fn describe(holders: &[Holder], me: &Holder) -> String {
    let mut by_test: Vec<(&str, u32, Vec<&str>)> = Vec::new();
    for h in holders {
        match by_test
            .iter_mut()
            .find(|(test, pid, _)| *test == h.test && *pid == h.pid)
        {
            Some((_, _, resources)) => resources.push(&h.resource),
            None => by_test.push((&h.test, h.pid, vec![&h.resource])),
        }
    }
    if by_test.is_empty() {
        return "by no test that says so (their holders are gone, or write nothing)".to_owned();
    }
    let parts: Vec<String> = by_test
        .iter()
        .map(|(test, pid, resources)| {
            let this = if *test == me.test && *pid == me.pid {
                ", this test"
            } else {
                ""
            };
            let slots = match resources.len() {
                1 => "1 slot".to_owned(),
                n => format!("{n} slots"),
            };
            format!(
                "by `{test}` (pid {pid}{this}, {slots}: {})",
                resources.join(", ")
            )
        })
        .collect();
    parts.join(", ")
}

/// Takes a free slot of `kind` for `holder`, waiting while another slot
/// changes hands at least every `bound`. The test's `log` says when it
/// starts to wait and who holds the slots, every 10 s while it waits, and
/// when it got a slot.
pub async fn acquire(
    results_dir: &Path,
    kind: &str,
    budget: usize,
    holder: &Holder,
    bound: Duration,
    log: impl Fn(String),
) -> Result<Slot, BudgetError> {
    let dir = results_dir.join("budgets").join(kind);
    let io = |cause| BudgetError::Io {
        kind: kind.to_owned(),
        dir: dir.clone(),
        cause,
    };
    std::fs::create_dir_all(&dir).map_err(io)?;
    let start = Instant::now();
    let mut seen: Option<Vec<Holder>> = None;
    let (mut freed_at, mut look_at, mut report_at) = (start, start, start);
    loop {
        if let Some(slot) = try_take(&dir, budget, holder).map_err(io)? {
            if seen.is_some() {
                log(format!(
                    "got a `{kind}` slot after {}",
                    Secs(start.elapsed())
                ));
            }
            return Ok(slot);
        }
        let now = Instant::now();
        if now >= look_at {
            let holders = holders(&dir, budget);
            if seen.as_ref().is_some_and(|s| *s != holders) {
                freed_at = now;
            }
            seen = Some(holders);
            look_at = now + LOOK;
        }
        let holders = seen.as_deref().unwrap_or_default();
        if now >= report_at {
            let still = if report_at == start { "" } else { "still " };
            log(format!(
                "{still}waiting for a `{kind}` slot (budget {budget}, all held: {}); gives up when none is freed in {} (TESTKIT_BUDGET_WAIT)",
                describe(holders, holder),
                humantime::format_duration(bound)
            ));
            report_at = now + REPORT_EVERY;
        }
        if now.duration_since(freed_at) >= bound {
            return Err(BudgetError::Stalled {
                kind: kind.to_owned(),
                budget,
                bound,
                waited: start.elapsed(),
                holders: holders.to_vec(),
                me: holder.clone(),
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// A free slot, taken and marked with `holder`, if there is one.
fn try_take(dir: &Path, budget: usize, holder: &Holder) -> std::io::Result<Option<Slot>> {
    for i in 0..budget {
        let file = crate::files::open_lock_file(&dir.join(format!("{i}.lock")))?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => {
                let slot = Slot { lock };
                let mut text = serde_json::to_vec(holder).unwrap_or_default();
                text.push(b'\n');
                slot.lock.set_len(0)?;
                (&*slot.lock).write_all(&text)?;
                return Ok(Some(slot));
            }
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => continue,
            Err((_, errno)) => return Err(std::io::Error::from(errno)),
        }
    }
    Ok(None)
}

/// Who holds the slots of `dir`, as their files say, in slot order.
fn holders(dir: &Path, budget: usize) -> Vec<Holder> {
    (0..budget)
        .filter_map(|i| std::fs::read(dir.join(format!("{i}.lock"))).ok())
        .filter_map(|text| serde_json::from_slice(&text).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn slots_are_exclusive_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let me = Holder::new("t::a", "r1");
        runtime().block_on(async {
            let a = acquire(dir.path(), "k", 2, &me, LONG, |m| {
                panic!("no wait expected: {m}")
            })
            .await
            .unwrap();
            let _b = acquire(dir.path(), "k", 2, &me, LONG, |_| ())
                .await
                .unwrap();
            let third = tokio::time::timeout(
                Duration::from_millis(300),
                acquire(dir.path(), "k", 2, &me, LONG, |_| ()),
            )
            .await;
            assert!(
                third.is_err(),
                "a third slot was granted with a budget of 2"
            );
            drop(a);
            acquire(dir.path(), "k", 2, &me, LONG, |m| {
                panic!("no wait expected: {m}")
            })
            .await
            .unwrap();
        });
    }

    #[test]
    fn a_wait_in_which_no_slot_is_freed_gives_up_naming_the_holders() {
        let dir = tempfile::tempdir().unwrap();
        let other = Holder {
            test: "t::other".into(),
            pid: 4242,
            resource: "ct-x-other-01".into(),
        };
        let me = Holder::new("t::me", "ct-x-me-02");
        let log = Mutex::new(Vec::new());
        runtime().block_on(async {
            let _held = acquire(dir.path(), "sandbox", 2, &other, LONG, |_| ())
                .await
                .unwrap();
            let _mine = acquire(
                dir.path(),
                "sandbox",
                2,
                &Holder::new("t::me", "ct-x-me-01"),
                LONG,
                |_| (),
            )
            .await
            .unwrap();
            let started = std::time::Instant::now();
            let err = acquire(
                dir.path(),
                "sandbox",
                2,
                &me,
                Duration::from_millis(600),
                |m| log.lock().unwrap().push(m),
            )
            .await
            .unwrap_err();
            let took = started.elapsed();
            assert!(
                // Not before its bound, and not for ever: a loaded machine
                // may hold the process off the CPU for seconds.
                took >= Duration::from_millis(600) && took < Duration::from_secs(60),
                "{took:?}"
            );
            let message = err.to_string();
            for part in [
                "no `sandbox` slot was freed in 600ms",
                "the budget of `sandbox` is 2",
                "by `t::other` (pid 4242, 1 slot: ct-x-other-01)",
                &format!(
                    "by `t::me` (pid {}, this test, 1 slot: ct-x-me-01)",
                    std::process::id()
                ),
                "raise `budget` in [resources.sandbox]",
                "create fewer `sandbox` at once",
            ] {
                assert!(message.contains(part), "{part:?} not in: {message}");
            }
        });
        let log = log.into_inner().unwrap();
        assert!(
            log.first().is_some_and(|l| l
                .starts_with("waiting for a `sandbox` slot (budget 2, all held: by `t::other`")),
            "{log:?}"
        );
    }

    #[test]
    fn a_queue_that_moves_is_waited_out_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let bound = Duration::from_millis(1500);
        runtime().block_on(async {
            let mut held = acquire(dir.path(), "k", 1, &Holder::new("t::a", "r0"), LONG, |_| ())
                .await
                .unwrap();
            // The slot changes hands every 0.9 s, five times: 4.5 s in
            // all, three times the bound, and never a bound without a
            // slot freed.
            let path = dir.path().to_owned();
            let churn = tokio::spawn(async move {
                for n in 1..=5 {
                    tokio::time::sleep(Duration::from_millis(900)).await;
                    drop(held);
                    held = acquire(
                        &path,
                        "k",
                        1,
                        &Holder::new("t::a", &format!("r{n}")),
                        LONG,
                        |_| (),
                    )
                    .await
                    .unwrap();
                }
                drop(held);
            });
            let started = std::time::Instant::now();
            acquire(
                dir.path(),
                "k",
                1,
                &Holder::new("t::b", "mine"),
                bound,
                |_| (),
            )
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "gave up on a moving queue after {:?}: {e}",
                    started.elapsed()
                )
            });
            churn.await.unwrap();
        });
    }
}
