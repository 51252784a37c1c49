#!/usr/bin/env bash
# The remat figures of the README: each training zoo model (and GPT inference) compiled at
# 90/80/70/60/50% of its arena; prints what `memc compile --memory-budget` says, the time of
# the "memory plan and remat" stage, and (with STEPS=1, training models) the minimum step time
# of 100 one-thread runs of the plan without and with the budget.
#
#   .venv-train/bin/python bench/training/zoo.py --out /tmp/tzoo   # the training zoo
#   cargo build --release && STEPS=1 bash bench/remat/zoo.sh /tmp/tzoo [target/tmp/ptx_zoo/gpt.onnx]
set -eu
zoo=${1:?usage: zoo.sh TRAINING_ZOO_DIR [INFERENCE_GPT_ONNX]}
memc=${MEMC:-target/release/memc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meta() { # dir expression -> one line per item
  python3 -c 'import json,sys
m = json.load(open(sys.argv[1] + "/meta.json"))
print(eval(sys.argv[2]))' "$1" "$2"
}
step() { # dir plan -> the minimum step time
  local dir=$1 plan=$2
  # shellcheck disable=SC2046 # one --input per input of step 1
  "$memc" run "$plan" --state "$dir/state0" --repeat 100 --threads 1 \
    $(meta "$dir" '" ".join(f"--input {k}={sys.argv[1]}/step1/inputs/{v}" for k, v in m["steps"][0]["inputs"].items())') 2>&1 |
    grep -oE "min [0-9.]+ ?m?s" | head -1
}
one() { # name model dir-or-empty [dims...]
  local name=$1 model=$2 dir=$3
  shift 3
  if [ -n "$dir" ] && [ -n "${STEPS:-}" ]; then
    "$memc" compile "$model" "$@" -o "$tmp/none.plan" 2>/dev/null
    echo "$name none: step $(step "$dir" "$tmp/none.plan")"
  fi
  for pct in 90 80 70 60 50; do
    local msg
    msg=$("$memc" compile "$model" "$@" --memory-budget "$pct%" --time-passes -o "$tmp/p.plan" 2>&1 |
      grep -E "memory budget|memory plan and remat" | sed -E 's/; the peak is.*//' | tr '\n' ' ')
    if [ -n "$dir" ] && [ -n "${STEPS:-}" ]; then msg="$msg step $(step "$dir" "$tmp/p.plan")"; fi
    echo "$name $pct%: $msg"
  done
}
for m in gpt bert cnn mixed linear_mse mlp; do
  d=$zoo/$m
  [ -f "$d/training_model.onnx" ] || continue
  # shellcheck disable=SC2046 # one --dim per dim of meta.json
  one "$m" "$d/training_model.onnx" "$d" $(meta "$d" '" ".join(f"--dim {k}={v}" for k, v in m["dims"].items())')
done
if [ -n "${2:-}" ]; then one gpt-inference "$2" "" --dim batch=1 --dim seq=16; fi
# The onnxruntime-style baseline: every plan the report lists turned on by hand (`--recompute`
# with every config), and only the single-op ones (onnxruntime's recompute allowlist is of
# single ops and short chains).
if [ -n "${ORT:-}" ]; then
  for m in gpt bert cnn mixed; do
    d=$zoo/$m
    [ -f "$d/training_model.onnx" ] || continue
    # shellcheck disable=SC2046
    dims=$(meta "$d" '" ".join(f"--dim {k}={v}" for k, v in m["dims"].items())')
    # shellcheck disable=SC2086
    configs=$("$memc" compile "$d/training_model.onnx" $dims --report --report-svg "$tmp/r.svg" -o "$tmp/r.plan" 2>&1 |
      grep -oE ":  [A-Za-z+]+:1:-1" | sed 's/^:  //')
    all=$(echo "$configs" | paste -sd, -)
    single=$(echo "$configs" | grep -E '^[A-Za-z]+\+:1:-1$' | paste -sd, -)
    for which in all single; do
      list=${!which}
      # shellcheck disable=SC2086
      echo "$m ORT-style ($which, $(echo "$list" | tr ',' '\n' | grep -c .) configs): $("$memc" compile "$d/training_model.onnx" $dims --recompute "$list" -o "$tmp/r.plan" 2>&1 | grep -E "^memc: --recompute" | tr '\n' ' ')"
    done
  done
fi
