//! A counting global allocator: how many allocations the server's game path
//! makes, measured where the cost probe times it.
//!
//! The design rule is no allocation per message on the hot paths; a rule
//! that nothing measures drifts. [`Counting`] wraps any allocator and counts
//! the allocations (and reallocations) made while a window is open; the
//! harness opens it around each host tick (`Harness::host_hook`, set to
//! [`window`] by the cost probe), so the count is the host's alone, without
//! the test clients that decode what they receive. A binary opts in by
//! making `Counting` its global allocator (the cost bench, the allocation
//! test); elsewhere [`installed`] is false and the probe reports no count.
//!
//! Owns a count and two flags per thread and two process-wide settings;
//! touches nothing else.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// Set by the first allocation through [`Counting`]: the counts are real.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// A global allocator that counts what is allocated inside a window, and
/// otherwise is `A`.
pub struct Counting<A>(pub A);

/// Every this many counted allocations one prints where it came from
/// (`TESSERA_ALLOC_TRACE=N`, read by [`trace_every`]; 0: none).
static TRACE_EVERY: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// True while this thread's window is open (see [`window`]): only the
    /// thread that runs the hosts' ticks counts, not others (a test
    /// harness's) allocating at the same time.
    static OPEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Allocations and reallocations this thread made in its windows (per
    /// thread: two probes on two threads do not see each other's).
    static COUNT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
    /// Set while this thread prints a trace (its own allocations are not
    /// counted or traced).
    static TRACING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl<A> Counting<A> {
    #[inline]
    fn note(&self) {
        if !INSTALLED.load(Relaxed) {
            INSTALLED.store(true, Relaxed);
        }
        if OPEN.get() && !TRACING.get() {
            let n = COUNT.get() + 1;
            COUNT.set(n);
            let every = TRACE_EVERY.load(Relaxed);
            if every != 0 && n % every == 0 {
                trace();
            }
        }
    }
}

/// Prints the game-path frames of the allocation being made (a developer's
/// aid: which code allocates in the hosts' ticks).
#[cold]
fn trace() {
    TRACING.set(true);
    let bt = std::backtrace::Backtrace::force_capture().to_string();
    let frames: Vec<&str> = bt
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("tessera::") && !l.contains("alloc_count"))
        .take(4)
        .collect();
    eprintln!("alloc: {}", frames.join(" <- "));
    TRACING.set(false);
}

/// Reads `TESSERA_ALLOC_TRACE` (trace every N-th counted allocation; call
/// before the measured run).
pub fn trace_every() {
    let n = std::env::var("TESSERA_ALLOC_TRACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    TRACE_EVERY.store(n, Relaxed);
}

// SAFETY: every method forwards to `A`'s with the same arguments and returns
// its result unchanged. The counting itself allocates nothing (atomics and
// const-initialised thread-locals without destructors); the opt-in trace
// (`TESSERA_ALLOC_TRACE`) allocates through this same allocator with the
// thread's `TRACING` flag set, so those allocations are neither counted nor
// traced: the recursion ends at one level. `A: GlobalAlloc` upholds the contract.
// Exercised by this crate's `host_allocs` test (its global allocator) and by
// every run of the cost bench.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { self.0.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract for `alloc_zeroed`, passed on.
        unsafe { self.0.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { self.0.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.note();
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
}

/// Opens (`true`) or closes (`false`) the calling thread's counting window:
/// the shape of `Harness::host_hook`.
pub fn window(open: bool) {
    OPEN.set(open);
}

/// Allocations and reallocations the calling thread made in its windows so
/// far.
pub fn allocations() -> u64 {
    COUNT.get()
}

/// True if this process's global allocator is a [`Counting`] (it has
/// allocated through one): only then do [`allocations`] mean anything.
pub fn installed() -> bool {
    INSTALLED.load(Relaxed)
}
