//! A run allocates nothing on the heap once its session is loaded: a counting global allocator
//! watches repeated `Session::run_in_place` calls, at one thread and at two, on a model with
//! every kernel family a run parallelizes (`tests/onnx/no_heap/model.onnx`, written by
//! `tests/onnx/make_no_heap.py`: Gemm and MatMul with packed and in-place `B`, batched
//! attention products, ONNX Attention, 3x3 and 1x1 convolutions, low-bit products on the
//! few-rows and many-rows paths). Any allocation during those runs fails the test.
//!
//! This file is its own test binary with one test, so no other test allocates meanwhile.

mod common;

use memc_runtime::{Session, SessionOptions, TensorRef};
use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The system allocator, counting allocations while `COUNTING` is set (from every thread).
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

fn count() {
    if COUNTING.load(Ordering::Relaxed) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `runs` times with allocations counted; returns how many there were.
fn count_allocations(
    session: &mut Session,
    inputs: &[(&str, TensorRef<'_>)],
    runs: usize,
) -> usize {
    ALLOCATIONS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    let mut ok = true;
    for _ in 0..runs {
        match session.run_in_place(inputs) {
            Ok(outputs) => {
                std::hint::black_box(outputs.get(0));
            }
            Err(_) => ok = false,
        }
    }
    COUNTING.store(false, Ordering::SeqCst);
    assert!(ok, "a run failed");
    ALLOCATIONS.load(Ordering::SeqCst)
}

#[test]
fn runs_allocate_nothing() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("memc-no-heap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let plan = dir.join("model.plan");
    let status = Command::new(env!("CARGO_BIN_EXE_memc"))
        .arg("compile")
        .arg(root.join("tests/onnx/no_heap/model.onnx"))
        .arg("-o")
        .arg(&plan)
        .status()
        .expect("memc runs");
    assert!(status.success(), "memc compile failed");
    for threads in [1, 2] {
        let options = SessionOptions {
            threads: NonZeroUsize::new(threads),
            verify_weights: false,
        };
        let mut session = Session::load_with(&plan, &options).expect("the plan loads");
        // Inputs: small deterministic values in every element.
        let data = common::deterministic_inputs(&session);
        let inputs = common::input_refs(&data);
        // The first runs may initialize process-wide state once (the ISA choice).
        for _ in 0..2 {
            session.run_in_place(&inputs).expect("a run");
        }
        let allocations = count_allocations(&mut session, &inputs, 50);
        println!("{threads} thread(s): {allocations} allocations in 50 runs");
        assert_eq!(
            allocations, 0,
            "{threads} thread(s): runs allocated on the heap {allocations} times in 50 runs"
        );
        // The count sees allocations at all (a sanity check of the allocator hook).
        COUNTING.store(true, Ordering::SeqCst);
        let boxed = std::hint::black_box(Box::new(threads));
        COUNTING.store(false, Ordering::SeqCst);
        drop(boxed);
        assert!(ALLOCATIONS.load(Ordering::SeqCst) > 0, "the counter counts");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
