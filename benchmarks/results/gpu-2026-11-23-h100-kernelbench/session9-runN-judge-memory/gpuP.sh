#!/usr/bin/env bash
# Session 9: the judge's GPU memory after chunking its digests and byte comparisons; the GPU memory test.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 KERNELGYM_CACHE=/tmp/kgc
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
PYTHONPATH=$PWD:/tmp/site python3 -m pytest -q -m gpu tests/gpu/test_gpu_memory.py -p no:cacheprovider > $OUT/pytest_gpu_memory.txt 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/pytest_gpu_memory.txt
PYTHONPATH=$PWD:/tmp/site timeout 250 python3 .kb/mem_probe.py after-chunking .kb $OUT/mem.jsonl > $OUT/after.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/after.log
PYTHONPATH=$PWD/.kb/instr:/tmp/site timeout 200 python3 .kb/mem_probe.py instrumented .kb $OUT/mem.jsonl > $OUT/instr.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/instr.log
cp /tmp/kg_memlog.txt $OUT/memlog.txt
tail -n 3 $OUT/pytest_gpu_memory.txt; cut -c1-330 $OUT/mem.jsonl; head -n 30 $OUT/memlog.txt
