#!/usr/bin/env bash
# Session 9, final commit: the GPU memory test, then the large level-1 CUDA answers with kernelgym and KernelBench's pipeline.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
python3 -m pytest -q -m gpu tests/gpu/test_gpu_memory.py -p no:cacheprovider > $OUT/pytest_gpu_memory.txt 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/pytest_gpu_memory.txt
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --evaluator .kb/evaluator --out $OUT/anchor --phases warm,kernelbench --only level1,cuda,large --rules native --commit $COMMIT --deadline-s ${D1:-420} > $OUT/anchor.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/anchor.log
tail -n 3 $OUT/pytest_gpu_memory.txt; grep -v Profiling $OUT/anchor.log | tail -n 14
