#!/usr/bin/env python3
"""Exact rematerialization oracle: the fewest extra FLOPs that fit a graph's peak memory under a
budget, over a fixed schedule, by a Checkmate-style MILP (Jain et al., "Checkmate: Breaking the
Memory Wall with Optimal Tensor Rematerialization", MLSys 2020) solved with HiGHS.

It is a test oracle for memc's remat pass and shares no code with it.

Usage:
    .venv/bin/python bench/remat/oracle.py PROBLEM.json [--time-limit SECONDS]
    .venv/bin/python bench/remat/oracle.py PROBLEM.json --min-budget [--time-limit SECONDS]
    ... | .venv/bin/python bench/remat/oracle.py - [...]          (the problem on stdin)

The problem (JSON):
    {"nodes": [{"name": "%3", "size": 4096, "flops": 8192, "deps": [0, 1],
                "recompute": true, "output": false, "scratch": 0}, ...],
     "budget": 123456}
Nodes are in the schedule's order; `deps` are indices of earlier nodes (a set). A node with no
deps and `recompute: false` is a graph input: in memory from the start of the run until its last
read, never computed (an optional `"input": true|false` overrides this rule). Every other node is
computed once at its own place in the order ("its stage"); a node with `recompute: true` may also
be recomputed in later stages. `output: true` values must be in memory at the end of the run.
`scratch` bytes are live only while the node runs. `budget` is ignored with --min-budget.

The answer (JSON on stdout, one line):
    {"status": "optimal" | "infeasible" | "time_limit",
     "extra_flops": int | null,   # FLOPs of the recomputations (null: no schedule found)
     "peak": int | null,          # the schedule's peak, by direct simulation, not from the MILP
     "base_peak": int,            # the peak without recomputation, by direct simulation
     "recompute": [[stage, node], ...],  # node recomputed just before node `stage` runs
                                  # (stage len(nodes): after the last node), in run order
     "solve_seconds": float,      # HiGHS time (both solves with --min-budget)
     "budget": int,               # the budget solved for (with --min-budget: the smallest peak)
     "flops_lower_bound": int | null,  # HiGHS's bound on extra_flops (== extra_flops if optimal)
     "graph_flops": int,          # the FLOPs of one computation of every computed node
     "peak_lower_bound": int}     # --min-budget only: no schedule peaks lower (== budget
                                  # when the status is optimal)
Exit status 0 with any of the three statuses; 2 for a malformed problem (message on stderr);
3 if HiGHS fails or the solution fails the oracle's own check (message on stderr).

The model (the schedule class the optimum is taken over) is Checkmate's with a fixed order:
stage s runs, in the given order, the recomputations chosen for it and then node s itself; a
final stage after the last node may recompute what outputs need; a value is read from its
latest computation; every value is freed right after its last read (an output's last
computation is kept to the end). The memory while a node runs is the sum of the
sizes of the values held plus that node's scratch. Recomputations run in the given topological
order inside a stage, at most once per stage: schedules that interleave recomputation chains
differently are outside the class, so another remat pass can beat this "optimum".
"""

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass

import highspy
import numpy as np


class ProblemError(Exception):
    """A malformed problem: the message names the node and the field."""


@dataclass(frozen=True)
class Node:
    name: str
    size: int
    flops: int
    deps: tuple  # sorted, distinct indices of earlier nodes
    recompute: bool
    output: bool
    scratch: int
    is_input: bool


def _int_field(raw, idx, key, default=None):
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProblemError(f"node {idx}: `{key}` must be a non-negative integer, got {value!r}")
    return value


def _bool_field(raw, idx, key, default):
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ProblemError(f"node {idx}: `{key}` must be true or false, got {value!r}")
    return value


def parse_problem(obj, need_budget=True):
    """Checks a decoded problem and returns (nodes, budget); budget is None when absent and not
    needed. Raises ProblemError with the offending node and field."""
    if not isinstance(obj, dict) or not isinstance(obj.get("nodes"), list):
        raise ProblemError("the problem must be an object with a `nodes` list")
    nodes = []
    for idx, raw in enumerate(obj["nodes"]):
        if not isinstance(raw, dict):
            raise ProblemError(f"node {idx}: must be an object")
        deps = raw.get("deps", [])
        if not isinstance(deps, list):
            raise ProblemError(f"node {idx}: `deps` must be a list of node indices")
        for dep in deps:
            if isinstance(dep, bool) or not isinstance(dep, int) or not 0 <= dep < idx:
                raise ProblemError(
                    f"node {idx}: dep {dep!r} is not the index of an earlier node "
                    f"(nodes are in schedule order)"
                )
        recompute = _bool_field(raw, idx, "recompute", False)
        is_input = _bool_field(raw, idx, "input", not deps and not recompute)
        if is_input and deps:
            raise ProblemError(f"node {idx}: a graph input (`input: true`) cannot have deps")
        if is_input and recompute:
            raise ProblemError(f"node {idx}: a graph input (`input: true`) cannot be recomputed")
        name = raw.get("name", f"#{idx}")
        nodes.append(
            Node(
                name=str(name),
                size=_int_field(raw, idx, "size"),
                flops=_int_field(raw, idx, "flops", 0),
                deps=tuple(sorted(set(deps))),
                recompute=recompute,
                output=_bool_field(raw, idx, "output", False),
                scratch=_int_field(raw, idx, "scratch", 0),
                is_input=is_input,
            )
        )
    budget = obj.get("budget")
    if budget is None and not need_budget:
        return nodes, None
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ProblemError(f"`budget` must be a non-negative integer (bytes), got {budget!r}")
    return nodes, budget


# ----------------------------------------------------------------------------------------------
# Direct simulation: the ground truth the MILP's answer is checked against.


def _tagged_order(nodes, recompute_pairs):
    """The computations in run order as (node, pair): every computed node at its own stage
    (pair None), preceded by that stage's recomputations (pair (stage, node)) in node order."""
    by_stage = {}
    for stage, node in recompute_pairs:
        if not 0 <= node < len(nodes) or not nodes[node].recompute:
            raise ValueError(f"node {node} is recomputed but cannot be")
        by_stage.setdefault(stage, set()).add(node)
    order = []
    for idx, node in enumerate(nodes):
        if node.is_input:
            if idx in by_stage:
                raise ValueError(f"recomputation scheduled at input {idx}, which has no stage")
            continue
        if any(v >= idx for v in by_stage.get(idx, ())):
            raise ValueError(f"recomputation at stage {idx} of a node not before it")
        order.extend((v, (idx, v)) for v in sorted(by_stage.get(idx, ())))
        order.append((idx, None))
    final = len(nodes)  # the final stage, after the last node
    order.extend((v, (final, v)) for v in sorted(by_stage.get(final, ())))
    if any(stage > final or stage < 0 for stage in by_stage):
        raise ValueError("recomputation scheduled at a stage that does not exist")
    return order


def execution_order(nodes, recompute_pairs):
    """The node indices computed, in run order, for the (stage, node) recomputations."""
    return [v for v, _ in _tagged_order(nodes, recompute_pairs)]


def _instances(nodes, order):
    """Each computation (and each input) as a held value: [node, first moment, last moment].
    Moment -1 is the start of the run, 0..len(order)-1 the computations, len(order) the end."""
    end = len(order)
    latest = {}
    held = []
    for idx, node in enumerate(nodes):
        if node.is_input:
            latest[idx] = len(held)
            held.append([idx, -1, -1])
    for moment, idx in enumerate(order):
        node = nodes[idx]
        if node.is_input:
            raise ValueError(f"input {idx} computed at moment {moment}")
        for dep in node.deps:
            if dep not in latest:
                raise ValueError(f"node {idx} at moment {moment} reads {dep} before it exists")
            held[latest[dep]][2] = moment
        latest[idx] = len(held)
        held.append([idx, moment, moment])
    for idx, node in enumerate(nodes):
        if node.output:
            if idx not in latest:
                raise ValueError(f"output {idx} is never computed")
            held[latest[idx]][2] = end
    # An input that is never read and is no output is never held.
    return [h for h in held if not (h[1] == -1 and h[2] == -1)]


def simulate(nodes, order):
    """The peak memory (bytes) of running `order` (node indices): at each moment the sizes of
    the values held (from their computation to their last read; the last computation of an
    output to the end) plus the running node's scratch. Raises ValueError on an invalid order."""
    end = len(order)
    delta = [0] * (end + 3)  # moment m at delta[m + 1]
    for idx, first, last in _instances(nodes, order):
        delta[first + 1] += nodes[idx].size
        delta[last + 2] -= nodes[idx].size
    peak, live = 0, 0
    for moment in range(-1, end + 1):
        live += delta[moment + 1]
        scratch = nodes[order[moment]].scratch if 0 <= moment < end else 0
        peak = max(peak, live + scratch)
    return peak


def prune_unread(nodes, recompute_pairs):
    """Drops recomputations whose value is never read (and is not an output's last computation),
    until none is left: they only add memory and FLOPs."""
    pairs = sorted(set(recompute_pairs))
    while True:
        tagged = _tagged_order(nodes, pairs)
        held = _instances(nodes, [v for v, _ in tagged])
        unread = {first for _, first, last in held if first == last}
        keep = [pair for moment, (_, pair) in enumerate(tagged) if pair and moment not in unread]
        if len(keep) == len(pairs):
            return pairs
        pairs = keep


def base_peak(nodes):
    """The peak of the plain schedule (no recomputation)."""
    return simulate(nodes, execution_order(nodes, []))


# ----------------------------------------------------------------------------------------------
# The MILP.


class _Builder:
    """Collects a MILP row by row. Expressions are dicts {column: coefficient} plus a constant."""

    def __init__(self):
        self.lower, self.upper, self.cost, self.integer = [], [], [], []
        self.rows = []  # (lower, upper, {col: coef})

    def column(self, lower, upper, cost=0.0, integer=False):
        self.lower.append(lower)
        self.upper.append(upper)
        self.cost.append(cost)
        self.integer.append(integer)
        return len(self.lower) - 1

    def row(self, terms, lower, upper):
        """lower <= sum(terms) <= upper; `terms` is a list of (value, coefficient) where a value
        is a column index or a constant ("c", number)."""
        coefs, const = {}, 0.0
        for value, coef in terms:
            if isinstance(value, tuple):
                const += value[1] * coef
            else:
                coefs[value] = coefs.get(value, 0.0) + coef
        coefs = {col: c for col, c in coefs.items() if c != 0.0}
        lo, hi = lower - const, upper - const
        if not coefs:
            if lo > 1e-9 or hi < -1e-9:
                self.rows.append((lo, hi, {}))  # an infeasible constant row: HiGHS reports it
            return
        self.rows.append((lo, hi, coefs))

    def to_highs(self, time_limit, presolve=True):
        lp = highspy.HighsLp()
        lp.num_col_ = len(self.lower)
        lp.num_row_ = len(self.rows)
        lp.col_cost_ = np.array(self.cost, dtype=np.double)
        lp.col_lower_ = np.array(self.lower, dtype=np.double)
        lp.col_upper_ = np.array(self.upper, dtype=np.double)
        lp.row_lower_ = np.array([r[0] for r in self.rows], dtype=np.double)
        lp.row_upper_ = np.array([r[1] for r in self.rows], dtype=np.double)
        starts, index, value = [0], [], []
        for _, _, coefs in self.rows:
            for col in sorted(coefs):
                index.append(col)
                value.append(coefs[col])
            starts.append(len(index))
        lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
        lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
        lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
        lp.a_matrix_.value_ = np.array(value, dtype=np.double)
        lp.integrality_ = [
            highspy.HighsVarType.kInteger if i else highspy.HighsVarType.kContinuous
            for i in self.integer
        ]
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("time_limit", float(max(time_limit, 0.01)))
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("random_seed", 0)
        if presolve:
            # HiGHS 1.13+ presolve's solution enumeration drops equality cliques wrongly
            # (ERGO-Code/HiGHS#3216): on these models it ends in "Solve error" with an
            # untransformed violation. Rule 16 (bit 65536) switches it off.
            h.setOptionValue("presolve_rule_off", 1 << 16)
        else:
            h.setOptionValue("presolve", "off")
        h.passModel(lp)
        return h


ZERO, ONE = ("c", 0), ("c", 1)


class RematMilp:
    """Checkmate's MILP over the computed nodes' stages, plus a final stage.

    Stage s (0..n-1) computes node C[s] (C: the computed nodes in order; inputs have no stage);
    stage n, after the last node, computes nothing of its own: there outputs may be recomputed
    so that they are present at the end. R[s,v] = 1: v is computed in stage s (fixed 1 for
    v = C[s]); S[s,v] = 1: v is held from stage s-1 into stage s (S[0,v] = 1 for used inputs;
    S[n+1,v] = 1 for outputs: the end of the run); FREE[s,(u,k)] = 1: u is freed right after k
    runs in stage s; U[s,p] the memory while C[p] runs in stage s (its output included; its
    scratch is added in the budget row). Constraints:
      S[s+1,v] <= S[s,v] + R[s,v]                  (a held value was held or computed before)
      R[s,k] <= R[s,u] + S[s,u]   for u in deps(k) (a computation's inputs are present)
      FREE[s,(u,k)] = R[s,k] * (1 - S[s+1,u]) * prod_{j consumer of u after k in stage s}
                      (1 - R[s,j]), linearized as FREE <= each factor and
                      FREE >= R[s,k] - S[s+1,u] - sum_j R[s,j]  (FREE continuous in [0, 1]:
                      it is integral whenever R and S are)
      U[s,first] = sum_v S[s,v] M_v + R[s,C[first]] M_C[first]
      U[s,next] = U[s,p] + R[s,C[next]] M_C[next] - sum_{u in deps(C[p])} M_u FREE[s,(u,C[p])]
      U[s,p] + scratch_C[p] R[s,C[p]] <= budget
    minimizing sum_{s, v != C[s]} flops_v R[s,v]. Checkmate's FREE upper bound is one
    aggregated row (max_hazards * (1 - FREE) >= hazards); the rows per factor here are the same
    on integral points and tighter on fractional ones. Variables that can never matter are fixed
    to 0 instead of created: R[s,v] and S[s,v] for s past v's reach (below). Memory is counted
    in units of the gcd of all sizes and scratches, FLOPs in units of their gcd, so the model's
    numbers are small integers.
    """

    def __init__(self, nodes, budget_units, mem_unit, flop_unit, minimize_peak):
        self.nodes = nodes
        self.computed = [i for i, n in enumerate(nodes) if not n.is_input]
        n = len(self.computed)
        self.n_stages = n + 1
        self.stage_of = stage_of = {v: s for s, v in enumerate(self.computed)}
        consumers = {i: [] for i in range(len(nodes))}
        for k, node in enumerate(nodes):
            for u in node.deps:
                consumers[u].append(k)
        # reach[v]: the last stage at which a copy of v can be read: n (the final stage) for
        # an output, else the latest stage of a consumer k, or k's own reach where k may be
        # recomputed. A copy made or held later is dead: no optimum needs it.
        reach = {}
        for v in reversed(range(len(nodes))):
            last = n if nodes[v].output else -1
            for k in consumers[v]:
                last = max(last, stage_of[k], reach[k] if nodes[k].recompute else -1)
            reach[v] = last
        self.inputs = [
            i for i, node in enumerate(nodes) if node.is_input and (consumers[i] or node.output)
        ]
        b = _Builder()
        self.builder = b
        size = [node.size // mem_unit for node in nodes]
        scratch = [node.scratch // mem_unit for node in nodes]

        self.R, self.S = {}, {}
        for s in range(self.n_stages):
            for v in self.computed[:s]:
                if nodes[v].recompute and reach[v] >= s:
                    cost = 0 if minimize_peak else nodes[v].flops // flop_unit
                    self.R[s, v] = b.column(0, 1, cost, integer=True)
            if s > 0:
                for v in self.computed[:s] + self.inputs:
                    if reach[v] >= s:
                        self.S[s, v] = b.column(0, 1, integer=True)
        self.peak_col = b.column(0, math.inf, 1.0) if minimize_peak else None
        r, s_ = self._r, self._s

        # S[s+1,v] <= S[s,v] + R[s,v].
        for s in range(self.n_stages):
            for v in self.computed[: s + 1] + self.inputs:
                nxt = s_(s + 1, v)
                if nxt is not ZERO:
                    b.row([(nxt, 1), (s_(s, v), -1), (r(s, v), -1)], -math.inf, 0)

        for s in range(self.n_stages):
            active = [v for v in self.computed[: s + 1] if r(s, v) is not ZERO]
            # R[s,k] <= R[s,u] + S[s,u].
            for k in active:
                for u in nodes[k].deps:
                    b.row([(r(s, k), 1), (r(s, u), -1), (s_(s, u), -1)], -math.inf, 0)
            # FREE and the memory recurrence along the stage's active positions.
            held = [(s_(s, v), size[v]) for v in self.computed[:s] + self.inputs]
            prev_u, prev_k = None, None
            for k in active:
                u_col = b.column(0, math.inf)
                terms = [(u_col, 1), (r(s, k), -size[k])]
                if prev_u is None:
                    terms += [(val, -m) for val, m in held]
                else:
                    terms.append((prev_u, -1))
                    for dep in nodes[prev_k].deps:
                        free = self._free(s, dep, prev_k, active)
                        if free is not None:
                            terms.append((free, size[dep]))
                b.row(terms, 0, 0)
                limit = [(u_col, 1), (r(s, k), scratch[k])]
                if self.peak_col is None:
                    b.row(limit, -math.inf, budget_units)
                else:
                    b.row(limit + [(self.peak_col, -1)], -math.inf, 0)
                prev_u, prev_k = u_col, k

    def _r(self, s, v):
        """R[s,v]: a column or a constant."""
        if s < len(self.computed) and self.computed[s] == v:
            return ONE
        return self.R.get((s, v), ZERO)

    def _s(self, s, v):
        """S[s,v]: a column or a constant."""
        if s == self.n_stages:
            return ONE if self.nodes[v].output else ZERO
        if s == 0:
            return ONE if v in self.inputs else ZERO
        return self.S.get((s, v), ZERO)

    def _free(self, s, u, k, active):
        """The FREE[s,(u,k)] column, or None where u is certainly not freed after k."""
        keep = self._s(s + 1, u)
        later = [j for j in active if j > k and u in self.nodes[j].deps]
        if keep is ONE or any(self._r(s, j) is ONE for j in later):
            return None
        b = self.builder
        free = b.column(0, 1)
        b.row([(free, 1), (self._r(s, k), -1)], -math.inf, 0)
        b.row([(free, 1), (keep, 1)], -math.inf, 1)
        for j in later:
            b.row([(free, 1), (self._r(s, j), 1)], -math.inf, 1)
        hazards = [(keep, 1)] + [(self._r(s, j), 1) for j in later]
        b.row([(free, 1), (self._r(s, k), -1)] + hazards, 0, math.inf)
        return free

    def start_values(self, pairs):
        """The R and S columns of the schedule with the (stage, node) recomputations `pairs`
        (the tests fix them to check that the MILP counts memory as the simulation does):
        S[s,v] = 1 where v's copy existing when stage s begins is read in
        stage s or later, or is an output's last copy."""
        tagged = _tagged_order(self.nodes, pairs)
        final = len(self.nodes)
        stage_index = {node: s for s, node in enumerate(self.computed)}
        stage_index[final] = len(self.computed)
        # The stage of each moment, and the first moment of each stage.
        moment_stage = [stage_index[pair[0] if pair else v] for v, pair in tagged]
        stage_start = [
            next((m for m, st in enumerate(moment_stage) if st >= s), len(tagged))
            for s in range(self.n_stages)
        ]
        values = {}
        wanted = {(stage_index[stage], v) for stage, v in pairs}
        for key, col in self.R.items():
            values[col] = 1.0 if key in wanted else 0.0
        held = set()
        for v, first, last in _instances(self.nodes, [v for v, _ in tagged]):
            for s, begin in enumerate(stage_start):
                if first < begin <= last:
                    held.add((s, v))
        for key, col in self.S.items():
            values[col] = 1.0 if key in held else 0.0
        return values

    def recompute_pairs(self, values):
        """(stage, node) for every R[s,v] set in the solution `values`; the stage is named by
        its own node's index, the final stage by len(nodes)."""
        def stage_name(s):
            return self.computed[s] if s < len(self.computed) else len(self.nodes)

        return sorted((stage_name(s), v) for (s, v), col in self.R.items() if values[col] > 0.5)


def _gcd_units(values):
    g = 0
    for v in values:
        g = math.gcd(g, v)
    return g or 1


@dataclass
class _Solve:
    status: str  # "optimal" | "infeasible" | "time_limit"
    pairs: list  # None when no solution
    objective: float
    bound: float
    seconds: float


def _run(nodes, budget, time_limit, minimize_peak):
    """Builds and solves one MILP. `budget` in bytes (ignored when minimizing the peak)."""
    mem_unit = _gcd_units([n.size for n in nodes] + [n.scratch for n in nodes])
    flop_unit = _gcd_units([n.flops for n in nodes])
    budget_units = None if minimize_peak else budget // mem_unit
    model = RematMilp(nodes, budget_units, mem_unit, flop_unit, minimize_peak)
    start = time.perf_counter()
    h = model.builder.to_highs(time_limit)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kSolveError:
        # A presolve/postsolve failure: solve again without presolve.
        remaining = time_limit - (time.perf_counter() - start)
        h = model.builder.to_highs(remaining, presolve=False)
        h.run()
        status = h.getModelStatus()
    seconds = time.perf_counter() - start
    info = h.getInfo()
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    unit = mem_unit if minimize_peak else flop_unit
    if status == highspy.HighsModelStatus.kOptimal:
        name = "optimal"
    elif status in (
        highspy.HighsModelStatus.kInfeasible,
        highspy.HighsModelStatus.kUnboundedOrInfeasible,
    ):
        return _Solve("infeasible", None, None, None, seconds)
    elif status == highspy.HighsModelStatus.kTimeLimit:
        name = "time_limit"
    else:
        raise RuntimeError(f"HiGHS stopped with {h.modelStatusToString(status)}")
    if not has_solution:
        return _Solve(name, None, None, info.mip_dual_bound * unit, seconds)
    values = list(h.getSolution().col_value)
    pairs = model.recompute_pairs(values)
    objective = info.objective_function_value * unit
    return _Solve(name, pairs, objective, info.mip_dual_bound * unit, seconds)


class SelfCheckError(Exception):
    """The MILP's solution failed the direct simulation: a bug in the oracle."""


def _answer(nodes, budget, result, seconds, base):
    graph_flops = sum(n.flops for n in nodes if not n.is_input)
    answer = {
        "status": result.status,
        "extra_flops": None,
        "peak": None,
        "base_peak": base,
        "recompute": [],
        "solve_seconds": round(seconds, 4),
        "budget": budget,
        "flops_lower_bound": None,
        "graph_flops": graph_flops,
    }
    if result.bound is not None and math.isfinite(result.bound) and result.status != "infeasible":
        answer["flops_lower_bound"] = max(0, math.ceil(result.bound - 1e-6))
    if result.pairs is None:
        return answer
    pairs = prune_unread(nodes, result.pairs)
    peak = simulate(nodes, execution_order(nodes, pairs))
    extra = sum(nodes[v].flops for _, v in pairs)
    if peak > budget:
        raise SelfCheckError(
            f"the MILP's schedule peaks at {peak} bytes by simulation, over the budget {budget}"
        )
    if extra > result.objective * (1 + 1e-9) + 0.5:
        raise SelfCheckError(
            f"the MILP's schedule costs {extra} extra FLOPs, its objective says {result.objective}"
        )
    if result.status == "optimal":
        answer["flops_lower_bound"] = extra
    answer.update(extra_flops=extra, peak=peak, recompute=[list(p) for p in pairs])
    return answer


def solve(nodes, budget, time_limit=60.0):
    """The fewest extra FLOPs with a peak <= `budget` bytes: the answer dict described in the
    module doc. Raises SelfCheckError if the solution fails the simulation."""
    base = base_peak(nodes)
    if all(n.is_input for n in nodes):
        # Nothing runs: the inputs that are outputs are held from start to end; no MILP.
        status = "optimal" if base <= budget else "infeasible"
        result = _Solve(status, [] if base <= budget else None, 0.0, 0.0, 0.0)
        return _answer(nodes, budget, result, 0.0, base)
    result = _run(nodes, budget, time_limit, minimize_peak=False)
    return _answer(nodes, budget, result, result.seconds, base)


def solve_min_budget(nodes, time_limit=60.0):
    """The smallest peak reachable with any recomputation (MILP minimizing the peak), then the
    fewest extra FLOPs at that peak. `budget` in the answer is that peak; the status is the worse
    of the two solves'."""
    base = base_peak(nodes)
    if all(n.is_input for n in nodes):
        return solve(nodes, base, time_limit)
    started = time.perf_counter()
    first = _run(nodes, None, time_limit, minimize_peak=True)
    peak_bound = first.bound if first.bound is not None and math.isfinite(first.bound) else 0
    peak_lower_bound = max(0, math.ceil(peak_bound - 1e-6))
    if first.pairs is None:
        # No schedule at all within the time limit (the problem always has one: no remat).
        result = _Solve(first.status, [], 0.0, None, first.seconds)
        answer = _answer(nodes, base, result, first.seconds, base)
        answer.update(status="time_limit", peak_lower_bound=peak_lower_bound)
        return answer
    pairs = prune_unread(nodes, first.pairs)
    min_peak = simulate(nodes, execution_order(nodes, pairs))
    if first.status == "optimal" and abs(min_peak - first.objective) > 0.5:
        raise SelfCheckError(
            f"the peak-minimizing schedule peaks at {min_peak} by simulation, "
            f"the MILP says {first.objective}"
        )
    remaining = time_limit - (time.perf_counter() - started)
    # No MIP start from the first solve here: with one, HiGHS 1.16 returned on a presolved-away
    # model the start's columns beside an objective of 0.
    second = _run(nodes, min_peak, remaining, minimize_peak=False)
    if second.status == "infeasible":
        raise SelfCheckError(f"the MILP calls the peak {min_peak} of its own schedule infeasible")
    if second.pairs is None:
        # Out of time: the first solve's schedule meets min_peak.
        extra = sum(nodes[v].flops for _, v in pairs)
        second = _Solve("time_limit", pairs, float(extra), second.bound, second.seconds)
    answer = _answer(nodes, min_peak, second, first.seconds + second.seconds, base)
    if first.status != "optimal":
        answer["status"] = "time_limit"
    answer["peak_lower_bound"] = min_peak if first.status == "optimal" else peak_lower_bound
    return answer


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Exact rematerialization oracle (Checkmate-style MILP with HiGHS)."
    )
    parser.add_argument(
        "problem", nargs="?", default="-", help="problem JSON file, or - for stdin (the default)"
    )
    parser.add_argument("--time-limit", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument(
        "--min-budget",
        action="store_true",
        help="find the smallest reachable peak (the problem's budget is ignored)",
    )
    args = parser.parse_args(argv)
    # HiGHS prints a banner on file descriptor 1: send everything written there to stderr and
    # keep a private copy of stdout for the answer.
    out = os.fdopen(os.dup(1), "w")
    sys.stdout.flush()
    os.dup2(2, 1)
    try:
        if args.problem == "-":
            text = sys.stdin.read()
        else:
            with open(args.problem) as f:
                text = f.read()
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            raise ProblemError(f"not JSON: {e}") from e
        nodes, budget = parse_problem(obj, need_budget=not args.min_budget)
        if args.time_limit <= 0:
            raise ProblemError("--time-limit must be positive")
    except (OSError, ProblemError) as e:
        where = "stdin" if args.problem == "-" else args.problem
        print(f"oracle.py: {where}: {e}", file=sys.stderr)
        return 2
    try:
        if args.min_budget:
            answer = solve_min_budget(nodes, args.time_limit)
        else:
            answer = solve(nodes, budget, args.time_limit)
    except SelfCheckError as e:
        print(f"oracle.py: self-check failed (an oracle bug): {e}", file=sys.stderr)
        return 3
    except RuntimeError as e:
        print(f"oracle.py: {e}", file=sys.stderr)
        return 3
    out.write(json.dumps(answer) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
