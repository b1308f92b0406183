#!/usr/bin/env bash
# The kernel-lm run on a host of two GPUs: the judge's RL rate on one GPU and on two, kernel-lm trained from scratch,
# the start model judged on held-out tasks, RL runs side by side (the full method, no MirrorPop, no BDR), each RL'd
# model judged on the same tasks. benchmarks/kernel_lm_report.py turns the folder into the record's tables and plot.
#
#   benchmarks/kernel_lm_run.sh CORPUS_DIR KERNELBENCH_DIR OUT_DIR [GPU_A GPU_B]   (one GPU: give it twice)
#
# CORPUS_DIR holds train.jsonl, train/ and held_out/ (python -m kernelgym.training.corpus ... --suite-dir, see
# docs/kernel_lm.md); KERNELBENCH_DIR a KernelBench tree (level1/). Environment: RL_MINUTES (8), RL_SEEDS_FULL
# (0 1 2), RL_SEEDS_ABLATION (0 1), RATE (1; 0: no rate phases), KB_TASKS (default: kernelbench_task_ids()),
# HELD_OUT (comma-separated task ids of CORPUS_DIR/held_out; default: the first task of each of its first 32 op
# compositions), COMMIT (recorded by rl_rate.py outside a git checkout), PYTHON (python3), and options added to each
# command: KERNEL_LM_ARGS (training), RL_ARGS (each RL run), RATE_ARGS (rl_rate.py).
set -uo pipefail
corpus=$1 kb=$2 out=$3 ga=${4:-0} gb=${5:-1} py=${PYTHON:-python3}
mkdir -p "$out"
kg() { "$py" -c "import sys; from kernelgym.cli import main; sys.exit(main())" "$@"; }
held_out=${HELD_OUT:-$("$py" - "$corpus/held_out/level1" <<'EOF'
import os, sys
files = sorted(os.listdir(sys.argv[1]), key=lambda f: int(f.split("_")[0]))
first = {}
for f in files:
    first.setdefault(f.split("_", 1)[1][:-3], "level1/" + f[:-3])
print(",".join(list(first.values())[:32]))
EOF
)}
kb_tasks=${KB_TASKS:-$("$py" -c 'from kernelgym.training.corpus import kernelbench_task_ids; print(",".join(kernelbench_task_ids()))')}
commit=()
[ -n "${COMMIT:-}" ] && commit=(--commit "$COMMIT")

evaluate() {  # name model gpu ho|kb bench-options...: the held-out tasks, or KernelBench's level-1 tasks
  local name=$1 model=$2 gpu=$3 which=$4 suite=kernelbench:$corpus/held_out tasks=$held_out; shift 4
  [ "$which" = kb ] && suite=kernelbench:$kb:1 tasks=$kb_tasks
  CUDA_VISIBLE_DEVICES=$gpu kg bench --suite "$suite" --tasks "$tasks" --backend triton --agent kernel-lm --model "$model" \
      --out "$out/ev_${name}_$which" --no-plots --quiet "$@" > "$out/ev_${name}_$which.log" 2>&1
}
rl() {  # name gpu options...
  local name=$1 gpu=$2; shift 2
  CUDA_VISIBLE_DEVICES=$gpu "$py" examples/kernel_lm_grpo.py --checkpoint "$out/start" --suite "kernelbench:$corpus/train" \
      --steps 200 --max-minutes "${RL_MINUTES:-8}" --learning-rate 5e-5 --ppo-epochs 2 --save "$out/rl_$name" \
      --out "$out/rl_$name.jsonl" \
      ${RL_ARGS:-} "$@" > "$out/rl_$name.log" 2>&1
}

rate=0  # RATE=0, or one GPU given twice: no rate phases (they would share the GPU with the training)
[ "${RATE:-1}" = 1 ] && [ "$ga" != "$gb" ] && rate=1
echo "== train on GPU $ga$([ $rate = 1 ] && echo ", rate on GPU $gb")  $(date +%T)"
(CUDA_VISIBLE_DEVICES=$ga "$py" -m kernelgym.training.kernel_lm --corpus "$corpus/train.jsonl" --size small ${KERNEL_LM_ARGS:-} --out "$out/start" \
    > "$out/train.log" 2>&1; echo "rc=$? at $SECONDS" >> "$out/train.log") &
if [ $rate = 1 ]; then
  CUDA_VISIBLE_DEVICES=$gb "$py" benchmarks/rl_rate.py --devices 1 --phases cold,reuse,judge-once,fresh-seed ${RATE_ARGS:-} \
      --out "$out/rate1" --deadline-s 300 "${commit[@]}" > "$out/rate1.log" 2>&1
fi
wait
if [ $rate = 1 ]; then
  echo "== rate on both  $(date +%T)"
  CUDA_VISIBLE_DEVICES=$ga,$gb "$py" benchmarks/rl_rate.py --devices 2 --phases cold,reuse,judge-once,fresh-seed ${RATE_ARGS:-} \
      --out "$out/rate2" --deadline-s 180 "${commit[@]}" > "$out/rate2.log" 2>&1
fi
[ -f "$out/start/kernel_lm.json" ] || { echo "kernel-lm was not trained: see $out/train.log"; exit 1; }

echo "== RL runs and the start model judged  $(date +%T)"
gpu=$ga
next_gpu() { if [ "$gpu" = "$ga" ]; then gpu=$gb; else gpu=$ga; fi; }
for s in ${RL_SEEDS_FULL:-0 1 2}; do rl "full$s" "$gpu" --seed "$s" & next_gpu; done
for s in ${RL_SEEDS_ABLATION:-0 1}; do
  rl "nomp$s" "$gpu" --seed "$s" --tau 1e9 & next_gpu
  rl "nobdr$s" "$gpu" --seed "$s" --mix-ratio 0 & next_gpu
done
# the held-out evaluations first (the issue's comparison), then KernelBench's tasks
greedy=(--temperature 0 -k 1) best4=(--temperature 0.7 -k 4)
(evaluate start_greedy "$out/start" "$gb" ho "${greedy[@]}"; evaluate start_best4 "$out/start" "$gb" ho "${best4[@]}"
 evaluate start_greedy "$out/start" "$gb" kb "${greedy[@]}"; evaluate start_best4 "$out/start" "$gb" kb "${best4[@]}") &
wait

echo "== RL'd models judged  $(date +%T)"
for model in "$out"/rl_*/; do
  name=$(basename "$model")
  (evaluate "${name#rl_}_greedy" "$model" "$gpu" ho "${greedy[@]}"; evaluate "${name#rl_}_greedy" "$model" "$gpu" kb "${greedy[@]}") &
  next_gpu
done
wait
echo "== done  $(date +%T)"
