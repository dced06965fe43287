"""What do per-token signals cost? ChatTransformers against plain ``model.generate``.

A randomly initialised ~20M-parameter Llama (eager attention) generates 128 tokens, greedy,
in four ways, interleaved over several rounds (these machines are noisy, so only ratios
measured in the same run are reported):

(a) plain ``model.generate``;
(b) ``ChatTransformers.generate_trace`` with logprobs and entropies only;
(c) the same plus attention rows of the last layer and one hidden state;
(d) the DRAGIN reference approach: ``generate`` with scores, entropies from the scores,
    then a separate forward pass over the generated text with ``output_attentions=True``.

Run: ``python benchmarks/signal_overhead.py [--rounds 5] [--prompt-lengths 32 512]``;
``--model PATH`` measures a model directory instead (``--model gemma`` : Gemma 3 270M from
``get_gemma_3_270m``, whose 262,144-token vocabulary makes the entropies' share largest).
Targets: c/a <= 1.10 and c/d <= 0.8.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from langchain_adaptive_rag import ChatTransformers
from langchain_adaptive_rag.options import CaptureOptions
from langchain_adaptive_rag.testing import train_tokenizer

NEW_TOKENS = 128


def build_model(directory: Path) -> ChatTransformers:
    tokenizer = train_tokenizer()
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=2048,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, attn_implementation="eager")
    return ChatTransformers(
        model=model,
        tokenizer=AutoTokenizer.from_pretrained(directory),
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        prefix_cache_mib=0,  # every call prefills its whole prompt, as generate does
    )


def load_model(path: str) -> ChatTransformers:
    if path == "gemma":
        from langchain_adaptive_rag.pretrained import get_gemma_3_270m

        path = str(get_gemma_3_270m())
    return ChatTransformers(
        model=path,
        attn_implementation="eager",
        use_chat_template=False,
        max_new_tokens=NEW_TOKENS,
        min_new_tokens=NEW_TOKENS,
        prefix_cache_mib=0,
    )


def variants(chat: ChatTransformers, prompt: list[int]) -> dict[str, Callable[[], object]]:
    model = chat.hf_model
    inputs = torch.tensor([prompt])
    layer = chat.num_layers // 2

    def plain_generate() -> object:
        with torch.inference_mode():
            return model.generate(
                inputs,
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=0,
            )

    def entropy_only() -> object:
        return chat.generate_trace(prompt)

    def all_signals() -> object:
        capture = CaptureOptions(attention=True, hidden=True, hidden_layer=layer)
        return chat.generate_trace(prompt, capture=capture)

    def dragin_reference() -> object:
        with torch.inference_mode():
            out = model.generate(
                inputs,
                max_new_tokens=NEW_TOKENS,
                min_new_tokens=NEW_TOKENS,
                do_sample=False,
                pad_token_id=0,
                output_scores=True,
                return_dict_in_generate=True,
            )
            scores = torch.stack(out.scores, dim=1)[0].float()
            logp = torch.log_softmax(scores, dim=-1)
            entropies = -(logp.exp() * logp.nan_to_num(neginf=0.0)).sum(-1)
            generated = out.sequences[:, inputs.shape[1] :]
            attentions = model(generated, output_attentions=True).attentions[-1]
            return entropies, attentions

    return {
        "a": plain_generate,
        "b": entropy_only,
        "c": all_signals,
        "d": dragin_reference,
    }


LABELS = {
    "a": "plain model.generate",
    "b": "ChatTransformers, entropy only",
    "c": "ChatTransformers, entropy + attention + hidden",
    "d": "DRAGIN reference (generate + forward pass)",
}


def measure(chat: ChatTransformers, prompt_length: int, rounds: int) -> dict[str, float]:
    prompt = [int(i) for i in torch.randint(10, len(chat.hf_tokenizer), (prompt_length,))]
    runs = variants(chat, prompt)
    for run in runs.values():  # warm-up
        run()
    times: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(rounds):
        for key, run in runs.items():
            start = time.perf_counter()
            run()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--prompt-lengths", type=int, nargs="+", default=[32, 512])
    parser.add_argument("--model", help="a model directory, or 'gemma' (default: random)")
    args = parser.parse_args()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as directory:
        chat = load_model(args.model) if args.model else build_model(Path(directory))
        parameters = sum(p.numel() for p in chat.hf_model.parameters()) / 1e6
        kind = chat.hf_model.config.model_type
        vocabulary = chat.hf_model.config.vocab_size
        print(
            f"{kind} {parameters:.1f}M parameters ({vocabulary:,}-token vocabulary), eager "
            f"attention, {NEW_TOKENS} new tokens, "
            f"greedy, {torch.get_num_threads()} threads, median of {args.rounds} rounds\n"
        )
        print("| prompt | a (s) | b (s) | c (s) | d (s) | b/a | c/a | c/d |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for length in args.prompt_lengths:
            t = measure(chat, length, args.rounds)
            print(
                f"| {length} | {t['a']:.3f} | {t['b']:.3f} | {t['c']:.3f} | {t['d']:.3f} "
                f"| {t['b'] / t['a']:.2f} | {t['c'] / t['a']:.2f} | {t['c'] / t['d']:.2f} |"
            )
        print()
        for key, label in LABELS.items():
            print(f"{key}: {label}")


if __name__ == "__main__":
    main()
