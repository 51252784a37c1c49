#!/usr/bin/env bash
# The remat figures of the README: each training zoo model (and GPT inference) compiled at
# 90/80/70/60/50% of its arena; prints what `memc compile --memory-budget` says and the time
# of the memory plan and remat stage.
#
#   .venv-train/bin/python bench/training/zoo.py --out /tmp/tzoo   # the training zoo
#   cargo build --release && bash bench/remat/zoo.sh /tmp/tzoo [target/ptx_zoo/gpt.onnx]
set -eu
zoo=${1:?usage: zoo.sh TRAINING_ZOO_DIR [INFERENCE_GPT_ONNX]}
memc=${MEMC:-target/release/memc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
one() { # name model [dims...]
  local name=$1 model=$2
  shift 2
  for pct in 90 80 70 60 50; do
    local msg
    msg=$("$memc" compile "$model" "$@" --memory-budget "$pct%" --time-passes -o "$tmp/p.plan" 2>&1 |
      grep -E "memory budget|memory plan and remat" | sed -E 's/; the peak is.*//' | tr '\n' ' ')
    echo "$name $pct%: $msg"
  done
}
for m in gpt bert cnn mixed linear_mse mlp; do
  [ -f "$zoo/$m/training_model.onnx" ] || continue
  # shellcheck disable=SC2046 # one --dim per dim of meta.json
  one "$m" "$zoo/$m/training_model.onnx" $(python3 -c 'import json,sys
for k, v in json.load(open(sys.argv[1]))["dims"].items(): print(f"--dim {k}={v}")' "$zoo/$m/meta.json")
done
if [ -n "${2:-}" ]; then one gpt-inference "$2" --dim batch=1 --dim seq=16; fi
