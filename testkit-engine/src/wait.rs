//! Waits that tell you what they saw: poll until a condition holds, with an
//! inactivity timeout (reset whenever what is observed changes) and a hard
//! ceiling; a timeout names what it waited for, how long, and the last
//! observation.
//!
//! ```no_run
//! # async fn f() -> Result<(), testkit_engine::wait::WaitError> {
//! use std::time::Duration;
//! use testkit_engine::wait::{Check, Wait};
//!
//! let wait = Wait::new().inactivity(Duration::from_secs(10));
//! let state = wait.until("sandbox ct-x to be ready", || async {
//!     let state = String::from("ready"); // ask the pod here
//!     Ok(if state == "ready" { Check::Done(state) } else { Check::pending(format!("state={state}")) })
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! A test calls it as `testkit::wait::until(cx, …)`, so that what it
//! observes goes to its log.

use std::fmt::{self, Display};
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// The result of one poll: done (with a value), or not yet, with what was
/// observed. The observation drives the inactivity timeout: a wait keeps
/// going as long as it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check<T> {
    /// The condition holds.
    Done(T),
    /// Not yet; what was observed instead.
    Pending(String),
}

impl<T> Check<T> {
    /// Not yet, having observed `observation`.
    pub fn pending(observation: impl Display) -> Check<T> {
        Check::Pending(observation.to_string())
    }
}

/// How long and how often to poll. Builders consume and return `self`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    inactivity: Duration,
    ceiling: Duration,
    interval: Duration,
}

impl Default for Wait {
    fn default() -> Wait {
        Wait {
            inactivity: Duration::from_secs(30),
            ceiling: Duration::from_secs(300),
            interval: Duration::from_millis(100),
        }
    }
}

impl Wait {
    /// 30 s of inactivity, a 5 min ceiling, polling every 100 ms.
    pub fn new() -> Wait {
        Wait::default()
    }

    /// Gives up when the observation has not changed for this long.
    pub fn inactivity(mut self, inactivity: Duration) -> Wait {
        self.inactivity = inactivity;
        self
    }

    /// Gives up after this long, however much is changing.
    pub fn ceiling(mut self, ceiling: Duration) -> Wait {
        self.ceiling = ceiling;
        self
    }

    /// Time between the end of one poll and the start of the next.
    pub fn interval(mut self, interval: Duration) -> Wait {
        self.interval = interval;
        self
    }

    /// Polls without a test context (nothing is logged).
    pub async fn until<T, F, Fut>(self, what: &str, poll: F) -> Result<T, WaitError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Check<T>>>,
    {
        self.run(what, poll, |_| {}).await
    }

    /// Polls `poll` until it is ready, calling `on_change` with each new
    /// observation: how a test logs what it waits for.
    pub async fn run<T, F, Fut>(
        self,
        what: &str,
        mut poll: F,
        mut on_change: impl FnMut(&str),
    ) -> Result<T, WaitError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Check<T>>>,
    {
        let start = Instant::now();
        let mut last: Option<String> = None;
        let mut last_change = start;
        let mut polls: u64 = 0;
        let pending = crate::trace::pending::begin_wait(what);
        loop {
            polls += 1;
            // A poll that hangs must not outlive the ceiling either.
            let remaining = self.ceiling.saturating_sub(start.elapsed());
            let outcome =
                tokio::time::timeout(remaining.max(Duration::from_millis(1)), poll()).await;
            let observation = match outcome {
                Ok(Ok(Check::Done(value))) => return Ok(value),
                Ok(Ok(Check::Pending(observation))) => observation,
                Ok(Err(source)) => {
                    return Err(WaitError::Failed {
                        what: what.to_owned(),
                        waited: start.elapsed(),
                        last: last.as_deref().map(crate::trace::cap),
                        cause: source,
                    })
                }
                Err(_) => "the last poll did not answer before the ceiling".to_owned(),
            };
            if last.as_deref() != Some(observation.as_str()) {
                pending.saw(&observation);
                on_change(&observation);
                last = Some(observation);
                last_change = Instant::now();
            }
            let now = Instant::now();
            let reason = if now.duration_since(start) >= self.ceiling {
                Some(TimeoutReason::Ceiling(self.ceiling))
            } else if now.duration_since(last_change) >= self.inactivity {
                Some(TimeoutReason::Inactivity(self.inactivity))
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(WaitError::Timeout {
                    what: what.to_owned(),
                    waited: start.elapsed(),
                    reason,
                    polls,
                    last: last.as_deref().map(crate::trace::cap),
                });
            }
            let after = crate::duration::tokio_deadline_after;
            let next = after(now, self.interval)
                .min(after(start, self.ceiling))
                .min(after(last_change, self.inactivity));
            tokio::time::sleep_until(next).await;
        }
    }
}

/// Where [`until`] writes what it observes: a test's log. testkit's `Cx`
/// is one.
pub trait WaitLog {
    /// Adds a line to the log.
    fn wait_log(&self, line: String);
}

/// Polls `poll` until it reports [`Check::Done`], logging each new
/// observation in the test's log (`cx`).
pub async fn until<T, F, Fut, L>(cx: &L, what: &str, wait: Wait, poll: F) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Check<T>>>,
    L: WaitLog + ?Sized,
{
    let start = Instant::now();
    cx.wait_log(format!("waiting for {what}"));
    // The last observations, each capped, and how many came before them:
    // a wait that sees a new listing every poll costs bounded memory.
    let mut seen = std::collections::VecDeque::new();
    let mut earlier = 0;
    let result = wait
        .run(what, poll, |o| {
            let o = crate::trace::cap(o);
            cx.wait_log(format!("  {what}: {o}"));
            seen.push_back(o);
            if seen.len() > crate::trace::step::WAIT_OBSERVATIONS {
                seen.pop_front();
                earlier += 1;
            }
        })
        .await;
    crate::trace::step::wait(
        what,
        start.into_std(),
        result.as_ref().err().map(|e| e.to_string()),
        seen.make_contiguous(),
        earlier,
    );
    match &result {
        Ok(_) => cx.wait_log(format!(
            "done waiting for {what} after {}",
            Secs(start.elapsed())
        )),
        Err(e) => cx.wait_log(e.to_string()),
    }
    result
}

/// Which limit a wait hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutReason {
    /// Nothing changed for this long.
    Inactivity(Duration),
    /// The hard ceiling.
    Ceiling(Duration),
}

/// A wait that ended without its condition.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// A limit was hit.
    #[error("timed out waiting for {what} after {} ({}; {polls} polls); last observation: {}",
        Secs(*waited), reason_text(reason), last.as_deref().unwrap_or("none"))]
    Timeout {
        /// What was waited for.
        what: String,
        /// How long.
        waited: Duration,
        /// Which limit.
        reason: TimeoutReason,
        /// How many polls ran.
        polls: u64,
        /// The last observation.
        last: Option<String>,
    },
    /// A poll returned an error.
    #[error("failed waiting for {what} after {}: {cause:#} (last observation: {})", Secs(*waited), last.as_deref().unwrap_or("none"))]
    Failed {
        /// What was waited for.
        what: String,
        /// How long until the error.
        waited: Duration,
        /// The last observation before the error.
        last: Option<String>,
        /// The poll's error.
        cause: anyhow::Error,
    },
}

impl WaitError {
    /// The last observation before the wait ended.
    pub fn last_observation(&self) -> Option<&str> {
        match self {
            WaitError::Timeout { last, .. } | WaitError::Failed { last, .. } => last.as_deref(),
        }
    }
}

fn reason_text(reason: &TimeoutReason) -> String {
    match reason {
        TimeoutReason::Inactivity(d) => format!("no change for {}: inactivity timeout", Secs(*d)),
        TimeoutReason::Ceiling(d) => format!("ceiling of {} reached", Secs(*d)),
    }
}

/// A duration as seconds with millisecond precision: `1.250s`.
pub struct Secs(pub Duration);

impl Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3}s", self.0.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
    }

    #[test]
    fn done_returns_the_value() {
        let n = AtomicU32::new(0);
        let v = rt()
            .block_on(Wait::new().until("three polls", || async {
                let i = n.fetch_add(1, Ordering::SeqCst);
                Ok(if i == 2 {
                    Check::Done(i)
                } else {
                    Check::pending(i)
                })
            }))
            .unwrap();
        assert_eq!(v, 2);
    }

    #[test]
    fn inactivity_resets_while_the_observation_changes() {
        let n = AtomicU32::new(0);
        let wait = Wait::new()
            .inactivity(Duration::from_millis(100))
            .interval(Duration::from_millis(40));
        // Changes every poll for 10 polls (longer than the inactivity timeout in all), then done.
        let v = rt()
            .block_on(wait.until("progress", || async {
                let i = n.fetch_add(1, Ordering::SeqCst);
                Ok(if i == 10 {
                    Check::Done(i)
                } else {
                    Check::pending(i)
                })
            }))
            .unwrap();
        assert_eq!(v, 10);
    }

    #[test]
    fn a_timeout_names_what_how_long_and_the_last_observation() {
        let wait = Wait::new()
            .inactivity(Duration::from_millis(100))
            .ceiling(Duration::from_secs(10));
        let e = rt()
            .block_on(wait.until("sandbox x to go", || async {
                Ok(Check::<()>::pending("state=deleting"))
            }))
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("sandbox x to go")
                && text.contains("inactivity")
                && text.contains("state=deleting"),
            "{text}"
        );
        assert_eq!(e.last_observation(), Some("state=deleting"));

        let n = AtomicU32::new(0);
        let wait = Wait::new()
            .inactivity(Duration::from_secs(5))
            .ceiling(Duration::from_millis(200))
            .interval(Duration::from_millis(20));
        let e = rt()
            .block_on(wait.until("forever", || async {
                Ok(Check::<()>::pending(n.fetch_add(1, Ordering::SeqCst)))
            }))
            .unwrap_err();
        assert!(e.to_string().contains("ceiling of 0.200s"), "{e}");
    }

    #[test]
    fn a_poll_error_ends_the_wait() {
        let e = rt()
            .block_on(Wait::new().until("x", || async {
                Err::<Check<()>, _>(anyhow::anyhow!("boom"))
            }))
            .unwrap_err();
        assert!(
            matches!(e, WaitError::Failed { .. }) && e.to_string().contains("boom"),
            "{e}"
        );
    }

    #[test]
    fn a_poll_error_is_printed_once_in_a_chain() {
        let e = rt()
            .block_on(Wait::new().until("the sandbox", || async {
                Err::<Check<()>, _>(anyhow::anyhow!("connection refused").context("GET /api/x"))
            }))
            .unwrap_err();
        // `{:#}` is how a failed test is shown: every cause, once.
        let shown = format!("{:#}", anyhow::Error::new(e));
        assert_eq!(shown.matches("connection refused").count(), 1, "{shown}");
        assert_eq!(shown.matches("GET /api/x").count(), 1, "{shown}");
    }
}
