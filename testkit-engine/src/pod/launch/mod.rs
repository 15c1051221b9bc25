//! Pods that testkit starts itself: boot with a fresh HOME on a free loopback
//! port in a scrubbed environment, wait for the handle and a healthy answer
//! (inactivity timeout reset by every line the pod prints, under a hard
//! ceiling), and stop verifiably.
//!
//! Each pod gets a private directory `testkit-pod-<random id>/` (mode 0700)
//! holding `home/` (the pod's HOME) and `stdout.raw` (what the pod prints on
//! stdout, which includes its token). The raw stdout never goes to the
//! results folder: a redacted copy does, when the pod stops or fails to boot.
//! stderr goes straight to the log folder, and is redacted in place then too.
//! Because the pod writes to files rather than pipes, a pod outlives the
//! process that launched it without losing its output (`testkit-runner pod up`).
//!
//! Its four jobs live apart: `spec` says what a launch is and how it
//! fails; `boot` starts the pod and waits until it is up; `setup` runs what
//! comes before and after its start in its scrubbed environment; `stop`
//! ends it and proves it ended. What is particular to a container pod is
//! the container pod's own (`pod/container.rs`); a machine pod's boot and
//! stop are `machine`.

mod boot;
mod installer;
mod machine;
mod setup;
mod spec;
mod stop;

pub use boot::launch;
pub use spec::{
    resolve_program, BinariesLaunch, BootObserver, BootStep, LaunchError, LaunchSpec, LaunchedPod,
    MachineLaunch, MachineStop, StopError, StopReport,
};
pub use stop::stop_recorded;
