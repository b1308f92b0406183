#!/usr/bin/env bash
# Session 9: level 1 native preset (CUDA+Triton), then Triton under the kernelbench preset; fresh machine.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > $OUT/machine.txt
python3 -c "import torch,triton,sys;print('torch',torch.__version__,'triton',triton.__version__,'python',sys.version.split()[0])" >> $OUT/machine.txt
nproc >> $OUT/machine.txt
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --out $OUT/level1_native --phases warm --only level1 --rules native --commit $COMMIT --deadline-s ${D1:-380} > $OUT/level1_native.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/level1_native.log
python3 benchmarks/kernelbench_scale.py --kernelbench .kb --out $OUT/triton_kbrules --phases warm --only level1,triton --rules kernelbench --commit $COMMIT --deadline-s ${D2:-90} > $OUT/triton_kbrules.log 2>&1
echo "rc=$? elapsed_s=$(( $(date +%s) - start ))" >> $OUT/triton_kbrules.log
tail -3 $OUT/level1_native.log $OUT/triton_kbrules.log
