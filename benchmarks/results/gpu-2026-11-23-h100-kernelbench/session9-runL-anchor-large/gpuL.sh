#!/usr/bin/env bash
# Session 9: the large level-1 CUDA answers, kernelgym (native preset) then KernelBench's own pipeline, same call.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --evaluator .kb/evaluator --out $OUT/anchor --phases warm,kernelbench --only level1,cuda,large --rules native --commit $COMMIT --deadline-s ${D1:-520} > $OUT/anchor.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/anchor.log
tail -30 $OUT/anchor.log
