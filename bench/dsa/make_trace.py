#!/usr/bin/env python3
"""Large offset-assignment traces for the planner's scaling benchmark (`bench/dsa.md`).

Usage:
  make_trace.py transformer [--layers 96] [--seed 1]   > transformer96.csv
  make_trace.py random [--buffers 60000] [--steps 20000] [--seed 1] > rand60k.csv
  make_trace.py concat FILE[@SHIFT]...                  > concat.csv

Each writes the CSV format of `../shared/bench/dsa` (`id,lower,upper,size`) to standard output.

`transformer`: one training step of a decoder-only transformer (4,096 tokens, hidden 4,096,
32 heads, bf16; 96 layers by default: 63,530 buffers, 4,953 ops). Each forward op is a step
that writes its outputs; the activations the backward pass reads stay live until the backward
op of their layer; the rest die at the next op. The backward pass walks the layers in reverse,
two steps per forward op: the first writes the input gradient (read by the next backward op),
the second, for matmuls and layer norms, a weight gradient that lives until its bucket is
all-reduced every two layers. Every step also allocates short-lived temporaries (cuBLAS workspaces, reduction
partials, shapes and scalars: 4 B to 32 MiB, most living one step). Sizes range from 4 bytes to
256 MiB (attention scores). The randomness is SplitMix64 with integer arithmetic only, and
`passes/src/plan/assign/trace.rs` generates the same trace in the tests.

`random`: buffers starting at uniform random steps, 90% living 1-5 steps and 10% up to 2,000,
sizes log-uniform from 64 B to 4 MiB (no structure: the window search and lowest floor first
meet thousands of buffers in every tight stretch).

`concat`: the given traces one after the other in time: each starts where the previous one
ended, or at step SHIFT when given as `FILE@SHIFT` (SHIFT may be negative, relative to the
previous trace's end, so traces can overlap). For example the 75,744-buffer trace of
`bench/dsa.md`:
  make_trace.py concat S_1.csv pangu_2.6B.csv S_1.csv@-20000
"""

import sys

MASK = (1 << 64) - 1


class Rng:
    """SplitMix64; `range(lo, hi)` is uniform enough in [lo, hi)."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def range(self, lo, hi):
        return lo + self.next() % (hi - lo)


TOKENS = 4096  # batch 4 x sequence 1024
HIDDEN = 4096
HEADS = 32
SEQ = 1024
BATCH = 4
VOCAB = 32000

# Tensor sizes in bytes, by kind.
SIZES = {
    "act": TOKENS * HIDDEN * 2,  # bf16 activations: 32 MiB
    "act3": TOKENS * 3 * HIDDEN * 2,  # fused QKV: 96 MiB
    "act4": TOKENS * 4 * HIDDEN * 2,  # MLP hidden: 128 MiB
    "att": BATCH * HEADS * SEQ * SEQ * 2,  # attention scores: 256 MiB
    "attmask": BATCH * HEADS * SEQ * SEQ,  # dropout mask, one byte each: 128 MiB
    "actmask": TOKENS * HIDDEN,  # 16 MiB
    "stat": TOKENS * 4,  # layer-norm mean or rstd, f32: 16 KiB
}

# The forward ops of one layer: (outputs, weight gradient kind or None). An output is
# (kind, saved): saved outputs live until the layer's backward op reads them; the others die
# after the next op reads them.
LAYER = [
    ([("act", True), ("stat", True), ("stat", True)], "ln"),  # ln1
    ([("act3", True)], "qkv"),  # qkv matmul
    ([("att", False)], None),  # q @ k^T
    ([("att", False)], None),  # scale + causal mask
    ([("att", True)], None),  # softmax
    ([("attmask", True), ("att", True)], None),  # attention dropout
    ([("act", False)], None),  # probs @ v
    ([("act", True)], None),  # merge heads
    ([("act", False)], "proj"),  # output projection
    ([("actmask", True), ("act", False)], None),  # dropout
    ([("act", True)], None),  # residual add
    ([("act", True), ("stat", True), ("stat", True)], "ln"),  # ln2
    ([("act4", True)], "fc"),  # fc1
    ([("act4", True)], None),  # gelu
    ([("act", False)], "fc"),  # fc2
    ([("actmask", True), ("act", False)], None),  # dropout
    ([("act", True)], None),  # residual add: the next layer's input
]

WEIGHT_GRAD = {
    "ln": 2 * HIDDEN * 4,
    "qkv": HIDDEN * 3 * HIDDEN * 2,
    "proj": HIDDEN * HIDDEN * 2,
    "fc": HIDDEN * 4 * HIDDEN * 2,
}


def transformer(layers, seed):
    rng = Rng(seed)
    rows = []  # (lower, upper, size)
    step = 0

    def temporaries():
        # Every step: 6-18 temporaries, most tiny and dying at once.
        for _ in range(rng.range(6, 19)):
            if rng.range(0, 100) < 85:
                size = 1 << rng.range(2, 16)  # 4 B .. 32 KiB, then up to twice that
            else:
                size = 1 << rng.range(16, 25)  # 64 KiB .. 16 MiB, then up to twice that
            size += rng.range(0, size)
            roll = rng.range(0, 100)
            if roll < 70:
                life = 1
            elif roll < 95:
                life = rng.range(2, 5)
            else:
                life = rng.range(5, 41)
            rows.append((step, step + life, size))

    # Embedding lookup: the first layer's input.
    pending = []  # (lower, size) of outputs read by the next op
    saved = []  # per layer: per op: [(lower, size)]
    rows.append((step, step + 2, SIZES["act"]))
    temporaries()
    step += 1
    for _ in range(layers):
        layer_saved = []
        for outputs, _ in LAYER:
            # This op reads the outputs of the previous op: they die here.
            for lower, size in pending:
                rows.append((lower, step + 1, size))
            pending = []
            op_saved = []
            for kind, keep in outputs:
                size = SIZES[kind]
                (op_saved if keep else pending).append((step, size))
            layer_saved.append(op_saved)
            temporaries()
            step += 1
        saved.append(layer_saved)
    # Final norm and logits, the loss and its gradient.
    for lower, size in pending:
        rows.append((lower, step + 1, size))
    logits = TOKENS * VOCAB * 2
    rows.append((step, step + 3, logits))
    temporaries()
    step += 1
    rows.append((step, step + 2, logits))  # softmax-cross-entropy gradient
    temporaries()
    step += 1
    grad_lower = step
    rows.append((step, step + 1, SIZES["act"]))  # gradient of the last layer's output
    step += 1
    buckets = []  # weight gradients waiting for their all-reduce
    for layer in reversed(range(layers)):
        for op in reversed(range(len(LAYER))):
            outputs, weight = LAYER[op]
            # Two steps per forward op. The first writes the input gradient, reading the
            # output gradient of the step before; the second writes the weight gradient (or,
            # for ops without weights, a second elementwise pass); both read the saved tensors
            # of the forward op and the output gradient, which die after the second.
            for lower, size in saved[layer][op]:
                rows.append((lower, step + 2, size))
            rows.append((grad_lower, step + 2, SIZES[outputs[0][0]]))
            grad_lower = step
            temporaries()
            step += 1
            if weight is not None:
                buckets.append((step, WEIGHT_GRAD[weight]))
            temporaries()
            step += 1
        if layer % 2 == 0:
            # All-reduce the bucket: its gradients die here.
            for lower, size in buckets:
                rows.append((lower, step + 1, size))
            buckets = []
            temporaries()
            step += 1
    rows.append((grad_lower, step + 1, SIZES["act"]))  # embedding gradient
    temporaries()
    return rows


def random_trace(buffers, steps, seed):
    rng = Rng(seed)
    rows = []
    for _ in range(buffers):
        start = rng.range(0, steps)
        life = rng.range(1, 6) if rng.range(0, 10) < 9 else rng.range(1, 2001)
        size = 1 << rng.range(6, 22)  # 64 B .. 2 MiB, then up to twice that
        size += rng.range(0, size)
        rows.append((start, start + life, size))
    return rows


def read_csv(path):
    rows = []
    with open(path) as f:
        for i, line in enumerate(f):
            line = line.strip()
            if not line or (i == 0 and line[0].isalpha()):
                continue
            _, lower, upper, size = line.split(",")
            rows.append((int(lower), int(upper), int(size)))
    return rows


def concat(specs):
    rows = []
    end = 0
    for spec in specs:
        path, _, shift = spec.partition("@")
        trace = read_csv(path)
        first = min(lower for lower, _, _ in trace)
        start = max(0, end + int(shift)) if shift else end
        rows.extend((lower - first + start, upper - first + start, size) for lower, upper, size in trace)
        end = max(end, max(upper - first + start for _, upper, _ in trace))
    return rows


def main():
    args = sys.argv[1:]
    if not args or args[0] not in ("transformer", "random", "concat"):
        sys.exit(__doc__)

    def options(opts):
        rest = args[1:]
        while rest:
            if len(rest) < 2 or rest[0] not in opts:
                sys.exit(__doc__)
            opts[rest[0]] = int(rest[1])
            rest = rest[2:]
        return opts

    if args[0] == "transformer":
        opts = options({"--layers": 96, "--seed": 1})
        rows = transformer(opts["--layers"], opts["--seed"])
    elif args[0] == "random":
        opts = options({"--buffers": 60000, "--steps": 20000, "--seed": 1})
        rows = random_trace(opts["--buffers"], opts["--steps"], opts["--seed"])
    else:
        if len(args) < 2:
            sys.exit(__doc__)
        rows = concat(args[1:])
    out = sys.stdout
    out.write("id,lower,upper,size\n")
    for i, (lower, upper, size) in enumerate(rows):
        out.write(f"{i},{lower},{upper},{size}\n")


if __name__ == "__main__":
    main()
