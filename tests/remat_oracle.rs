//! memc's rematerialization against an exact optimum: `bench/remat/oracle.py`, a
//! Checkmate-style MILP solved by HiGHS that shares no code with memc (in `.venv`).
//!
//! Random DAGs of 12 to 24 ops (MatMul, Softmax, Transpose, Add over 32x32 f32 tensors, ops
//! reading values made long before, as a backward pass reads activations) are planned with
//! `--memory-budget` at fractions of their arena and at the oracle's smallest feasible peak,
//! and the oracle solves the same schedule at the same budget. The criteria, asserted:
//! - a budget memc says it met is an arena within it, and memc never grows the arena;
//! - every budget the oracle meets, memc meets, with extra FLOPs within 10% of the optimum (or
//!   1% of the graph's FLOPs).
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
//! Without `.venv` (or highspy) the test says it was skipped, unless `MEMC_REQUIRE_ZOO` is set.

mod common;

use memc_ir::{ElemType, Function, Module, OpId, Opcode, TensorType, Type, ValueId, WeightBytes};
use memc_passes::plan::PlanOptions;
use memc_passes::remat::config::Budget;
use memc_passes::remat::{rematerialize, RematOptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
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

fn oracle(problem: &serde_json::Value, extra: &[&str]) -> serde_json::Value {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("remat_oracle");
    std::fs::create_dir_all(&dir).expect("tmp is writable");
    let path = dir.join(format!("p{}.json", std::process::id()));
    std::fs::write(&path, problem.to_string()).expect("tmp is writable");
    let out = Command::new(common::root().join(".venv/bin/python"))
        .arg(common::root().join("bench/remat/oracle.py"))
        .arg(&path)
        .args(["--time-limit", "60"])
        .args(extra)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "the oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the oracle prints JSON")
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
        eprintln!("skipped: .venv with highspy not found (scripts/test installs it)");
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
    (plan.arena_size, report)
}

#[test]
fn remat_is_near_the_exact_optimum() {
    if !have_oracle() {
        return;
    }
    let mut compared = 0;
    let mut misses = 0;
    let mut over = 0;
    let mut worst_gap = 0.0f64;
    let number = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let sweep = ["REMAT_SEEDS", "REMAT_SPAN", "REMAT_FROM"]
        .iter()
        .any(|n| number(n).is_some());
    let seeds = number("REMAT_SEEDS").unwrap_or(10);
    let span = number("REMAT_SPAN").unwrap_or(13) as usize;
    let from = number("REMAT_FROM").unwrap_or(0);
    for seed in from..seeds {
        let module = random_dag(seed + 1, 12 + (seed as usize * 5) % span);
        let (_, func) = module.functions().next().unwrap();
        let base =
            memc_passes::memory::plan_function(func, &module.weights, &PlanOptions::default())
                .expect("plans");
        let floor = oracle(&problem(func, &base.schedule, 0), &["--min-budget"]);
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
            let answer = oracle(&problem(func, &base.schedule, budget), &[]);
            let (arena, report) = remat(&module, budget);
            let status = answer["status"].as_str().unwrap();
            if status != "optimal" {
                continue;
            }
            let optimum = answer["extra_flops"].as_u64().unwrap();
            assert!(
                !report.met || arena <= budget,
                "seed {seed}: a met budget is an arena within it"
            );
            assert!(
                arena <= report.base_arena,
                "seed {seed}: remat never grows the arena"
            );
            if !report.met {
                misses += 1;
                println!(
                    "seed {seed}: MISS: the oracle meets {budget} bytes with {optimum} extra FLOPs; \
                     memc reached {arena}"
                );
                continue;
            }
            let allowed = (optimum as f64 * 1.1).max(optimum as f64 + graph_flops as f64 * 0.01);
            if report.extra_flops as f64 > allowed {
                over += 1;
            }
            let gap = (report.extra_flops as f64 - optimum as f64) / graph_flops.max(1) as f64;
            worst_gap = worst_gap.max(gap);
            compared += 1;
            println!(
                "seed {seed} ({} ops) budget {budget}: memc {} extra FLOPs (arena {arena}), optimum {optimum}; graph {graph_flops}",
                func.layout().block_ops(func.entry_block()).len() - 2,
                report.extra_flops
            );
        }
    }
    println!(
        "{compared} budgets met by both ({over} over 10% of the optimum and 1% of the graph), \
         worst excess over the optimum {:.3}% of the graph's FLOPs; {misses} met by the oracle only",
        worst_gap * 100.0
    );
    assert!(compared + misses >= 10, "enough budgets are compared");
    if !sweep {
        assert_eq!(misses, 0, "memc meets every budget the oracle meets");
        assert_eq!(over, 0, "memc's extra FLOPs are near the optimum");
    }
}
