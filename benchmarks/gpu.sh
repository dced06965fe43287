#!/usr/bin/env bash
# The GPU measurements of docs/benchmarks.md, each bounded in time.
#
# Run from the repository root on a machine with the package and a CUDA torch:
#   bash benchmarks/gpu.sh
# Logs go to $OUT (default benchmarks/gpu-logs), one file a benchmark. Settings:
# PYTHON (python3), DEVICE (cuda), LARGE (7b: the Llama-2-7B shape), QUESTIONS (32).
set -u
out=${OUT:-benchmarks/gpu-logs}
py=${PYTHON:-python3}
device=${DEVICE:-cuda}
large=${LARGE:-7b}
questions=${QUESTIONS:-32}
dtype=${DTYPE:-bfloat16}
mkdir -p "$out"
export PYTHONUNBUFFERED=1

step() {
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*"
    timeout "$limit" "$py" "$@" 2>&1 | tee "$out/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]}"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    "$py" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} | tee "$out/machine.txt"
step eval_concurrency 200 benchmarks/eval_concurrency.py \
    --questions "$questions" --rounds 1 --device "$device"
step attention_capture_110m 60 benchmarks/attention_capture.py \
    --size 110m --device "$device" --rounds 3
step "attention_capture_$large" 150 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --rounds 3 --profile
step "shared_prompts_$large" 120 benchmarks/shared_prompts.py \
    --size "$large" --device "$device" --dtype "$dtype" --calls 4 --k 20 --prompts 1024 --rounds 2
