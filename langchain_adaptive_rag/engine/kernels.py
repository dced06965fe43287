"""Attention kernels on a GPU: when torch may run cuDNN's, which a decoding loop pays for.

On CUDA, ``scaled_dot_product_attention`` may run cuDNN's attention for half-precision
inputs (torch 2.11 ranks it first on Hopper GPUs). cuDNN builds an execution plan for
each new shape and stride of the query, keys and mask, and keeps the plans per thread. A
decoding loop meets a new key length at every step, and a batched loop new batch shapes
as well, so it keeps building plans. Measured with ``benchmarks/real_scale_concurrency.py``
(a 7B-shaped Llama in bfloat16 on an H200, FL-RAG, eight questions, one run): with
cuDNN's attention allowed, 0.30 questions a second alone and 0.77 at concurrency 8;
with it off, 0.46 and 3.40.

The library changes no torch setting. [`ChatTransformers`][]
logs [`cudnn_advice`][] once when [`cudnn_attention_may_run`][] holds for its model,
and the command line, which owns its process, turns cuDNN's attention off for
``--device cuda`` unless it is given ``--cudnn-attention``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["cudnn_advice", "cudnn_attention_may_run"]

_HALF = (torch.float16, torch.bfloat16)


def cudnn_attention_may_run(model: Any) -> bool:
    """Whether torch may run cuDNN's attention in ``model``'s forward passes.

    Args:
        model: A HuggingFace model (its ``device``, ``dtype`` and ``config`` are read).

    Returns:
        ``True`` for a half-precision model on CUDA whose layers call ``sdpa``, while
        torch's cuDNN attention is enabled and cuDNN is available.
    """
    device = getattr(model, "device", None)
    if not isinstance(device, torch.device) or device.type != "cuda":
        return False
    if getattr(model, "dtype", None) not in _HALF:
        return False
    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    enabled = torch.backends.cuda.cudnn_sdp_enabled()  # type: ignore[no-untyped-call]
    return bool(enabled and torch.backends.cudnn.is_available())  # type: ignore[no-untyped-call]


def cudnn_advice(model: Any) -> str:
    """What to do about cuDNN's attention for ``model`` (one line, for a log)."""
    return (
        f"torch may run cuDNN's attention for this {type(model).__name__} ({model.device}, "
        f"{str(model.dtype).removeprefix('torch.')}, sdpa). cuDNN builds a plan for each new "
        "key length and batch shape, which decoding meets at every step: with a 7B model on "
        "an H200, questions took 1.5x as long alone and 4.4x at eight at once. Fix: call "
        "torch.backends.cuda.enable_cudnn_sdp(False) once in your application (flash and "
        "memory-efficient attention remain); 'adaptive-rag eval --device cuda' does so "
        "unless given --cudnn-attention."
    )
