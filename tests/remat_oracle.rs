//! memc's rematerialization against an exact optimum: `bench/remat/oracle.py`, a
//! Checkmate-style MILP solved by HiGHS that shares no code with memc (in `.venv`).
//!
//! Random DAGs (MatMul, Softmax, Transpose, Add over 32x32 f32 tensors, ops reading values made
//! long before, as a backward pass reads activations) are planned with `--memory-budget` at
//! fractions of their arena and at the oracle's smallest feasible peak, and the oracle solves
//! the same schedule at the same budget. The criteria, asserted:
//! - a budget memc says it met is an arena within it, and memc never grows the arena;
//! - every budget the oracle meets, memc meets, with extra FLOPs within 10% of the optimum (or
//!   1% of the graph's FLOPs).
//!
//! Two asserted sets: `remat_is_near_the_exact_optimum`, ten graphs of 12 to 24 ops, and
//! `remat_is_near_the_exact_optimum_at_40_ops`, the graphs of 30 to 40 ops of the larger sweep
//! (seeds 4, 5, 10, 11, 16, 17, 21, 22, 23 of `REMAT_SEEDS=24 REMAT_SPAN=29`), several of which
//! need two-level recomputation (a value derived again from values that are themselves derived
//! again at another point) at their tightest budgets.
//!
//! The oracle's answers are cached in `tests/fixtures/remat_oracle.json`, keyed by a hash of
//! the problem (the graph in memc's schedule and the budget), since the MILP takes up to a
//! minute at 40 ops; a problem not in the cache (memc's schedule changed) is solved by the
//! oracle when `.venv` has it. `bench/remat/fixtures.sh` regenerates the cache
//! (`REMAT_ORACLE_WRITE=1` writes every answer the oracle gives; `REMAT_ORACLE_TIME=S` sets its
//! time limit, default 60 s; `REMAT_ORACLE_RESOLVE=1` solves again the answers cached at the
//! time limit). An answer at the time limit still counts where it decides: its schedule
//! proves the budget feasible (memc must meet it) and its FLOPs bound the optimum.
//!
//! A larger sweep: `REMAT_SEEDS=N` (default 10), `REMAT_SPAN=K` (default 13: graphs of 12 to
//! 11 + K ops), `REMAT_FROM=S` (first seed). There the comparisons are printed and only
//! soundness is asserted (figures in the note of issue 13; the oracle takes minutes at 35-40
//! ops).
//!
//! The oracle holds memory as Checkmate does (each value its own buffer, no in-place, no
//! reordering), so memc, which also shares bytes in place and may reorder, can do better than
//! the "optimum"; it must never do worse by more than the margin.
//!
//! Without `.venv` (or highspy), a problem not in the cache skips the test, which says so,
//! unless `MEMC_REQUIRE_ZOO` is set.

mod common;

use memc_ir::{ElemType, Function, Module, OpId, Opcode, TensorType, Type, ValueId, WeightBytes};
use memc_passes::plan::PlanOptions;
use memc_passes::remat::config::Budget;
use memc_passes::remat::{rematerialize, RematOptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const N: u64 = 32;

/// A deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn random_dag(seed: u64, n_ops: usize) -> Module {
    let mut rng = Rng(seed);
    let mut module = Module::new();
    let ty = || Type::Tensor(TensorType::with_shape(ElemType::F32, &[N, N]));
    let w = module
        .weights
        .insert(
            "w",
            TensorType::with_shape(ElemType::F32, &[N, N]),
            WeightBytes::Owned(Arc::from(vec![0u8; (N * N * 4) as usize])),
        )
        .expect("a fresh store");
    let mut func = Function::new("random", vec![ty()], Vec::new());
    let block = func.entry_block();
    let weight_op = func.build_op(
        block,
        Opcode::Weight,
        vec![],
        vec![ty()],
        [("value", memc_ir::Attribute::Weight(w))],
    );
    let weight = func.op(weight_op).results[0];
    let mut pool: Vec<ValueId> = func.args().to_vec();
    for _ in 0..n_ops {
        // Mostly the newest values (a forward chain), sometimes an old one (a backward read).
        let pick = |rng: &mut Rng, pool: &[ValueId]| {
            if rng.below(3) == 0 {
                pool[rng.below(pool.len())]
            } else {
                pool[pool.len() - 1 - rng.below(pool.len().min(2))]
            }
        };
        let x = pick(&mut rng, &pool);
        let y = pick(&mut rng, &pool);
        let (opcode, operands, attrs): (
            Opcode,
            Vec<ValueId>,
            Vec<(&'static str, memc_ir::Attribute)>,
        ) = match rng.below(6) {
            0 | 1 => (Opcode::MatMul, vec![x, weight], vec![]),
            2 => (Opcode::MatMul, vec![x, y], vec![]),
            3 => (
                Opcode::Softmax,
                vec![x],
                vec![("axis", memc_ir::Attribute::Int(-1))],
            ),
            4 => (
                Opcode::Transpose,
                vec![x],
                vec![("perm", memc_ir::Attribute::ints([1, 0]))],
            ),
            _ => (Opcode::Add, vec![x, y], vec![]),
        };
        let op = func.build_op(block, opcode, operands, vec![ty()], attrs);
        pool.push(func.op(op).results[0]);
    }
    let out = *pool.last().expect("ops were made");
    func.push_result_type(ty());
    func.build_op(block, Opcode::Return, vec![out], vec![], []);
    module.add_function(func);
    module
}

/// The oracle's problem for `func` in the planner's `schedule`.
fn problem(func: &Function, schedule: &[OpId], budget: u64) -> serde_json::Value {
    let mut index: HashMap<ValueId, usize> = HashMap::new();
    let mut nodes = Vec::new();
    let outputs: Vec<ValueId> = func
        .op(*func.layout().block_ops(func.entry_block()).last().unwrap())
        .operands
        .clone();
    let bytes = |v: ValueId| {
        func.value_type(v)
            .tensor()
            .unwrap()
            .static_byte_size()
            .unwrap()
    };
    for &arg in func.args() {
        index.insert(arg, nodes.len());
        nodes.push(serde_json::json!({
            "name": format!("{arg}"), "size": bytes(arg), "flops": 0, "deps": [],
            "recompute": false, "output": outputs.contains(&arg), "scratch": 0,
        }));
    }
    for &op in schedule {
        let data = func.op(op);
        let r = data.results[0];
        let deps: Vec<usize> = data
            .operands
            .iter()
            .filter_map(|v| index.get(v).copied())
            .collect();
        index.insert(r, nodes.len());
        nodes.push(serde_json::json!({
            "name": format!("{r}"), "size": bytes(r), "flops": memc_ir::ops::flops(func, op),
            "deps": deps, "recompute": true, "output": outputs.contains(&r), "scratch": 0,
        }));
    }
    serde_json::json!({ "nodes": nodes, "budget": budget })
}

/// The cached oracle answers, by problem key.
static CACHE: Mutex<Option<serde_json::Map<String, serde_json::Value>>> = Mutex::new(None);

fn cache_path() -> PathBuf {
    common::root().join("tests/fixtures/remat_oracle.json")
}

/// The cache key of a problem and the oracle's arguments: FNV-1a of their text.
fn key(problem: &serde_json::Value, extra: &[&str]) -> String {
    let text = format!("{problem} {}", extra.join(" "));
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("{hash:016x}")
}

/// The oracle's answer, from the cache or from the oracle; `None` when it is not cached and
/// the oracle is not installed.
fn oracle(problem: &serde_json::Value, extra: &[&str]) -> Option<serde_json::Value> {
    let key = key(problem, extra);
    {
        let mut cache = CACHE.lock().expect("no test panics holding the cache");
        let map = cache.get_or_insert_with(|| {
            std::fs::read_to_string(cache_path())
                .ok()
                .map(|text| serde_json::from_str(&text).expect("the cache is JSON"))
                .unwrap_or_default()
        });
        // `REMAT_ORACLE_RESOLVE`: solve again what was cached at the time limit.
        let resolve = std::env::var_os("REMAT_ORACLE_RESOLVE").is_some();
        if let Some(answer) = map.get(&key) {
            if !resolve || answer["status"] == "optimal" {
                return Some(answer.clone());
            }
        }
    }
    if !have_oracle() {
        return None;
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("remat_oracle");
    std::fs::create_dir_all(&dir).expect("tmp is writable");
    let path = dir.join(format!("p{}-{key}.json", std::process::id()));
    let time_limit = std::env::var("REMAT_ORACLE_TIME").unwrap_or_else(|_| "60".into());
    std::fs::write(&path, problem.to_string()).expect("tmp is writable");
    let out = Command::new(common::root().join(".venv/bin/python"))
        .arg(common::root().join("bench/remat/oracle.py"))
        .arg(&path)
        .args(["--time-limit", &time_limit])
        .args(extra)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the oracle prints JSON");
    // `REMAT_ORACLE_WRITE=1` writes every answer into the cache; `=PATH` writes the cache
    // with the new answers to PATH instead.
    if let Some(out) = std::env::var_os("REMAT_ORACLE_WRITE") {
        let out = if out == "1" {
            cache_path()
        } else {
            PathBuf::from(out)
        };
        let mut cache = CACHE.lock().expect("no test panics holding the cache");
        let map = cache.get_or_insert_with(Default::default);
        map.insert(key, answer.clone());
        let text = serde_json::to_string_pretty(&*map).expect("JSON serializes");
        std::fs::write(out, text + "\n").expect("the fixtures are writable");
    }
    Some(answer)
}

fn have_oracle() -> bool {
    let python = common::root().join(".venv/bin/python");
    let ok = python.exists()
        && Command::new(&python)
            .args(["-c", "import highspy"])
            .status()
            .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("MEMC_REQUIRE_ZOO").is_none(),
            "MEMC_REQUIRE_ZOO is set but .venv has no highspy (scripts/test installs it)"
        );
    }
    ok
}

fn remat(module: &Module, budget: u64) -> (u64, memc_passes::remat::RematReport) {
    let (_, func) = module.functions().next().unwrap();
    let mut func = func.clone();
    let none = |_: &Function, _: OpId| 0u64;
    let options = RematOptions {
        budget: Some(Budget::Bytes(budget)),
        recompute: Vec::new(),
        plan: PlanOptions {
            budget: Duration::from_millis(50),
        },
    };
    let (plan, report) =
        rematerialize(&mut func, &module.weights, &none, &options).expect("random DAGs plan");
    // The rewritten function verifies, and the model saw its memory as the planner does.
    let mut rewritten = Module::new();
    rewritten.weights = module.weights.clone();
    rewritten.add_function(func);
    assert!(
        memc_ir::verify_module(&rewritten).is_ok(),
        "the rewritten function verifies"
    );
    if report.cloned_ops > 0 {
        assert_eq!(report.model_load, plan.load_model_order, "the model's LOAD");
    }
    (plan.arena_size, report)
}

/// What a comparison found.
#[derive(Default)]
struct Tally {
    /// Budgets met by both.
    compared: usize,
    /// Budgets the oracle meets and memc does not.
    misses: usize,
    /// Those budgets, with their seeds.
    missed: Vec<(u64, u64)>,
    /// Budgets met by both where memc is over the FLOPs margin.
    over: usize,
    /// The largest excess over the optimum, in graph FLOPs.
    worst_gap: f64,
    /// Budgets memc met with the eviction search's recomputations.
    evictions: usize,
    /// Budgets met by both where the oracle hit its time limit and memc's FLOPs lie between
    /// the margins of its lower bound and of its best schedule.
    undecided: usize,
}

/// Compares memc with the oracle on the random DAG of `seed` with `n_ops` ops, at 90, 75 and
/// 60% of the oracle's base peak (those it can meet) and its smallest feasible peak; asserts
/// soundness. `None` when an answer is neither cached nor obtainable.
fn compare(seed: u64, n_ops: usize, tally: &mut Tally) -> Option<()> {
    let module = random_dag(seed + 1, n_ops);
    let (_, func) = module.functions().next().unwrap();
    let base = memc_passes::memory::plan_function(func, &module.weights, &PlanOptions::default())
        .expect("plans");
    let floor = oracle(&problem(func, &base.schedule, 0), &["--min-budget"])?;
    let min_budget = floor["budget"]
        .as_u64()
        .expect("the smallest feasible peak");
    let base_peak = floor["base_peak"].as_u64().expect("the base peak");
    let graph_flops = floor["graph_flops"].as_u64().expect("graph flops");
    let mut budgets: Vec<u64> = [90u64, 75, 60]
        .iter()
        .map(|p| base_peak * p / 100)
        .filter(|&b| b >= min_budget)
        .collect();
    budgets.push(min_budget);
    for budget in budgets {
        let answer = oracle(&problem(func, &base.schedule, budget), &[])?;
        let (arena, report) = remat(&module, budget);
        // A time-limited answer with a schedule still proves the budget feasible; its FLOPs
        // bound the optimum from above, `flops_lower_bound` from below.
        let optimal = answer["status"] == "optimal";
        let Some(optimum) = answer["extra_flops"].as_u64() else {
            continue;
        };
        let lower = if optimal {
            optimum
        } else {
            answer["flops_lower_bound"].as_u64().unwrap_or(0)
        };
        assert!(
            !report.met || arena <= budget,
            "seed {seed}: a met budget is an arena within it"
        );
        assert!(
            arena <= report.base_arena,
            "seed {seed}: remat never grows the arena"
        );
        if !report.met {
            tally.misses += 1;
            tally.missed.push((seed, budget));
            println!(
                "seed {seed} ({n_ops} ops): MISS: the oracle meets {budget} bytes with {optimum} \
                 extra FLOPs{}; memc reached {arena}",
                if optimal { "" } else { " (time limit)" }
            );
            continue;
        }
        let margin = |x: u64| (x as f64 * 1.1).max(x as f64 + graph_flops as f64 * 0.01);
        let extra = report.extra_flops as f64;
        // Over the margin of the best known schedule: too many. Within that of the lower
        // bound (the optimum itself when solved): near enough. In between, undecided.
        let verdict = if extra > margin(optimum) {
            tally.over += 1;
            "OVER"
        } else if extra <= margin(lower) {
            "ok"
        } else {
            tally.undecided += 1;
            "undecided"
        };
        let gap = (extra - optimum as f64) / graph_flops.max(1) as f64;
        tally.worst_gap = tally.worst_gap.max(gap);
        tally.compared += 1;
        tally.evictions += usize::from(report.eviction);
        println!(
            "seed {seed} ({n_ops} ops) budget {budget}: memc {} extra FLOPs (arena {arena}{}), {} {optimum}{}; graph {graph_flops}: {verdict}",
            report.extra_flops,
            if report.eviction { ", eviction search" } else { "" },
            if optimal { "optimum" } else { "oracle (time limit)" },
            if optimal { String::new() } else { format!(", lower bound {lower}") },
        );
    }
    Some(())
}

fn summary(tally: &Tally) {
    println!(
        "{} budgets met by both ({} over 10% of the optimum and 1% of the graph), \
         worst excess over the optimum {:.3}% of the graph's FLOPs; {} met by the oracle only; \
         {} met through the eviction search; {} undecided (the oracle's time limit)",
        tally.compared,
        tally.over,
        tally.worst_gap * 100.0,
        tally.misses,
        tally.evictions,
        tally.undecided
    );
}

fn skipped() {
    eprintln!(
        "skipped: an oracle answer is not cached (tests/fixtures/remat_oracle.json) and .venv \
         with highspy was not found (scripts/test installs it; bench/remat/fixtures.sh \
         regenerates the cache)"
    );
}

#[test]
fn remat_is_near_the_exact_optimum() {
    let number = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let sweep = ["REMAT_SEEDS", "REMAT_SPAN", "REMAT_FROM"]
        .iter()
        .any(|n| number(n).is_some());
    let seeds = number("REMAT_SEEDS").unwrap_or(10);
    let span = number("REMAT_SPAN").unwrap_or(13) as usize;
    let from = number("REMAT_FROM").unwrap_or(0);
    let mut tally = Tally::default();
    for seed in from..seeds {
        if compare(seed, 12 + (seed as usize * 5) % span, &mut tally).is_none() {
            return skipped();
        }
    }
    summary(&tally);
    if !sweep {
        assert!(
            tally.compared + tally.misses >= 10,
            "enough budgets are compared"
        );
        assert_eq!(tally.misses, 0, "memc meets every budget the oracle meets");
        assert_eq!(tally.over, 0, "memc's extra FLOPs are near the optimum");
    }
}

/// The graphs of 30 to 40 ops of the sweep `REMAT_SEEDS=24 REMAT_SPAN=29`. At their tightest
/// budgets (four buffers) the gap candidates alone fall short and the eviction search meets
/// them: seed 10 needs two-level recomputation; seeds 5 and 17 a value held to the end as a
/// checkpoint (seed 17's oracle keeps the graph input) with many values derived again from it
/// at one late point (seed 17's oracle: 18 at one stage).
#[test]
fn remat_is_near_the_exact_optimum_at_40_ops() {
    let mut tally = Tally::default();
    for seed in [4u64, 5, 10, 11, 16, 17, 21, 22, 23] {
        let n_ops = 12 + (seed as usize * 5) % 29;
        assert!((30..=40).contains(&n_ops), "seed {seed}: {n_ops} ops");
        if compare(seed, n_ops, &mut tally).is_none() {
            return skipped();
        }
    }
    summary(&tally);
    assert!(tally.compared >= 15, "enough budgets are compared");
    assert!(
        tally.evictions >= 6,
        "seeds 5, 10 and 17 need the eviction search at their two tightest budgets"
    );
    assert!(
        tally.missed.is_empty(),
        "memc meets every budget the oracle meets; (seed, budget) missed: {:?}",
        tally.missed
    );
    assert_eq!(tally.over, 0, "memc's extra FLOPs are near the optimum");
}
