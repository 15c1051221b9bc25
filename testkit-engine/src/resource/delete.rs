//! Deleting one resource and proving it gone: bounded in time, retried with
//! backoff on transient errors, verified by asking the pod, and re-checked
//! after a short delay before anything is called a leak. A resource whose
//! first delete finds it already gone was deleted by something else, and is
//! said to be ([`Gone::BeforeDelete`]), not "deleted and verified".

use std::time::Duration;

use tokio::time::Instant;

use super::kind::{DeleteAnswer, KindSpec, OpError, Presence, ResourceRef};
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

/// How a resource was proven gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Gone {
    /// The pod accepted this delete, and then said it is gone.
    Verified,
    /// The first delete found it already gone: something else deleted it
    /// before this delete was sent. It is gone (verified), but nothing here
    /// deleted it.
    BeforeDelete,
}

/// Why a resource could not be proven gone.
#[derive(Debug, Clone)]
pub struct Leak(pub String);

/// Deletes `name` and waits until the pod says it is gone. `deleted` is
/// called once the pod accepted the deletion (never when it was already
/// gone); `log` gets every retry.
pub async fn delete_and_verify(
    pod: &Pod,
    kind: &KindSpec,
    resource: &ResourceRef,
    deleted: impl FnOnce(),
    log: &(dyn Fn(String) + Sync),
) -> Result<Gone, Leak> {
    let name = resource.name.as_str();
    let start = Instant::now();
    let deadline = start + kind.delete_timeout();
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1u32;
    let mut gone_before = false;
    loop {
        match kind.delete_answer(pod, resource).await {
            Ok(DeleteAnswer::Accepted) => break,
            Ok(DeleteAnswer::AlreadyGone) => {
                // Only the first answer proves that no delete of ours was
                // ever accepted: after a transient error (a timeout), the
                // pod may have carried out an earlier attempt.
                gone_before = attempt == 1;
                break;
            }
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
    if gone_before {
        log(format!(
            "{} `{name}` was already gone when its delete was sent: something else deleted it",
            kind.name()
        ));
    } else {
        deleted();
    }
    let proven = if gone_before {
        Gone::BeforeDelete
    } else {
        Gone::Verified
    };

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
        Ok(()) => return Ok(proven),
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
        Ok(Presence::Gone) => Ok(proven),
        Ok(Presence::Present(state)) => Err(Leak(format!(
            "still there {} after its delete was accepted ({state})",
            Secs(start.elapsed())
        ))),
        Err(e) => Err(Leak(format!(
            "still there at the deadline ({last}), then checking again failed: {e}"
        ))),
    }
}
