#!/usr/bin/env bash
# Issue "tensor cores", accuracy: the Austen char LM of the README's GPU demo (scripts/demo.sh: 2 x 512
# LSTM, embedding 128, window 100 x 64 streams, AdamW 2e-3, weight decay 0.1, cosine schedule, clip 1.0,
# dropout 0.25, seed 0) trained to the same step count in each precision -- fp32, tf32 and bf16 with
# only the once-per-window GEMMs on tensor cores, then tf32 and bf16 with the loops' products on them
# too (RNNGRAPH_LOOP=mma=1) -- and scored on the test half of Persuasion with `rnngraph eval`.
# Writes $OUT/precision-austen.json (test bits/char, training seconds and the last logged line of
# each run) and the logs.
#
#   on the GPU machine (bring .whl and .cache/rg with the tree):  STEPS=4000 bash bench/precision_austen.sh
# STEPS (default 4000: about a minute of training a run on an H200, the demo's 14,000 take 183 s); SEED (default 0);
# RUNS (default "fp32 tf32 bf16 tf32:mma bf16:mma").
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
for run in ${RUNS:-fp32 tf32 bf16 tf32:mma bf16:mma}; do
  p=${run%%:*}; name=${run/:/-}; loop=""
  [ "$run" != "$p" ] && loop="mma=1"
  ck=/tmp/precision-austen-ck-$name  # checkpoints stay on the machine (tens of MB each)
  rm -rf "$ck"
  echo "=== $name ($(date +%T))"
  start=$SECONDS
  RNNGRAPH_LOOP=$loop timeout 400 python3 -m rnngraph train --corpus austen --level char --cell lstm --layers 2 \
    --hidden 512 --embed 128 --window 100 --streams 64 --steps "${STEPS:-4000}" --optimizer adamw --lr 2e-3 \
    --weight-decay 0.1 --lr-schedule cosine --clip 1.0 --dropout 0.25 --device cuda --seed "${SEED:-0}" \
    --eval-every "${STEPS:-4000}" --precision "$p" --checkpoint "$ck" > "$OUT/precision-austen-train-$name.log" 2>&1
  echo "$name train_seconds $((SECONDS - start))" >> "$OUT/precision-austen-times.txt"
  tail -n 2 "$OUT/precision-austen-train-$name.log"
  RNNGRAPH_LOOP=$loop timeout 200 python3 -m rnngraph eval --checkpoint "$ck" --split test --device cuda 2>&1 \
    | tee "$OUT/precision-austen-eval-$name.log"
done
python3 - "$OUT" <<'PY'
import json, re, sys
from pathlib import Path
out = Path(sys.argv[1])
times = dict(line.split()[0::2] for line in (out / "precision-austen-times.txt").read_text().splitlines())
runs = {}
for log in sorted(out.glob("precision-austen-eval-*.log")):
    name = log.stem.removeprefix("precision-austen-eval-")
    m = re.search(r"^test ([0-9.]+) bits/char", log.read_text(), re.M)
    train = (out / f"precision-austen-train-{name}.log").read_text().strip().splitlines()
    runs[name] = {"test_bits_per_char": float(m.group(1)) if m else None, "train_seconds": int(times.get(name, -1)),
                  "last_train_line": train[-1] if train else ""}
import os
(out / "precision-austen.json").write_text(json.dumps({"benchmark": "precision_austen", "steps": int(os.environ.get("STEPS", 4000)),
                                                       "seed": int(os.environ.get("SEED", 0)), "runs": runs}, indent=1))
print(json.dumps(runs, indent=1))
PY
