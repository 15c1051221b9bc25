//! Deleting one resource and proving it gone: bounded in time, retried with
//! backoff on transient errors, verified by asking the pod, and re-checked
//! after a short delay before anything is called a leak. A resource whose
//! first delete finds it already gone was deleted by something else, and is
//! said to be ([`Gone::BeforeDelete`]), not "deleted and verified"; unless
//! the pod still lists it, when the delete is sent again.

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
    // Bounded where it is read; saturating all the same, so that no
    // timeout can overflow the clock in the middle of a cleanup.
    let deadline = crate::duration::tokio_deadline_after(start, kind.delete_timeout());
    let mut proven = delete_with_retries(pod, kind, resource, deadline, log).await?;
    let mut backoff = FIRST_BACKOFF;
    let mut still_there = false;
    // A delete answered "gone" for a resource that `exists` still finds: the
    // pod contradicts itself (a delete route that reads a stale cache, say).
    // The delete is sent again, with backoff, until it is accepted or the
    // deadline; a resource that stays would otherwise be waited on until
    // then and reported leaked, though one more delete removes it.
    while proven == Gone::BeforeDelete {
        let Ok(Presence::Present(state)) = kind.exists(pod, resource).await else {
            break;
        };
        still_there = true;
        if Instant::now() + backoff > deadline {
            break;
        }
        log(format!(
            "{} `{name}`: its delete answered that it is gone, but it is still there ({state}); deleting it again in {}",
            kind.name(),
            Secs(backoff)
        ));
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
        proven = delete_with_retries(pod, kind, resource, deadline, log).await?;
    }
    match proven {
        // Said only of a resource no delete was seen to leave behind.
        Gone::BeforeDelete if !still_there => log(format!(
            "{} `{name}` was already gone when its delete was sent: something else deleted it",
            kind.name()
        )),
        Gone::BeforeDelete => {}
        Gone::Verified => deleted(),
    }
    let last = match wait_until_gone(pod, kind, resource, deadline).await {
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

/// Sends the delete until the pod accepts it or says the resource is gone,
/// retrying transient errors with backoff until `deadline`. Which of the
/// two it was: [`Gone::BeforeDelete`] only when the very first answer said
/// gone (after a transient error, such as a timeout, the pod may have
/// carried out an earlier attempt).
async fn delete_with_retries(
    pod: &Pod,
    kind: &KindSpec,
    resource: &ResourceRef,
    deadline: Instant,
    log: &(dyn Fn(String) + Sync),
) -> Result<Gone, Leak> {
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 1u32;
    loop {
        match kind.delete_answer(pod, resource).await {
            Ok(DeleteAnswer::Accepted) => return Ok(Gone::Verified),
            Ok(DeleteAnswer::AlreadyGone) if attempt == 1 => return Ok(Gone::BeforeDelete),
            Ok(DeleteAnswer::AlreadyGone) => return Ok(Gone::Verified),
            Err(OpError::Permanent(e)) => return Err(Leak(format!("delete failed: {e}"))),
            Err(OpError::Transient(e)) => {
                if Instant::now() + backoff > deadline {
                    return Err(Leak(format!(
                        "delete failed {attempt} times within {} (transient errors, retried with backoff); last: {e}",
                        Secs(kind.delete_timeout())
                    )));
                }
                log(format!(
                    "deleting {} `{}` failed (attempt {attempt}), retrying in {}: {e}",
                    kind.name(),
                    resource.name,
                    Secs(backoff)
                ));
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                attempt += 1;
            }
        }
    }
}

/// Polls `exists` until the pod says gone, for what is left of the
/// deadline (at least [`MIN_VERIFY`]).
async fn wait_until_gone(
    pod: &Pod,
    kind: &KindSpec,
    resource: &ResourceRef,
    deadline: Instant,
) -> Result<(), WaitError> {
    let budget = deadline
        .saturating_duration_since(Instant::now())
        .max(MIN_VERIFY);
    let what = format!("{} `{}` to be gone", kind.name(), resource.name);
    Wait::new()
        .inactivity(budget)
        .ceiling(budget)
        .interval(Duration::from_millis(100))
        .until(&what, || async {
            match kind.exists(pod, resource).await {
                Ok(Presence::Gone) => Ok(Check::Done(())),
                Ok(Presence::Present(state)) => Ok(Check::Pending(state)),
                Err(OpError::Transient(e)) => Ok(Check::Pending(format!("error: {e}"))),
                Err(OpError::Permanent(e)) => Err(anyhow::anyhow!(e)),
            }
        })
        .await
}
