//! The process's one tokio runtime. Each test is driven by `Handle::block_on`
//! on its own harness thread, so its future need not be `Send`; spawned tasks
//! and I/O run on the runtime's workers. The signal handler and the reaper
//! run on it too.

use std::sync::OnceLock;

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("testkit-worker")
            .build()
            .expect("failed to start the tokio runtime")
    })
}
