#!/usr/bin/env bash
# Pack verl 0.9.1 and the Python packages it imports, for a GPU machine that has torch, transformers and the
# scientific stack but no verl and no ray, and no network (the lent H200 hosts): one tarball to unpack into a folder
# on PYTHONPATH there. The local trainer imports verl, and verl imports ray; ray is never started (the trainer runs
# verl's AgentLoopWorker in its own process), so ray's cluster binaries, Java jars, dashboard build and libraries
# (rllib, tune, train, serve, data, llm) are left out: 79 MB of wheel become about 25 MB in all.
#
#   benchmarks/lent_gpu_site.sh OUT.tgz [PYTHON_VERSION]        # default 3.12 (the lent machines' python3)
#
# There: mkdir -p /tmp/site && tar xzf OUT.tgz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
# Needs pip with network access here. The list is what `import verl.experimental.agent_loop.agent_loop`,
# verl's core algorithms and kernelgym's local trainer import beyond the packages of the lent machines' image
# (found by running the local trainer's loop under an import guard allowing only those packages).
set -euo pipefail
out=$(realpath -m "$1") py=${2:-3.12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
packages=(
  verl==0.9.1 ray==2.60.0 hydra-core==1.3.8 omegaconf==2.3.1 tensordict==0.10.0 codetiming==1.4.0
  jsonschema==4.26.0 referencing==0.37.0 rpds-py==2026.9.1 jsonschema-specifications==2025.9.1 pyvers==0.1.0
  orjson==3.13.0 pydantic==2.14.4 pydantic_core==2.50.5 typing-inspection==0.4.5 annotated-types==0.8.0
  datasets==5.2.0 multiprocess==0.70.19 dill==0.4.1 cachetools==8.0.2 uvicorn==0.54.0 fastapi==0.165.0
  starlette==1.10.0 opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-proto==1.45.2
  opentelemetry-semantic-conventions==0.66b2 opentelemetry-exporter-prometheus==0.66b2
  opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2
  opentelemetry-exporter-http-transport==0.66b2 opentelemetry-exporter-otlp-common==0.66b2
  TransferQueue==0.1.11 pyzmq==27.3.0 msgspec==0.22.0 torchdata==0.11.0
)
platforms=()
for tag in manylinux2014_x86_64 manylinux_2_17_x86_64 manylinux_2_24_x86_64 manylinux_2_26_x86_64 \
           manylinux_2_27_x86_64 manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64; do
  platforms+=(--platform "$tag")
done
# antlr4's runtime 4.9.3 (omegaconf's pin) is published as a source archive only: a pure-Python wheel is built here.
python3 -m pip wheel -q --no-deps -w "$work/wheels" antlr4-python3-runtime==4.9.3
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$py" --implementation cp "${platforms[@]}" \
    -d "$work/wheels" "${packages[@]}"
python3 -m pip install -q --no-deps --no-compile --only-binary=:all: --python-version "$py" --implementation cp \
    "${platforms[@]}" --target "$work/site" "$work"/wheels/*.whl
ray=$work/site/ray
rm -rf "$ray/core/src/ray/gcs/gcs_server" "$ray/core/src/ray/raylet/raylet" "$ray/jars" "$ray/rllib" "$ray/tune" \
       "$ray/train" "$ray/serve" "$ray/data" "$ray/llm" "$ray/dashboard/client/build"
# verl's wheel also installs top-level tests/, scripts/, recipe/ and tutorial/: a tests/ on PYTHONPATH would shadow a
# project's own.
rm -rf "$work/site/tests" "$work/site/scripts" "$work/site/recipe" "$work/site/tutorial" "$work/site/bin"
find "$work/site" -name __pycache__ -prune -exec rm -rf {} +
tar czf "$out" -C "$work/site" .
du -h "$out"
