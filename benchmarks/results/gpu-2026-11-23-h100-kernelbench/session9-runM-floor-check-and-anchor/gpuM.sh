#!/usr/bin/env bash
# Session 9: after a5e9fc7 (floor per store): three small level-1 CUDA answers under the native preset (the floor is used by every symbol check),
# then KernelBench's pipeline on the two large answers run L left not_run.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --out $OUT/small --phases warm --only level1,cuda,small --limit 3 --rules native --commit $COMMIT > $OUT/small.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/small.log
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --evaluator .kb/evaluator --out $OUT/anchor2 --phases kernelbench --tasks level1/47_Sum_reduction_over_a_dimension,level1/51_Argmax_over_a_dimension --only cuda --commit $COMMIT > $OUT/anchor2.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/anchor2.log
tail -8 $OUT/small.log; tail -8 $OUT/anchor2.log
