//! Resources: named from the run, journaled before they exist, deleted and
//! verified gone whatever happens.
//!
//! The words, used the same way everywhere:
//!
//! - **cleanup**: when a test ends (pass, error, panic, timeout), its
//!   resources are deleted newest first and verified gone
//!   ([`delete_and_verify`]); on SIGINT/SIGTERM a handler does the
//!   same within a grace period.
//! - **reaper**: when a test process is killed outright, its reaper (a
//!   process in its own session, watching a pipe) cleans up from the journal.
//! - **leak**: a resource that could not be proven gone.
//! - **residue**: what carries a run's id on the pod after its tests; a
//!   **sweep** lists every kind by the run's prefix and deletes it, the
//!   runner's residue phase.
//! - **janitor**: deletes a run's residue by exact name from its journals, and
//!   by sweeping (`testkit-runner janitor`).
//! - **witness**: a look below the API (a command on this machine, a debug
//!   listing) for residue the product forgot; what it names is reported,
//!   never deleted ([`witness`]).
//! - **forget**: a test that deleted a resource itself stops tracking it.

pub mod budget;
pub mod delete;
pub mod groups;
mod janitor;
pub mod journal;
mod kind;
pub mod names;
pub mod reapers;
pub mod terminated;
pub mod witness;

pub use delete::{delete_and_verify, Gone, Leak};
pub use janitor::{
    janitor, janitor_with, sweep, sweep_in_binary, sweep_run, JanitorTarget, Resource, SweepBounds,
    SweepReport, DEFAULT_SWEEP_CONCURRENCY,
};
pub use journal::{outstanding, read_journal, Event, Journal, JournalEntry, Outstanding};
pub use kind::{
    DeleteAnswer, KindError, KindFuture, KindSpec, Kinds, LinkedKinds, OpError, Presence,
    ResourceKind, ResourceRef,
};
pub use names::{attempt_tag, carries_run_id, Naming, NamingError};
pub use witness::{check_witnesses, PodHome, WitnessOutcome, WitnessReport, WitnessSite};
