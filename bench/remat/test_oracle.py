#!/usr/bin/env python3
"""Tests of the remat oracle (bench/remat/oracle.py): hand examples with known answers, the
command line, and the MILP against a brute-force search on many random tiny DAGs.

Run: .venv/bin/python bench/remat/test_oracle.py [-v]
     .venv/bin/python bench/remat/test_oracle.py --timings [--seed 0] [--kind random|training]
         (solve times at 20/30/40 nodes)

The brute force shares no code with the oracle: it has its own simulator and enumerates every
set of (stage, node) recomputations, so it finds the optimum over the oracle's schedule class
(recomputations run before a stage's own node, in node order, at most once per stage; a final
stage after the last node) without the MILP. On the random DAGs it enumerates every pair, which
also checks the oracle's pruning of useless variables; on the larger forward/backward graphs it
drops the pairs that argument rules out (brute_candidates states it again).
"""

import json
import os
import random
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ beside the sources

import highspy  # noqa: E402
import oracle  # noqa: E402


def node(size, flops=1, deps=(), recompute=True, output=False, scratch=0, name=None):
    return {
        "name": name or "n",
        "size": size,
        "flops": flops,
        "deps": list(deps),
        "recompute": recompute,
        "output": output,
        "scratch": scratch,
    }


def graph_input(size):
    return node(size, flops=0, recompute=False)


def solve(raw_nodes, budget, **kw):
    nodes, budget = oracle.parse_problem({"nodes": raw_nodes, "budget": budget})
    return oracle.solve(nodes, budget, **kw)


# ----------------------------------------------------------------------------------------------
# The brute force.


def brute_peak(raw, pairs):
    """The peak of the schedule with the (stage, node) recomputations `pairs`, computed moment by
    moment from the run order: a value is held from its computation up to its last read before
    it is computed again (an output's last copy to the end), a graph input from the start."""
    n = len(raw)
    is_input = [not r["deps"] and not r["recompute"] for r in raw]
    run = []  # node indices in run order
    for stage in range(n + 1):
        run += sorted(v for s, v in pairs if s == stage)
        if stage < n and not is_input[stage]:
            run.append(stage)
    moments = len(run)
    # Copies: (node, born, last moment held). Inputs are born at -1.
    copies = []
    current = {}
    for i in range(n):
        if is_input[i]:
            current[i] = len(copies)
            copies.append([i, -1, None])
    for t, v in enumerate(run):
        for u in set(raw[v]["deps"]):
            assert u in current, "reads a value that does not exist yet"
            copies[current[u]][2] = t
        current[v] = len(copies)
        copies.append([v, t, t])
    for i in range(n):
        if raw[i]["output"]:
            copies[current[i]][2] = moments
    peak = 0
    for t in range(-1, moments + 1):
        held = sum(
            raw[v]["size"] for v, born, last in copies if last is not None and born <= t <= last
        )
        running = raw[run[t]]["scratch"] if 0 <= t < moments else 0
        peak = max(peak, held + running)
    return peak


def brute_candidates(raw, prune):
    """The (stage, node) pairs a recomputation set is drawn from: the node recomputable and
    before the stage (stage len(raw): after the last node). With `prune`, only pairs (s, v)
    where v is an output, or is read by a node k >= s, or by a recomputable node k whose own
    pairs (s' >= s, k) survive: a copy of v at stage s can only be read by copies made at s or
    later, so any other copy is dead (whatever reads it is dead too); dropping every dead copy
    changes no other read and frees memory, so some optimum has none."""
    n = len(raw)
    is_input = [not r["deps"] and not r["recompute"] for r in raw]
    reach = [-1] * n  # the last stage (n: the final one) at which a copy of a node can be read
    for v in reversed(range(n)):
        if raw[v]["output"]:
            reach[v] = n
        for k in range(v + 1, n):
            if v in raw[k]["deps"]:
                reach[v] = max(reach[v], k, reach[k] if raw[k]["recompute"] else -1)
    return [
        (s, v)
        for s in range(n + 1)
        if s == n or not is_input[s]
        for v in range(min(s, n))
        if raw[v]["recompute"] and (reach[v] >= s or not prune)
    ]


def brute_frontier(raw, prune=False):
    """Every recomputation set drawn from brute_candidates, as (extra flops, peak)."""
    candidates = brute_candidates(raw, prune)
    results = []
    for mask in range(1 << len(candidates)):
        pairs = [candidates[i] for i in range(len(candidates)) if mask >> i & 1]
        flops = sum(raw[v]["flops"] for _, v in pairs)
        results.append((flops, brute_peak(raw, pairs)))
    return candidates, results


def brute_min_flops(results, budget):
    """The fewest extra flops with peak <= budget, or None when no set meets it."""
    costs = [flops for flops, peak in results if peak <= budget]
    return min(costs) if costs else None


def random_dag(rng, n_nodes):
    """A random DAG in schedule order: a graph input first and up to two more anywhere, the
    rest computed nodes reading one to three earlier values (sometimes one twice)."""
    raw = []
    n_inputs = rng.randint(1, 2)
    input_at = set(rng.sample(range(n_nodes - 1), n_inputs)) | {0}
    for i in range(n_nodes):
        if i in input_at:
            raw.append(graph_input(rng.choice([1, 2, 4, 8])))
            continue
        k = rng.randint(1, min(3, i))
        deps = rng.sample(range(i), k)
        if rng.random() < 0.3:
            deps.append(deps[0])  # a duplicate read
        raw.append(
            node(
                size=rng.choice([2, 4, 6, 8, 12, 16]),
                flops=rng.choice([0, 1, 2, 3, 5, 8, 13]),
                deps=deps,
                recompute=rng.random() < 0.85,
                output=rng.random() < 0.15,
                scratch=rng.choice([0, 0, 0, 2, 6]),
            )
        )
    raw[-1]["output"] = True
    return raw


def training_dag(rng, n_layers):
    """A forward chain from a graph input, a loss, and a backward chain in which the gradient
    of layer i reads the next layer's gradient and layer i's input: the shape remat is for."""
    raw = [graph_input(rng.choice([1, 2, 4]))]
    forward = [0]
    for _ in range(n_layers):
        raw.append(node(rng.choice([6, 8, 12, 16]), flops=rng.choice([0, 1, 2, 5, 10]),
                        deps=[forward[-1]], scratch=rng.choice([0, 0, 4])))
        forward.append(len(raw) - 1)
    raw.append(node(1, flops=1, deps=[forward[-1]], output=rng.random() < 0.5))  # the loss
    for layer in reversed(range(n_layers)):
        raw.append(node(rng.choice([1, 2, 4, 8]), flops=rng.choice([1, 2, 5, 10]),
                        deps=[len(raw) - 1, forward[layer]], recompute=rng.random() < 0.5,
                        output=layer == 0 or rng.random() < 0.3))
    return raw


# ----------------------------------------------------------------------------------------------


class HandExamples(unittest.TestCase):
    # x -> a -> b -> c -> d -> e, e also reads a. Without remat a, b, c are held together (30);
    # recomputing a (1 flop) just before e keeps only x (1) beside any two of them (21).
    CHAIN = [
        graph_input(1),
        node(10, flops=1, deps=[0]),
        node(10, flops=100, deps=[1]),
        node(10, flops=100, deps=[2]),
        node(10, flops=100, deps=[3]),
        node(1, flops=100, deps=[4, 1], output=True),
    ]

    def test_recomputing_one_cheap_op_meets_the_budget(self):
        answer = solve(self.CHAIN, 21)
        self.assertEqual(answer["status"], "optimal")
        self.assertEqual(answer["base_peak"], 30)
        self.assertEqual(answer["extra_flops"], 1)
        self.assertEqual(answer["peak"], 21)
        self.assertEqual(answer["recompute"], [[5, 1]])

    def test_a_budget_at_or_over_the_base_peak_needs_nothing(self):
        answer = solve(self.CHAIN, 30)
        self.assertEqual(
            (answer["status"], answer["extra_flops"], answer["peak"]), ("optimal", 0, 30)
        )
        self.assertEqual(answer["recompute"], [])

    def test_a_budget_under_the_smallest_peak_is_infeasible(self):
        # b runs with a and b held (20) and x must stay to recompute a: 21 is the least.
        answer = solve(self.CHAIN, 20)
        self.assertEqual(answer["status"], "infeasible")
        self.assertIsNone(answer["extra_flops"])
        self.assertIsNone(answer["peak"])
        nodes, _ = oracle.parse_problem({"nodes": self.CHAIN, "budget": 0})
        self.assertEqual(oracle.solve_min_budget(nodes)["budget"], 21)

    def test_a_value_that_may_not_be_recomputed_is_kept(self):
        chain = [dict(n) for n in self.CHAIN]
        chain[1]["recompute"] = False
        self.assertEqual(solve(chain, 21)["status"], "infeasible")
        self.assertEqual(solve(chain, 30)["extra_flops"], 0)

    def test_outputs_are_kept_to_the_end_or_recomputed_after_the_last_node(self):
        # a is an output: kept, it is held beside b and c (30). Recomputed after c (5 flops),
        # only x (1) stays beside b and c (21).
        raw = [
            graph_input(1),
            node(10, flops=5, deps=[0], output=True),
            node(10, flops=100, deps=[1]),
            node(10, flops=100, deps=[2], output=True),
        ]
        self.assertEqual(solve(raw, 100)["base_peak"], 30)
        answer = solve(raw, 21)
        self.assertEqual((answer["extra_flops"], answer["peak"]), (5, 21))
        self.assertEqual(answer["recompute"], [[4, 1]])  # stage 4 = len(nodes): after the last
        # An output that may not be recomputed stays held: 21 is out of reach.
        raw[1]["recompute"] = False
        self.assertEqual(solve(raw, 29)["status"], "infeasible")

    def test_scratch_is_counted_while_its_node_runs(self):
        chain = [dict(n) for n in self.CHAIN]
        chain[3]["scratch"] = 5  # c runs with a, b, c held: 35 without remat
        answer = solve(chain, 1000)
        self.assertEqual(answer["base_peak"], 35)
        answer = solve(chain, 26)
        self.assertEqual((answer["extra_flops"], answer["peak"]), (1, 26))
        self.assertEqual(solve(chain, 25)["status"], "infeasible")

    def test_inputs_are_held_from_the_start(self):
        # y (5) is an input placed late in the order; it is held from the start, so it is in
        # memory while c runs beside a and c: 25, not 20.
        raw = [
            graph_input(1),
            node(10, deps=[0]),
            node(10, deps=[1]),
            graph_input(5),
            node(1, deps=[2, 3], output=True),
        ]
        answer = solve(raw, 1000)
        self.assertEqual(answer["base_peak"], 25)
        self.assertEqual(answer["peak"], 25)

    def test_a_source_marked_not_input_runs_at_its_stage(self):
        # A random op with no inputs (no deps, recompute false) reads as a graph input, held
        # from the start; with "input": false it is computed at its stage instead.
        raw = [
            graph_input(1),
            node(10, deps=[0]),
            node(10, deps=[1]),
            node(5, recompute=False),
            node(1, deps=[2, 3], output=True),
        ]
        self.assertEqual(solve(raw, 1000)["base_peak"], 25)
        raw[3]["input"] = False
        self.assertEqual(solve(raw, 1000)["base_peak"], 20)

    def test_a_graph_with_nothing_to_run(self):
        raw = [graph_input(4), graph_input(3)]
        raw[0]["output"] = True
        self.assertEqual(solve(raw, 4)["peak"], 4)
        self.assertEqual(solve(raw, 3)["status"], "infeasible")
        self.assertEqual(solve([], 0)["peak"], 0)

    def test_the_cheapest_of_two_recomputations_is_chosen(self):
        # e reads a and b, both 10 bytes, recomputable from x; a costs 7 flops, b costs 3. One
        # of them must be recomputed to meet 31: b.
        raw = [
            graph_input(1),
            node(10, flops=7, deps=[0]),
            node(10, flops=3, deps=[0]),
            node(10, flops=50, deps=[1, 2]),
            node(10, flops=50, deps=[3]),
            node(1, flops=50, deps=[4, 1, 2], output=True),
        ]
        self.assertEqual(solve(raw, 1000)["base_peak"], 40)
        answer = solve(raw, 31)
        self.assertEqual((answer["extra_flops"], answer["recompute"]), (3, [[5, 2]]))


class CommandLine(unittest.TestCase):
    PY = sys.executable
    ORACLE = os.path.join(HERE, "oracle.py")

    def run_oracle(self, text, *args):
        return subprocess.run(
            [self.PY, self.ORACLE, "-", *args], input=text, capture_output=True, text=True
        )

    def test_stdout_is_one_json_answer(self):
        problem = {"nodes": HandExamples.CHAIN, "budget": 21}
        done = self.run_oracle(json.dumps(problem), "--time-limit", "60")
        self.assertEqual(done.returncode, 0, done.stderr)
        answer = json.loads(done.stdout)
        self.assertEqual(answer["extra_flops"], 1)
        self.assertEqual(
            set(answer),
            {"status", "extra_flops", "peak", "base_peak", "recompute", "solve_seconds",
             "budget", "flops_lower_bound", "graph_flops"},
        )

    def test_min_budget(self):
        done = self.run_oracle(json.dumps({"nodes": HandExamples.CHAIN}), "--min-budget")
        self.assertEqual(done.returncode, 0, done.stderr)
        answer = json.loads(done.stdout)
        self.assertEqual((answer["budget"], answer["peak"], answer["extra_flops"]), (21, 21, 1))
        self.assertEqual(answer["peak_lower_bound"], 21)

    def test_a_time_limited_answer_is_consistent(self):
        # A 30-node forward/backward graph at a tight budget: a second is rarely enough to
        # prove the optimum. Whichever status comes back, the fields must agree with it.
        raw = training_dag(random.Random(3), 14)
        nodes, _ = oracle.parse_problem({"nodes": raw, "budget": 0})
        budget = oracle.base_peak(nodes) * 2 // 5
        done = self.run_oracle(json.dumps({"nodes": raw, "budget": budget}), "--time-limit", "1")
        self.assertEqual(done.returncode, 0, done.stderr)
        answer = json.loads(done.stdout)
        self.assertIn(answer["status"], ("optimal", "infeasible", "time_limit"))
        if answer["extra_flops"] is not None:
            self.assertLessEqual(answer["peak"], budget)
            self.assertEqual(answer["peak"], brute_peak(raw, [tuple(p) for p in answer["recompute"]]))
            if answer["flops_lower_bound"] is not None:
                self.assertLessEqual(answer["flops_lower_bound"], answer["extra_flops"])
        if answer["status"] == "optimal":
            self.assertEqual(answer["flops_lower_bound"], answer["extra_flops"])

    def test_malformed_problems_are_refused_with_the_node_named(self):
        cases = [
            ("{", "not JSON"),
            (json.dumps({"nodes": [node(4, deps=[0])], "budget": 4}), "node 0: dep 0"),
            (json.dumps({"nodes": [graph_input(-1)], "budget": 4}), "node 0: `size`"),
            (json.dumps({"nodes": [graph_input(4)]}), "`budget`"),
            (json.dumps({"nodes": [{"size": 4, "input": True, "recompute": True}], "budget": 4}),
             "cannot be recomputed"),
        ]
        for text, message in cases:
            done = self.run_oracle(text)
            self.assertEqual(done.returncode, 2, text)
            self.assertIn(message, done.stderr)
            self.assertEqual(done.stdout, "")


class AgainstBruteForce(unittest.TestCase):
    def check(self, raw, prune=False):
        candidates, results = brute_frontier(raw, prune)
        nodes, _ = oracle.parse_problem({"nodes": raw, "budget": 0})
        base = brute_peak(raw, [])
        self.assertEqual(oracle.base_peak(nodes), base)
        peaks = sorted({peak for _, peak in results})
        budgets = peaks + [peaks[0] - 1, (peaks[0] + base) // 2]
        for budget in budgets:
            want = brute_min_flops(results, budget)
            answer = oracle.solve(nodes, budget)
            where = f"budget {budget}, graph {json.dumps(raw)}"
            if want is None:
                self.assertEqual(answer["status"], "infeasible", where)
                continue
            self.assertEqual(answer["status"], "optimal", where)
            self.assertEqual(answer["extra_flops"], want, where)
            self.assertLessEqual(answer["peak"], budget, where)
            schedule = [tuple(p) for p in answer["recompute"]]
            self.assertEqual(brute_peak(raw, schedule), answer["peak"], where)
        least = oracle.solve_min_budget(nodes)
        self.assertEqual(least["budget"], peaks[0])
        self.assertEqual(least["extra_flops"], brute_min_flops(results, peaks[0]))
        return len(candidates)

    def test_random_dags(self):
        rng = random.Random(13)
        checked = 0
        while checked < 60:
            raw = random_dag(rng, rng.randint(3, 7))
            if len(brute_candidates(raw, prune=False)) > 12:
                continue  # keeps the enumeration at most 4096 sets
            self.check(raw)
            checked += 1

    def test_training_like_graphs(self):
        rng = random.Random(5)
        checked = 0
        while checked < 10:
            raw = training_dag(rng, rng.choice([2, 3]))
            if len(brute_candidates(raw, prune=True)) > 14:
                continue
            self.check(raw, prune=True)
            checked += 1

    def test_the_milp_counts_memory_exactly(self):
        # For random schedules, the MILP with R and S fixed to the schedule's values must meet
        # a budget equal to the schedule's simulated peak, and not one byte less: its memory
        # rows count neither more nor less than the simulation.
        rng = random.Random(21)
        for _ in range(40):
            raw = random_dag(rng, rng.randint(3, 10))
            nodes, _ = oracle.parse_problem({"nodes": raw, "budget": 0})
            candidates = brute_candidates(raw, prune=False)
            for _ in range(4):
                chosen = [c for c in candidates if rng.random() < 0.3]
                pairs = oracle.prune_unread(nodes, chosen)
                peak = oracle.simulate(nodes, oracle.execution_order(nodes, pairs))
                self.assertEqual(brute_peak(raw, pairs), peak)
                flops = sum(raw[v]["flops"] for _, v in pairs)
                for budget, feasible in ((peak, True), (peak - 1, False)):
                    model = oracle.RematMilp(nodes, budget, 1, 1, minimize_peak=False)
                    h = model.builder.to_highs(60)
                    for col, value in model.start_values(pairs).items():
                        h.changeColBounds(col, value, value)
                    h.run()
                    status = h.getModelStatus()
                    where = f"pairs {pairs}, budget {budget}, graph {json.dumps(raw)}"
                    if feasible:
                        self.assertEqual(status, highspy.HighsModelStatus.kOptimal, where)
                        self.assertAlmostEqual(h.getInfo().objective_function_value, flops)
                    else:
                        self.assertEqual(status, highspy.HighsModelStatus.kInfeasible, where)

    def test_chains(self):
        rng = random.Random(7)
        for length in range(2, 6):
            raw = [graph_input(rng.choice([1, 4]))]
            for i in range(1, length + 1):
                raw.append(
                    node(rng.choice([4, 8, 12]), flops=rng.randint(0, 9), deps=[i - 1],
                         output=i == length)
                )
            self.check(raw)


# ----------------------------------------------------------------------------------------------


LIMIT = 120  # seconds per oracle call in the timings


def timings(seed, kinds):
    """Solve times on random DAGs and forward/backward graphs of about 20, 30 and 40 nodes, at
    90/70/50% of the base peak and at the smallest reachable peak (--min-budget: both solves),
    each call limited to LIMIT seconds. Prints a Markdown table."""
    makers = {
        "random": lambda rng, n: random_dag(rng, n),
        "training": lambda rng, n: training_dag(rng, (n - 2) // 2),
    }
    print("| graph | nodes | budget (bytes of base peak) | status | extra (bound) / graph flops "
          "| seconds |")
    print("|---|---|---|---|---|---|")
    for kind in kinds:
        rng = random.Random(seed)  # each kind's graphs alike whether run alone or not
        for n_nodes in (20, 30, 40):
            for _ in range(2):
                raw = makers[kind](rng, n_nodes)
                nodes, _ = oracle.parse_problem({"nodes": raw, "budget": 0})
                base = oracle.base_peak(nodes)
                started = time.perf_counter()
                least = oracle.solve_min_budget(nodes, time_limit=LIMIT)
                rows = [("min", least, time.perf_counter() - started)]
                for frac in (0.9, 0.7, 0.5):
                    budget = int(base * frac)
                    label = f"{int(frac * 100)}%"
                    if budget < least["budget"]:
                        rows.append((label, None, 0.0))
                        continue
                    started = time.perf_counter()
                    answer = oracle.solve(nodes, budget, time_limit=LIMIT)
                    rows.append((label, answer, time.perf_counter() - started))
                for label, answer, seconds in rows:
                    head = f"| {kind} | {len(raw)} | {label}"
                    if answer is None:
                        print(f"{head} | below the smallest peak | - | - |")
                        continue
                    extra = answer["extra_flops"]
                    if answer["status"] != "optimal":
                        extra = f"{extra} ({answer['flops_lower_bound']})"
                    budget = f"{answer['budget']} of {base}"
                    if label == "min" and answer["peak_lower_bound"] != answer["budget"]:
                        budget += f", the least >= {answer['peak_lower_bound']}"
                    print(
                        f"{head} ({budget}) | {answer['status']} "
                        f"| {extra} / {answer['graph_flops']} | {seconds:.2f} |",
                        flush=True,
                    )


if __name__ == "__main__":
    if "--timings" in sys.argv:
        seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
        kinds = sys.argv[sys.argv.index("--kind") + 1:][:1] if "--kind" in sys.argv else None
        timings(seed, kinds or ["random", "training"])
    else:
        unittest.main()
