//! The CPU backend's worker threads ([`WorkerPool`]): a fixed set of threads started with the
//! program, to which a run hands one closure at a time.
//!
//! memc's own pool rather than rayon's because a run must not allocate: rayon's `install`
//! from a thread outside the pool pushes onto a global injector queue that allocates a block
//! every few dozen jobs, and `broadcast` collects its results into a `Vec`. Here a dispatch
//! stores a pointer to the caller's closure in a shared slot, bumps an epoch and wakes the
//! workers (who spin briefly, yielding their core now and then, before they sleep on a condition
//! variable; only sleepers are notified, so a dispatch to spinning workers makes no system
//! call), runs the closure
//! itself as thread 0, and waits for the others. A parallel loop ([`WorkerPool::for_each`])
//! hands out indices from an atomic counter on the caller's stack.
//!
//! Guarantees: [`WorkerPool::broadcast`] returns only after every thread it used has
//! returned from the closure, so the closure may borrow the caller's stack; nothing is
//! allocated per dispatch (std's `Mutex` and `Condvar` are futex words on Linux); a closure
//! that panics on a worker is reported as a panic of the caller once all have finished.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

/// Spins a waiting thread does before it sleeps.
const SPINS: u32 = 1 << 14;

/// A spinning thread yields its core every this many spins. The thread it waits for may be
/// queued on the same core (Linux wakes a worker on its waker's core when it judges the cache
/// warm there), and a spin that never yields then holds that thread off for the whole spin:
/// measured on a 2-vCPU VM, some processes paid about 0.4 ms on every dispatch (a 0.05 ms
/// convolution took 0.42-0.6 ms at two threads). `sched_yield` returns at once when nothing
/// else is waiting for the core.
const SPINS_PER_YIELD: u32 = 1 << 8;

/// One step of a spin-wait: a pause, and a yield every [`SPINS_PER_YIELD`] steps.
fn spin_step(step: u32) {
    if step % SPINS_PER_YIELD == SPINS_PER_YIELD - 1 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// The closure of the current dispatch, its lifetime erased (see [`WorkerPool::broadcast`]).
#[derive(Copy, Clone)]
struct Job(*const (dyn Fn(usize) + Sync));

// SAFETY: the closure is `Sync` and outlives every use (the dispatcher waits for all users).
unsafe impl Send for Job {}

struct Control {
    epoch: u64,
    job: Option<Job>,
    /// Threads `1..active` run the current job.
    active: usize,
    /// Workers still running the current job.
    pending: usize,
    /// Workers asleep on `work` (a dispatch wakes them only when there are some: a
    /// notification is a system call even when nobody waits).
    sleepers: usize,
    /// Whether the dispatcher sleeps on `done` (likewise).
    dispatcher_asleep: bool,
    shutdown: bool,
}

struct Shared {
    control: Mutex<Control>,
    /// The epoch, readable without the lock, for spinning workers.
    epoch: AtomicU64,
    /// Workers still running, readable without the lock, for the spinning dispatcher.
    pending: AtomicUsize,
    panicked: AtomicBool,
    work: Condvar,
    done: Condvar,
}

/// `threads - 1` worker threads; the thread that dispatches is thread 0.
pub struct WorkerPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool")
            .field("threads", &self.threads())
            .finish()
    }
}

impl WorkerPool {
    /// A pool of `threads` threads (at least 1) counting the caller: starts `threads - 1`.
    pub fn new(threads: usize) -> std::io::Result<WorkerPool> {
        let shared = Arc::new(Shared {
            control: Mutex::new(Control {
                epoch: 0,
                job: None,
                active: 0,
                pending: 0,
                sleepers: 0,
                dispatcher_asleep: false,
                shutdown: false,
            }),
            epoch: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            work: Condvar::new(),
            done: Condvar::new(),
        });
        let mut pool = WorkerPool {
            shared,
            workers: Vec::new(),
        };
        let cpus = placement(threads.max(1));
        for index in 1..threads.max(1) {
            let shared = Arc::clone(&pool.shared);
            let cpu = cpus.get(index).copied().flatten();
            let handle = std::thread::Builder::new()
                .name(format!("memc-worker-{index}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        pin(cpu);
                    }
                    worker(&shared, index)
                })?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    /// Threads a dispatch can use, the caller included.
    pub fn threads(&self) -> usize {
        self.workers.len() + 1
    }

    /// The same as [`WorkerPool::threads`] (rayon's name, for callers written against it).
    pub fn current_num_threads(&self) -> usize {
        self.threads()
    }

    /// Runs `f(t)` for `t` in `0..threads` (at most [`WorkerPool::threads`]), `f(0)` on the
    /// calling thread, and returns when all have returned.
    pub fn broadcast(&self, threads: usize, f: &(dyn Fn(usize) + Sync)) {
        let threads = threads.clamp(1, self.threads());
        if threads == 1 {
            f(0);
            return;
        }
        // SAFETY: the erased lifetime: this function does not return (or unwind) before every
        // worker that read the job has finished with it (`Wait` below, also on unwinding).
        let job = Job(unsafe {
            std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static (dyn Fn(usize) + Sync)>(f)
        });
        let wake = {
            let mut control = lock(&self.shared.control);
            control.job = Some(job);
            control.active = threads;
            control.pending = threads - 1;
            control.epoch += 1;
            self.shared.pending.store(threads - 1, Ordering::Release);
            self.shared.epoch.store(control.epoch, Ordering::Release);
            control.sleepers > 0
        };
        // Spinning workers see the epoch; sleeping ones need the notification (a worker
        // counts itself asleep under the lock, before it waits, so none is missed).
        if wake {
            self.shared.work.notify_all();
        }
        struct Wait<'a>(&'a Shared);
        impl Drop for Wait<'_> {
            fn drop(&mut self) {
                let shared = self.0;
                for step in 0..SPINS {
                    if shared.pending.load(Ordering::Acquire) == 0 {
                        break;
                    }
                    spin_step(step);
                }
                let mut control = lock(&shared.control);
                while control.pending > 0 {
                    control.dispatcher_asleep = true;
                    control = shared.done.wait(control).unwrap_or_else(|e| e.into_inner());
                }
                control.dispatcher_asleep = false;
                control.job = None;
            }
        }
        let wait = Wait(&self.shared);
        f(0);
        drop(wait);
        if self.shared.panicked.swap(false, Ordering::AcqRel) {
            panic!("a memc worker thread panicked while running a kernel");
        }
    }

    /// Runs `f(i)` for every `i` in `0..n` on up to `threads` threads, each taking the next
    /// index as it finishes one.
    pub fn for_each(&self, threads: usize, n: usize, f: &(dyn Fn(usize) + Sync)) {
        let next = AtomicUsize::new(0);
        self.broadcast(threads.min(n), &|_| loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= n {
                break;
            }
            f(i);
        });
    }

    /// Runs `f(begin, end)` over `0..rows` in runs of consecutive rows: on the calling thread
    /// alone unless `parallel` (and there are two rows and two threads), else in about four
    /// runs per thread, each thread taking the next run as it finishes one (the native
    /// window and softmax kernels split their rows so).
    pub fn for_row_runs(&self, rows: u64, parallel: bool, f: &(dyn Fn(u64, u64) + Sync)) {
        let threads = self.threads() as u64;
        if !parallel || threads <= 1 || rows <= 1 {
            f(0, rows);
            return;
        }
        let n_runs = rows.min(threads * 4);
        let run = rows.div_ceil(n_runs);
        self.for_each(threads as usize, n_runs as usize, &|c| {
            let begin = (c as u64 * run).min(rows);
            f(begin, (begin + run).min(rows));
        });
    }
}

impl Drop for WorkerPool {
    fn drop(&mut self) {
        // Shutdown wakes every worker, asleep or not.
        lock(&self.shared.control).shutdown = true;
        self.shared.epoch.fetch_add(1, Ordering::AcqRel);
        self.shared.work.notify_all();
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
    }
}

fn lock(m: &Mutex<Control>) -> std::sync::MutexGuard<'_, Control> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The CPU each thread of a pool of `threads` is pinned to: none for the caller (index 0),
/// and for each worker a distinct one of the CPUs this process may run on, other than the
/// one the caller runs on now, when there are enough; all `None` when there are not, where
/// the system does not say, or with `MEMC_NO_PIN` set.
///
/// A worker starts on its creator's CPU, and on this 2-vCPU machine it stayed there (time-
/// sharing it with the caller) for the whole of about half of all short runs: the zoo resnet
/// at two threads took 0.72-0.81 ms in those processes and 0.40-0.43 in the others (30 runs
/// each); pinned, 10 processes of 10 ran at 0.43-0.45.
fn placement(threads: usize) -> Vec<Option<usize>> {
    let mut cpus = vec![None; threads];
    #[cfg(target_os = "linux")]
    if threads > 1 && std::env::var_os("MEMC_NO_PIN").is_none() {
        // SAFETY: `set` is a plain bit set the call fills in; `sched_getcpu` has no arguments.
        let (allowed, current) = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
                return cpus;
            }
            let allowed: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| libc::CPU_ISSET(c, &set))
                .collect();
            (allowed, libc::sched_getcpu())
        };
        let others: Vec<usize> = allowed
            .into_iter()
            .filter(|&c| c as i64 != i64::from(current))
            .collect();
        if others.len() >= threads - 1 {
            for (slot, cpu) in cpus.iter_mut().skip(1).zip(others) {
                *slot = Some(cpu);
            }
        }
    }
    cpus
}

/// Pins the calling thread to `cpu` (a hint: an error leaves it where it is).
fn pin(cpu: usize) {
    #[cfg(target_os = "linux")]
    // SAFETY: `set` is a plain bit set, filled in before the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = cpu;
}

fn worker(shared: &Shared, index: usize) {
    let mut seen = 0u64;
    loop {
        // Spin a while for the next dispatch, then sleep.
        for step in 0..SPINS {
            if shared.epoch.load(Ordering::Acquire) != seen {
                break;
            }
            spin_step(step);
        }
        let (job, active) = {
            let mut control = lock(&shared.control);
            while control.epoch == seen && !control.shutdown {
                control.sleepers += 1;
                control = shared.work.wait(control).unwrap_or_else(|e| e.into_inner());
                control.sleepers -= 1;
            }
            if control.shutdown {
                return;
            }
            seen = control.epoch;
            (control.job, control.active)
        };
        if index >= active {
            continue;
        }
        if let Some(Job(f)) = job {
            // SAFETY: the dispatcher keeps the closure alive until `pending` reaches 0.
            let f = unsafe { &*f };
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(index))).is_err() {
                shared.panicked.store(true, Ordering::Release);
            }
        }
        let mut control = lock(&shared.control);
        control.pending -= 1;
        shared.pending.store(control.pending, Ordering::Release);
        if control.pending == 0 && control.dispatcher_asleep {
            shared.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Dispatches back to back (workers spinning) and after pauses longer than a spin
    /// (workers asleep, the dispatcher sleeping on `done` while they finish): every thread
    /// runs every dispatch exactly once, and no wake-up is lost (a lost one would hang).
    #[test]
    fn workers_are_placed_on_distinct_cpus_apart_from_the_caller() {
        assert_eq!(placement(1), vec![None]);
        let cpus = placement(3);
        assert_eq!(cpus.len(), 3);
        assert_eq!(cpus[0], None, "the caller is never pinned");
        let workers: Vec<usize> = cpus[1..].iter().flatten().copied().collect();
        // All placed or none (too few CPUs, or no affinity to read).
        assert!(workers.is_empty() || workers.len() == 2, "{cpus:?}");
        if workers.len() == 2 {
            assert_ne!(workers[0], workers[1], "{cpus:?}");
        }
        // A pool still runs every share whatever the placement.
        let pool = WorkerPool::new(3).unwrap();
        let hits = std::sync::atomic::AtomicUsize::new(0);
        pool.broadcast(3, &|t| {
            hits.fetch_add(1 << (8 * t), Ordering::Relaxed);
        });
        assert_eq!(hits.load(Ordering::Relaxed), 0x01_01_01);
    }

    #[test]
    fn every_dispatch_reaches_spinning_and_sleeping_workers() {
        let pool = WorkerPool::new(3).expect("threads start");
        let counts: [AtomicUsize; 3] = Default::default();
        for round in 0..400 {
            let threads = 2 + round % 2;
            pool.broadcast(threads, &|t| {
                if t > 0 && round % 50 == 0 {
                    // The dispatcher outlasts its spin waiting for this worker.
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                counts[t].fetch_add(1, Ordering::Relaxed);
            });
            if round % 40 == 0 {
                // The workers outlast their spin and sleep.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        let counts: Vec<usize> = counts.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(counts, [400, 400, 200]);
    }
}
