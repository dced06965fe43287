"""Multi-head latent attention (DeepSeek-V3's): a cache whose states are not the keys.

The model caches a compressed latent and a rotary key (one head each, of other sizes than
its keys and values) and expands them into keys and values at every pass. The loop's own
cache, the prefix cache, joins and samples hold those states as they are; shared prompts,
which attend over the cached states themselves, are off for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.kv_cache import RoomyLayer
from langchain_adaptive_rag.options import CaptureOptions, DecodingOptions
from tests.helpers.compare import assert_same_traces
from tests.helpers.family_prompts import PROMPTS
from tests.helpers.together import decoded_together

ATOL = 1e-5


@pytest.fixture(scope="module")
def latent_dir(tiny_model_dirs: dict[str, Path]) -> Path:
    return tiny_model_dirs["deepseek_v3"]


def test_latent_attention_decodes_as_the_eager_model_does(
    latent_dir: Path, llama_dir: Path
) -> None:
    eager = ChatTransformers(model=str(latent_dir), attn_implementation="eager")
    sdpa = ChatTransformers(
        model=str(latent_dir), attn_implementation="sdpa", batch_concurrent_calls=True
    )
    assert not ModelCapabilities.of(sdpa.hf_model).shares_prompts
    assert ModelCapabilities.of(eager.hf_model).cache_kind == "latent"
    llama = ChatTransformers(model=str(llama_dir))
    assert ModelCapabilities.of(llama.hf_model).shares_prompts  # an ordinary model shares
    ten = DecodingOptions(max_new_tokens=10, min_new_tokens=10)
    signals = CaptureOptions(attention=True, attention_head_max=True, hidden=True)
    want = [eager.generate_trace(p, decoding=ten, capture=signals)[0] for p in PROMPTS]
    got = decoded_together(  # left-padded
        sdpa,
        [lambda p=p: sdpa.generate_trace(p, decoding=ten, capture=signals)[0] for p in PROMPTS],
    )
    assert sdpa.scheduler is not None and sdpa.scheduler.batch_sizes[3] == 1
    again = [sdpa.generate_trace(p, decoding=ten, capture=signals)[0] for p in PROMPTS]
    assert sdpa.prefix_cache is not None and sdpa.prefix_cache.stats.hits >= 1  # stored states
    assert_same_traces(
        got + again, want + want, ATOL, captured=("attention", "attention_head_max", "hidden")
    )
    sampling = DecodingOptions(do_sample=True, seed=4, max_new_tokens=6)
    hidden = CaptureOptions(hidden=True)
    samples = sdpa.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)
    reference = eager.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)
    assert_same_traces(samples, reference, ATOL, captured=("hidden",))
    full = sdpa.forward_attention(PROMPTS[0])
    np.testing.assert_allclose(full.weights, eager.forward_attention(PROMPTS[0]).weights, atol=ATOL)


def test_the_loop_holds_the_latent_states_in_its_own_cache(latent_dir: Path) -> None:
    """The states cached are the latent (one head of ``kv_lora_rank``) and the rotary key
    (one head of ``qk_rope_head_dim``), appended in place like any other layer's."""
    sdpa = ChatTransformers(model=str(latent_dir), attn_implementation="sdpa")
    config = sdpa.hf_model.config
    seen: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    original = RoomyLayer._append

    def recording(self: RoomyLayer, keys: object, values: object, new: int) -> object:
        result = original(self, keys, values, new)  # type: ignore[arg-type]
        seen.append((tuple(self.keys.shape), tuple(self.values.shape)))
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RoomyLayer, "_append", recording)
        sdpa.generate_trace(PROMPTS[1], decoding=DecodingOptions(max_new_tokens=3))
    assert seen
    assert {(k[1], k[3], v[1], v[3]) for k, v in seen} == {
        (1, config.kv_lora_rank, 1, config.qk_rope_head_dim)
    }


def test_a_model_the_probe_cannot_run_keeps_a_copy_per_sample(
    tiny_model_dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe fails closed: no shared prompts, the same samples."""
    chat = ChatTransformers(model=str(tiny_model_dirs["qwen2"]))
    sampling = DecodingOptions(do_sample=True, seed=8, max_new_tokens=5)
    hidden = CaptureOptions(hidden=True)
    want = chat.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)
    fresh = ChatTransformers(model=str(tiny_model_dirs["qwen2"]))
    model = fresh.hf_model
    forward = type(model).forward

    def failing_once(self: object, *args: object, **kwargs: object) -> object:
        monkeypatch.setattr(type(model), "forward", forward)  # only the probe's pass fails
        raise RuntimeError("a model that cannot run two tokens alone")

    monkeypatch.setattr(type(model), "forward", failing_once)
    probed = ModelCapabilities.of(model)  # the probe could not run: no sharing, not latent
    assert not probed.shares_prompts and probed.cache_kind == "plain"
    got = fresh.generate_trace(PROMPTS[0], decoding=sampling, capture=hidden, n=3)
    for ours, theirs in zip(got, want, strict=True):
        assert ours.token_ids.tolist() == theirs.token_ids.tolist()
        np.testing.assert_allclose(ours.hidden, theirs.hidden, atol=ATOL)
