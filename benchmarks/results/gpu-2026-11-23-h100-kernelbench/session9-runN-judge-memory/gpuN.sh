#!/usr/bin/env bash
# Session 9: the judge's GPU memory on the two largest level-1 tasks, before (HEAD's copy in .kb/old) and after the change.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 KERNELGYM_CACHE=/tmp/kgc
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
PYTHONPATH=$PWD/.kb/old:/tmp/site timeout 280 python3 .kb/mem_probe.py before .kb $OUT/mem.jsonl > $OUT/before.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/before.log
PYTHONPATH=$PWD:/tmp/site timeout 280 python3 .kb/mem_probe.py after .kb $OUT/mem.jsonl > $OUT/after.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/after.log
tail -4 $OUT/before.log $OUT/after.log | cut -c1-600
