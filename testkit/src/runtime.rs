//! The process's one tokio runtime. Each test is driven by [`block_on`] on
//! its own harness thread, so its future need not be `Send`; spawned tasks
//! and I/O run on the runtime's workers. The signal handler and the reaper
//! run on it too.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Wake, Waker};

/// The most tests this process runs at once; 0 until the harness knows.
static CONCURRENT_TESTS: AtomicUsize = AtomicUsize::new(0);

/// Tells the runtime, before its first use, how many tests this process
/// runs at once, so that it starts no more workers than they can use: one
/// for a process that runs one test, as every process under nextest does.
/// A worker more than that costs such a process threads it never uses and
/// I/O wakeups handed from one worker to another (measured in bench/).
pub(crate) fn expect_concurrent_tests(tests: usize) {
    CONCURRENT_TESTS.store(tests, Ordering::Relaxed);
}

pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| build(CONCURRENT_TESTS.load(Ordering::Relaxed)))
}

/// A runtime for `tests` tests at once (0: not known): a worker per test,
/// up to one per CPU. `TOKIO_WORKER_THREADS`, when set, decides instead.
fn build(tests: usize) -> tokio::runtime::Runtime {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if tests > 0 && std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        // Counting CPUs reads the cgroup's quota from /proc: not for one.
        let workers = match tests {
            1 => 1,
            _ => tests.min(std::thread::available_parallelism().map_or(1, usize::from)),
        };
        builder.worker_threads(workers);
    }
    builder
        .enable_all()
        .thread_name("testkit-worker")
        .build()
        .expect("failed to start the tokio runtime")
}

/// Drives `future` to completion on this thread, inside the runtime's
/// context (its I/O and timers are driven by the workers), the way
/// `Handle::block_on` does, with one difference: while the future waits,
/// the thread gives the pages of its stack below the current frame back to
/// the kernel. Polling a test body can reach deep (an HTTP client in the
/// dev profile touches over 100 KiB of stack); without this, 200 tests
/// waiting at once held 200 such stacks at their deepest, a third of the
/// process's memory.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let _context = runtime().enter();
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
        stack::release_below_here();
        // A wake before this park makes it return at once.
        std::thread::park();
    }
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

mod stack {
    use nix::libc;
    use std::cell::Cell;

    /// Bytes below the current frame left alone: the red zone, the frames
    /// of the calls made from here, and a signal handler's.
    const MARGIN: usize = 16 * 1024;

    thread_local! {
        /// The lowest address of this thread's stack; 0 when it is not to
        /// be released (the main thread) or could not be found.
        static BOTTOM: Cell<Option<usize>> = const { Cell::new(None) };
    }

    fn page_size() -> usize {
        // SAFETY: sysconf has no preconditions.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        usize::try_from(size).unwrap_or(4096)
    }

    fn bottom() -> usize {
        BOTTOM.with(|b| {
            if let Some(bottom) = b.get() {
                return bottom;
            }
            let bottom = find_bottom();
            b.set(Some(bottom));
            bottom
        })
    }

    fn find_bottom() -> usize {
        // The main thread's stack grows on demand and its bounds are a
        // guess from the rlimit: leave it alone (under nextest it runs the
        // process's one test, and memory is not the question there).
        if std::thread::current().name() == Some("main") {
            return 0;
        }
        // SAFETY: `attr` is initialized by pthread_getattr_np before
        // it is read, and destroyed once.
        unsafe {
            let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
            if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
                return 0;
            }
            let mut attr = attr.assume_init();
            let (mut addr, mut size) = (std::ptr::null_mut(), 0);
            // The lowest address of the stack; its guard page lies below.
            let found = libc::pthread_attr_getstack(&attr, &mut addr, &mut size) == 0;
            libc::pthread_attr_destroy(&mut attr);
            if found {
                addr as usize
            } else {
                0
            }
        }
    }

    /// Tells the kernel the pages of this thread's stack well below the
    /// current frame hold nothing: they are freed, and come back zeroed if
    /// the stack grows into them again.
    pub(super) fn release_below_here() {
        let bottom = bottom();
        if bottom == 0 {
            return;
        }
        let here = 0u8;
        let sp = std::ptr::addr_of!(here) as usize;
        let page = page_size();
        let start = bottom.div_ceil(page) * page;
        let end = sp.saturating_sub(MARGIN) / page * page;
        if end > start {
            // SAFETY: [start, end) lies inside this thread's own stack,
            // below every live frame (the stack grows down from `sp`).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
            }
        }
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    /// Touches `depth` × 64 KiB of stack below the caller.
    fn dig(depth: usize) {
        let buf = [1u8; 64 * 1024];
        std::hint::black_box(&buf);
        if depth > 0 {
            dig(depth - 1);
        }
    }

    /// The resident KiB of the mapping that holds `addr`.
    fn resident_kib(addr: usize) -> usize {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        inside = (lo..hi).contains(&addr);
                        continue;
                    }
                }
            }
            if inside {
                if let Some(kib) = line.strip_prefix("Rss:") {
                    return kib.trim().trim_end_matches(" kB").parse().unwrap();
                }
            }
        }
        panic!("no mapping holds {addr:x}");
    }

    #[test]
    fn a_runtime_has_a_worker_per_test_up_to_one_per_cpu() {
        let workers = |tests| build(tests).metrics().num_workers();
        if let Some(set) = std::env::var_os("TOKIO_WORKER_THREADS") {
            let set: usize = set
                .to_str()
                .and_then(|s| s.trim().parse().ok())
                .expect("TOKIO_WORKER_THREADS is a number of threads");
            assert_eq!(
                workers(1),
                set,
                "TOKIO_WORKER_THREADS decides, even for one test"
            );
            assert_eq!(workers(256), set, "TOKIO_WORKER_THREADS decides");
            return;
        }
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(workers(1), 1, "a process that runs one test");
        assert_eq!(workers(256), cpus);
        assert_eq!(workers(0), cpus, "not known: tokio's default");
        if cpus > 1 {
            assert_eq!(workers(2), 2);
        }
    }

    #[test]
    fn a_waiting_test_holds_no_stack_below_its_frame() {
        std::thread::spawn(|| {
            let here = 0u8;
            let stack = std::ptr::addr_of!(here) as usize;
            let (deep, waiting) = block_on(async {
                dig(16);
                let deep = resident_kib(stack);
                tokio::task::yield_now().await;
                (deep, resident_kib(stack))
            });
            assert!(deep >= 1024, "digging touched only {deep} KiB");
            assert!(
                waiting < 256,
                "{waiting} KiB of stack still resident after waiting (1 MiB was touched)"
            );
        })
        .join()
        .unwrap();
    }
}
