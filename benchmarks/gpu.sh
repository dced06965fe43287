#!/usr/bin/env bash
# The GPU measurements of docs/benchmarks.md, each bounded in time (about 12 min in all:
# split them over two calls with STEPS when a call may run 10 min at most).
#
# Run from the repository root on a machine with the package and a CUDA torch:
#   bash benchmarks/gpu.sh
# Logs go to $OUT (default benchmarks/gpu-logs), one file a benchmark. Settings:
# PYTHON (python3), DEVICE (cuda), LARGE (7b: the Llama-2-7B shape), DTYPE (bfloat16),
# QUESTIONS (32), STEPS (the steps to run, by name; default all).
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
    if [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]]; then
        return
    fi
    echo "== $name: $*"
    timeout "$limit" "$py" "$@" 2>&1 | tee "$out/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]}"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
    "$py" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} | tee "$out/machine.txt"
step eval_concurrency 150 benchmarks/eval_concurrency.py \
    --questions "$questions" --rounds 1 --device "$device"
step attention_capture 150 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --rounds 3 --profile
step shared_prompts 90 benchmarks/shared_prompts.py \
    --size "$large" --device "$device" --dtype "$dtype" --calls 4 --k 20 --prompts 1024 --rounds 2
step real_scale_concurrency 150 benchmarks/real_scale_concurrency.py \
    --size "$large" --device "$device" --dtype "$dtype" --questions 8 --methods fix_length,seakr
# torch's opt-in cuDNN attention path that does not build a plan per key length
# (TORCH_CUDNN_SDPA_AVOID_RECOMPILE, torch >= 2.9): the same two measurements with it on.
TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 step attention_capture_norecompile 150 \
    benchmarks/attention_capture.py --size "$large" --device "$device" --dtype "$dtype" --rounds 3
TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 step real_scale_concurrency_norecompile 150 \
    benchmarks/real_scale_concurrency.py --size "$large" --device "$device" --dtype "$dtype" \
    --questions 8 --methods fix_length,seakr
