//! Deleting one resource and proving it gone: bounded in time, retried with
//! backoff on transient errors, verified by asking the pod, and re-checked
//! after a short delay before anything is called a leak.

use std::time::Duration;

use tokio::time::Instant;

use super::kind::{KindSpec, OpError, Presence, ResourceRef};
use crate::pod::Pod;
use crate::wait::{Check, Secs, Wait, WaitError};

/// The first pause between retries of a delete; it doubles up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Verification gets at least this long, however long the delete took.
const MIN_VERIFY: Duration = Duration::from_secs(2);

/// Services are eventually consistent: a resource still there at the deadline
/// is asked about once more after this delay before it counts as leaked.
const RECHECK_DELAY: Duration = Duration::from_secs(1);

/// Why a resource could not be proven gone.
#[derive(Debug, Clone)]
pub struct Leak(pub String);

/// Deletes `name` and waits until the pod says it is gone. `deleted` is
/// called once the pod accepted the deletion; `log` gets every retry.
pub async fn delete_and_verify(
    pod: &Pod,
    kind: &KindSpec,
    resource: &ResourceRef,
    deleted: impl FnOnce(),
    log: &(dyn Fn(String) + Sync),
) -> Result<(), Leak> {
    let name = resource.name.as_str();
    let start = Instant::now();
    let deadline = start + kind.delete_timeout();
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1u32;
    loop {
        match kind.delete(pod, resource).await {
            Ok(()) => break,
            Err(OpError::Permanent(e)) => return Err(Leak(format!("delete failed: {e}"))),
            Err(OpError::Transient(e)) => {
                if Instant::now() + backoff > deadline {
                    return Err(Leak(format!(
                        "delete failed {attempt} times within {} (transient errors, retried with backoff); last: {e}",
                        Secs(kind.delete_timeout())
                    )));
                }
                log(format!(
                    "deleting {} `{name}` failed (attempt {attempt}), retrying in {}: {e}",
                    kind.name(),
                    Secs(backoff)
                ));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                attempt += 1;
            }
        }
    }
    deleted();

    let budget = deadline
        .saturating_duration_since(Instant::now())
        .max(MIN_VERIFY);
    let what = format!("{} `{name}` to be gone", kind.name());
    let wait = Wait::new()
        .inactivity(budget)
        .ceiling(budget)
        .interval(Duration::from_millis(100));
    let verified = wait
        .until(&what, || async {
            match kind.exists(pod, resource).await {
                Ok(Presence::Gone) => Ok(Check::Done(())),
                Ok(Presence::Present(state)) => Ok(Check::Pending(state)),
                Err(OpError::Transient(e)) => Ok(Check::Pending(format!("error: {e}"))),
                Err(OpError::Permanent(e)) => Err(anyhow::anyhow!(e)),
            }
        })
        .await;
    let last = match verified {
        Ok(()) => return Ok(()),
        Err(WaitError::Failed { cause: source, .. }) => {
            return Err(Leak(format!(
                "checking whether it is gone failed: {source:#}"
            )))
        }
        Err(e) => e.last_observation().unwrap_or("nothing").to_owned(),
    };
    log(format!(
        "{} `{name}` still there after {} ({last}); checking once more in {}",
        kind.name(),
        Secs(start.elapsed()),
        Secs(RECHECK_DELAY)
    ));
    tokio::time::sleep(RECHECK_DELAY).await;
    match kind.exists(pod, resource).await {
        Ok(Presence::Gone) => Ok(()),
        Ok(Presence::Present(state)) => Err(Leak(format!(
            "still there {} after its delete was accepted ({state})",
            Secs(start.elapsed())
        ))),
        Err(e) => Err(Leak(format!(
            "still there at the deadline ({last}), then checking again failed: {e}"
        ))),
    }
}
