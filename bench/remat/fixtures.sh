#!/usr/bin/env bash
# Regenerates tests/fixtures/remat_oracle.json: the exact oracle's answers that
# tests/remat_oracle.rs compares memc with, keyed by a hash of each problem (the random DAG in
# memc's base schedule, and the budget). Run it when memc's base schedule of those DAGs changes
# (the test then calls the oracle for the problems it does not find, and says so when it
# cannot). It solves the asserted sets (ten DAGs of 12-24 ops, nine of 30-40 ops) and the
# larger sweep (REMAT_SEEDS=24 REMAT_SPAN=29), so that the sweep needs no oracle either: about
# 25 minutes on 2 cores, most of it HiGHS on the 35-40-op graphs.
#
#   bash bench/remat/fixtures.sh
set -eu
cd "$(dirname "$0")/../.."
[ -x .venv/bin/python ] || { echo "fixtures.sh: needs .venv with highspy (scripts/test installs it)" >&2; exit 1; }
rm -f tests/fixtures/remat_oracle.json
export REMAT_ORACLE_WRITE=1
cargo test --locked --test remat_oracle -- --exact remat_is_near_the_exact_optimum_at_40_ops
cargo test --locked --test remat_oracle -- --exact remat_is_near_the_exact_optimum
REMAT_SEEDS=24 REMAT_SPAN=29 cargo test --locked --test remat_oracle -- --exact remat_is_near_the_exact_optimum --nocapture
