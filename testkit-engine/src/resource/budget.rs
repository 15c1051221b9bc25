//! Budgets: at most N live resources of a kind per run, across every test
//! process of the run. A slot is an exclusive `flock` on one of N files under
//! `<results>/budgets/<kind>/`; the kernel releases it when its holder dies.

use std::fs::{File, OpenOptions};
use std::path::Path;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};

/// How often a waiting test tries the slots again.
const POLL: Duration = Duration::from_millis(50);

/// One held slot; dropping it frees the slot.
#[derive(Debug)]
pub struct Slot {
    _lock: Flock<File>,
}

/// Takes a free slot of `kind`, waiting as long as it takes. `on_wait` is
/// called once, when the first try finds every slot taken.
pub async fn acquire(
    results_dir: &Path,
    kind: &str,
    budget: usize,
    on_wait: impl FnOnce(),
) -> std::io::Result<(Slot, Option<Duration>)> {
    let dir = results_dir.join("budgets").join(kind);
    std::fs::create_dir_all(&dir)?;
    let start = tokio::time::Instant::now();
    let mut on_wait = Some(on_wait);
    loop {
        for i in 0..budget {
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(dir.join(format!("{i}.lock")))?;
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(lock) => {
                    let waited = on_wait.is_none().then(|| start.elapsed());
                    return Ok((Slot { _lock: lock }, waited));
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => continue,
                Err((_, errno)) => return Err(std::io::Error::from(errno)),
            }
        }
        if let Some(f) = on_wait.take() {
            f();
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_exclusive_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, waited) = acquire(dir.path(), "k", 2, || panic!("no wait expected"))
                .await
                .unwrap();
            assert!(waited.is_none());
            let (_b, _) = acquire(dir.path(), "k", 2, || ()).await.unwrap();
            let third = tokio::time::timeout(
                Duration::from_millis(300),
                acquire(dir.path(), "k", 2, || ()),
            )
            .await;
            assert!(
                third.is_err(),
                "a third slot was granted with a budget of 2"
            );
            drop(a);
            let (_c, waited) = acquire(dir.path(), "k", 2, || ()).await.unwrap();
            assert!(waited.is_none());
        });
    }
}
