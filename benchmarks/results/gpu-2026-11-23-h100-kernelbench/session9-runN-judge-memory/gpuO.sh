#!/usr/bin/env bash
# Session 9: where the judge's GPU memory goes (the working tree's kernelgym with memory logging, in .kb/instr).
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONUNBUFFERED=1 KERNELGYM_CACHE=/tmp/kgc KG_MEMLOG=$OUT/memlog.txt
start=$(date +%s)
PYTHONPATH=$PWD/.kb/instr:/tmp/site timeout 400 python3 .kb/mem_probe.py instrumented .kb $OUT/mem.jsonl > $OUT/instr.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/instr.log
cp /tmp/kg_memlog.txt $OUT/memlog.txt; cat $OUT/memlog.txt
