//! The game path's allocations are counted, and stay few: the design rule is
//! no allocation per message on the hot paths (`DESIGN.md`), and a rule that
//! nothing measures drifts. This binary's global allocator counts what the
//! hosts' ticks allocate (`tessera_bench::alloc_count`).

use tessera_bench::alloc_count::{allocations, installed, window, Counting};
use tessera_bench::cost::run;

#[global_allocator]
static GLOBAL: Counting<std::alloc::System> = Counting(std::alloc::System);

/// Allocations in the hosts' ticks per client-second above which the test
/// fails, at this test's crowd (150 walkers, about 35 in view). Measured:
/// about 2 (what is left is the sync messages of entities with ghosts, see
/// `bench/README.md`); one allocation per client input (ten a
/// client-second, what every input cost before its payload went inline)
/// fails it.
const ALLOCS_PER_CLIENT_S_MAX: f64 = 6.0;

/// The crowd's allocations per client-second, or why the bound is broken.
fn within_bound(per_client_s: f64) -> Result<(), String> {
    if per_client_s <= ALLOCS_PER_CLIENT_S_MAX {
        Ok(())
    } else {
        Err(format!(
            "{per_client_s:.2} allocations per client-second in the hosts' ticks \
             (at most {ALLOCS_PER_CLIENT_S_MAX}): something on the game path \
             allocates per message (TESSERA_ALLOC_TRACE=N on the cost bench says where)"
        ))
    }
}

#[test]
fn the_counter_counts_this_threads_window_only() {
    assert!(installed(), "this binary allocates through Counting");
    let before = allocations();
    let outside = std::hint::black_box(vec![1u8; 64]);
    assert_eq!(allocations(), before, "outside a window nothing counts");
    window(true);
    let inside = std::hint::black_box(vec![2u8; 64]);
    let mut grown = std::hint::black_box(Vec::<u8>::with_capacity(1));
    grown.extend_from_slice(&[3; 100]);
    window(false);
    assert_eq!(
        allocations() - before,
        3,
        "two allocations and a reallocation"
    );
    // The probe test may run beside this one: each thread counts its own.
    let other = std::thread::spawn(|| {
        window(true);
        let v = std::hint::black_box(vec![4u8; 64]);
        window(false);
        drop(v);
        allocations()
    })
    .join()
    .expect("joined");
    assert_eq!(other, 1, "the other thread counted its own allocation");
    assert_eq!(
        allocations() - before,
        3,
        "another thread's allocations do not count here"
    );
    drop((outside, inside, grown));
}

#[test]
fn the_game_path_allocates_a_few_times_a_client_second() {
    if tessera::INVARIANT_CHECKS {
        // `cargo test --workspace` builds tessera with its invariant checks
        // (its dev-dependency on itself), which allocate in every tick: the
        // bound holds for the game path alone, so CI also runs this test on
        // its own, where they are off (`.ci/run`: `cargo test --release -p
        // tessera-bench --test host_allocs`).
        eprintln!("skipped: the invariant checks are on in this build (they allocate)");
        return;
    }
    let p = run(150, 2).expect("a probe of a healthy server");
    let per = p
        .host_allocs_per_client_s
        .expect("the counting allocator is installed");
    eprintln!("host allocations per client-second: {per:.2}");
    within_bound(per).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn an_allocation_per_input_breaks_the_bound() {
    // The probe's walkers send ten inputs a client-second: a payload
    // allocated per input alone is past the bound.
    assert!(within_bound(ALLOCS_PER_CLIENT_S_MAX).is_ok());
    let err = within_bound(10.0).expect_err("ten a client-second is too many");
    assert!(err.contains("10.00 allocations"), "{err}");
}
