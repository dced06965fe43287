"""Train the toy model: a byte-level BPE tokenizer and a small Llama, deterministic given a seed.

Run from the repository root: ``python -m toyworld_training.train --out DIR [--quick]
[--device D]``. The script trains the tokenizer on the pool words and templates (every
name, title, city and year is one token), then the model. Its first two layers start as
the reading circuit (``toyworld_training.circuit``) and the year-order circuit
(``toyworld_training.order_circuit``, held for the first ``order_hold`` share of the
steps). Training first copies random word lists only (until it copies, which ties the
reading circuit to the output), then follows the ``toyworld_training.data.ExampleMix``
stream, with the loss on answer tokens only, AdamW with warm-up and cosine decay, and logs
a held-out probe (closed-book known, reading unknown) every ``eval_every`` steps. The
weights are saved in float16 with the tokenizer and its chat template.
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from langchain_adaptive_rag.prompts import extract_answer
from langchain_adaptive_rag.testing import SPECIAL_TOKENS, train_tokenizer
from langchain_adaptive_rag.toyworld.corpus import build_corpus
from langchain_adaptive_rag.toyworld.questions import (
    ToyQuestion,
    comparison_question,
    evaluation_questions,
)
from langchain_adaptive_rag.toyworld.world import YEARS, Person, ToyWorld, generate_world
from toyworld_training.circuit import install_reading_circuit
from toyworld_training.data import ExampleMix, TrainingExample, qa_example, tokenizer_text
from toyworld_training.order_circuit import OrderCircuit, OrderLayout

__all__ = ["TrainConfig", "build_model", "build_tokenizer", "main", "order_layout", "train"]

logger = logging.getLogger(__name__)

COPY_PHASE_WEIGHTS: dict[str, float] = {"copy": 1.0}
"""Example mix of the warm-up steps (then ``ExampleMix.DEFAULT_WEIGHTS``)."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (the defaults produce the shipped model)."""

    seed: int = 0
    """Seed of the world, the example stream and the weights."""
    steps: int = 5000
    """Optimizer steps."""
    batch_size: int = 16
    """Sequences per step."""
    hidden_size: int = 192
    """Model width."""
    num_layers: int = 4
    """Decoder layers."""
    num_heads: int = 6
    """Attention heads."""
    intermediate_size: int = 768
    """MLP width."""
    learning_rate: float = 2e-3
    """Peak learning rate."""
    warmup_steps: int = 50
    """Linear warm-up steps."""
    min_lr_ratio: float = 0.1
    """Final learning rate as a fraction of the peak (cosine decay)."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    eval_every: int = 1000
    """Steps between held-out probes (0: never); probes do not change the weights."""
    eval_size: int = 16
    """Questions per probe set."""
    threads: int = 2
    """Torch CPU threads."""
    device: str = "cpu"
    """Torch device to train on. The shipped weights are the CPU run; another device
    trains the same way but does not reproduce them bit for bit."""
    easy_fraction: float = 0.25
    """Leading share of the steps whose contexts hold at most one distractor."""
    copy_steps: int = 600
    """At most this many leading steps only copy word lists (this forms the attention
    heads that reading relies on); the phase ends early once the copy loss is low."""
    copy_loss: float = 0.3
    """Running copy loss that ends the copy phase."""
    reading_offsets: int = 5
    """``r`` of the reading circuit set at initialisation (0: none; see
    ``circuit``): the match heads vote on runs of up to ``r`` context
    tokens."""
    order_circuit: bool = True
    """Set the year-order circuit at initialisation (see
    ``order_circuit``): year directions in the embeddings and an
    order head in layer 1 for "Who was born first?". Needs a reading circuit of at least 5
    offsets (a given name stands 5 tokens before its birth year) and a free head."""
    order_hold: float = 0.5
    """Leading share of the steps after each of which the order circuit is set again
    (``hold``; 0: set at initialisation
    only)."""
    order_recalibrate: int = 20
    """Steps between recalibrations of a held order circuit."""
    order_copy_scale: float = 20.0
    """Gain of the given name the order head writes."""
    init_from: str | None = None
    """A trained toy model's directory to go on training (its weights and tokenizer; no
    circuit is set and the copy phase is skipped); ``None``: a new model."""
    search_traces: float = 0.0
    """Weight of search traces (``TOY_SEARCH_PROTOCOL``) in the mix after the copy phase,
    beside ``ExampleMix.DEFAULT_WEIGHTS`` (which sum to 1; 0: the shipped model's mix)."""

    def mix_weights(self) -> dict[str, float]:
        """The example mix after the copy phase."""
        weights = dict(ExampleMix.DEFAULT_WEIGHTS)
        if self.search_traces:
            weights["search"] = self.search_traces
        return weights

    @classmethod
    def fine_tune(cls, init_from: str) -> TrainConfig:
        """Settings that go on training a trained model (``init_from``).

        1,000 steps at a quarter of the learning rate, every context with up to three
        distractors from the start.
        """
        return cls(
            init_from=init_from,
            steps=1000,
            learning_rate=5e-4,
            warmup_steps=20,
            copy_steps=0,
            easy_fraction=0.0,
            order_hold=0.0,
        )

    @classmethod
    def quick(cls) -> TrainConfig:
        """A reduced run (about a minute on two CPU cores): small model, few steps."""
        return cls(
            steps=120,
            batch_size=8,
            hidden_size=96,
            num_layers=2,
            num_heads=6,
            intermediate_size=128,
            warmup_steps=10,
            eval_every=0,
            copy_steps=20,
        )


def build_tokenizer(world: ToyWorld) -> object:
    """Byte-level BPE over the pool words and templates, with BOS and a ChatML template.

    Args:
        world: The evaluated world (its facts are not used).

    Returns:
        A ``transformers.PreTrainedTokenizerFast``.
    """
    return train_tokenizer(tokenizer_text(world), vocab_size=4096)


def order_layout(tokenizer: object) -> OrderLayout:
    """Where a toy comparison's answer token finds the two years (from the tokenizer).

    Args:
        tokenizer: The toy tokenizer (every year and name one token).

    Returns:
        The year tokens, the answer token "is", the distances back to both years and to
        a year's given name, and a sample chain of thought.
    """
    encode: Callable[[str], dict[str, list[int]]] = tokenizer  # type: ignore[assignment]
    first, second = (
        Person(f"p{i}", name, year, "Oslo", "painter", "A B", "C D", known=True)
        for i, (name, year) in enumerate((("Anna Berg", 1901), ("Carl Holm", 1932)))
    )
    text = comparison_question(first, second).gold_text
    prompt = " " + text[: text.index(" So the answer is") + len(" So the answer is")]
    ids = encode(prompt)["input_ids"]
    convert: Callable[[str], int] = tokenizer.convert_tokens_to_ids  # type: ignore[attr-defined]
    years = tuple((convert(f"Ġ{year}"), year) for year in YEARS)
    last = len(ids) - 1
    distances = tuple(last - ids.index(convert(f"Ġ{p.birth_year}")) for p in (second, first))
    name_offset = ids.index(convert(f"Ġ{first.birth_year}")) - ids.index(convert("ĠAnna"))
    return OrderLayout(
        years=years,
        gate_id=convert("Ġis"),
        distances=(distances[0], distances[1]),
        name_offset=name_offset,
        sample=tuple(ids),
    )


def build_model(
    config: TrainConfig, vocab_size: int, layout: OrderLayout | None = None
) -> torch.nn.Module:
    """A randomly initialised Llama (seeded by ``config.seed``) with its circuits set.

    Args:
        config: Sizes.
        vocab_size: Tokenizer size.
        layout: Token layout of comparisons (``order_layout``); the order circuit is
            set only when it is given and ``config.order_circuit`` is on.

    Returns:
        A ``LlamaForCausalLM`` with tied input and output embeddings.
    """
    return _build(config, vocab_size, layout)[0]


def _build(
    config: TrainConfig, vocab_size: int, layout: OrderLayout | None
) -> tuple[torch.nn.Module, OrderCircuit | None]:
    """The model of ``build_model`` and its order circuit (``None`` when not set)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(config.seed)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=vocab_size,
            hidden_size=config.hidden_size,
            intermediate_size=config.intermediate_size,
            num_hidden_layers=config.num_layers,
            num_attention_heads=config.num_heads,
            num_key_value_heads=config.num_heads,
            max_position_embeddings=1024,
            bos_token_id=SPECIAL_TOKENS.index("<s>"),
            eos_token_id=SPECIAL_TOKENS.index("</s>"),
            pad_token_id=SPECIAL_TOKENS.index("<pad>"),
            tie_word_embeddings=True,
            attention_bias=config.reading_offsets > 0,
            attn_implementation="sdpa",
        )
    )
    circuit = None
    if config.reading_offsets > 0:
        reading = install_reading_circuit(model, config.reading_offsets, seed=config.seed)
        if config.order_circuit and layout is not None:
            circuit = OrderCircuit(
                model,
                reading,
                layout,
                head=config.reading_offsets,
                copy_scale=config.order_copy_scale,
                seed=config.seed,
            )
    return model, circuit


def _load(path: str) -> tuple[torch.nn.Module, object]:
    """A trained toy model in float32 and its tokenizer, to go on training."""
    from transformers import AutoTokenizer, LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model, AutoTokenizer.from_pretrained(path)


def _encode(tokenizer: object, example: TrainingExample) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 on the prompt) of one example."""
    if example.continuation:
        return _encode_spans(tokenizer, example)
    full: list[int] = tokenizer(example.prompt + example.target)["input_ids"]  # type: ignore[operator]
    if not example.prompt:
        return full, [-100, *full[1:]]
    prompt: list[int] = tokenizer(example.prompt)["input_ids"]  # type: ignore[operator]
    if full[: len(prompt)] != prompt:
        msg = f"The prompt's tokens are not a prefix of the example's: {example.prompt!r}"
        raise ValueError(msg)
    return full, [-100] * len(prompt) + full[len(prompt) :]


def _encode_spans(tokenizer: object, example: TrainingExample) -> tuple[list[int], list[int]]:
    """Token ids and labels of an example with several trained spans.

    A token is trained when its text starts inside one; the whole text is tokenized at
    once, as the model reads it at inference.
    """
    encoded = tokenizer(example.text, return_offsets_mapping=True)  # type: ignore[operator]
    ids: list[int] = encoded["input_ids"]
    spans = example.trained_spans()
    labels = [
        token if end > start and any(a <= start < b for a, b in spans) else -100
        for token, (start, end) in zip(ids, encoded["offset_mapping"], strict=True)
    ]
    return ids, labels


def _batches(
    mix: ExampleMix, tokenizer: object, batch_size: int, rng: random.Random, pad: int
) -> Callable[[], tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """A batch source that groups examples of similar length (less padding)."""
    queue: list[list[tuple[list[int], list[int]]]] = []

    def next_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if not queue:
            pool = [_encode(tokenizer, mix.sample()) for _ in range(batch_size * 32)]
            pool.sort(key=lambda pair: len(pair[0]))
            queue.extend(pool[i : i + batch_size] for i in range(0, len(pool), batch_size))
            rng.shuffle(queue)
        batch = queue.pop()
        width = max(len(ids) for ids, _ in batch)
        ids = torch.full((len(batch), width), pad, dtype=torch.long)
        labels = torch.full((len(batch), width), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (tokens, targets) in enumerate(batch):
            ids[row, : len(tokens)] = torch.tensor(tokens)
            labels[row, : len(targets)] = torch.tensor(targets)
            mask[row, : len(tokens)] = 1
        return ids, labels, mask

    return next_batch


def greedy_answer(
    model: torch.nn.Module, tokenizer: object, prompt: str, max_new_tokens: int = 48
) -> str:
    """Greedy continuation of ``prompt`` up to the first newline.

    Args:
        model: A causal LM.
        tokenizer: Its tokenizer.
        prompt: Completion prompt.
        max_new_tokens: Budget.

    Returns:
        The generated text without the newline.
    """
    ids: list[int] = tokenizer(prompt)["input_ids"]  # type: ignore[operator]
    newline: int = tokenizer.convert_tokens_to_ids("Ċ")  # type: ignore[attr-defined]
    device = next(model.parameters()).device
    with torch.no_grad():
        out = model.generate(  # type: ignore[operator]
            torch.tensor([ids], device=device),
            attention_mask=torch.ones((1, len(ids)), dtype=torch.long, device=device),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            eos_token_id=[newline, SPECIAL_TOKENS.index("</s>")],
            pad_token_id=SPECIAL_TOKENS.index("<pad>"),
        )
    text: str = tokenizer.decode(out[0, len(ids) :], skip_special_tokens=True)  # type: ignore[attr-defined]
    return text.split("\n", 1)[0]


def probe(
    model: torch.nn.Module,
    tokenizer: object,
    world: ToyWorld,
    questions: Sequence[ToyQuestion],
    size: int,
) -> tuple[dict[str, float], list[str]]:
    """Accuracy on held-out probes: closed-book known / unknown, reading, continuing.

    Compositional questions, then grandfather questions (closed-book known, read unknown).

    Args:
        model: The model being trained.
        tokenizer: Its tokenizer.
        world: The evaluated world.
        questions: Its evaluation questions.
        size: Questions per probe.

    Returns:
        Accuracy per probe, and the first answer generated in each probe.
    """
    passages = {d.id: d.page_content for d in build_corpus(world)}
    comp = [q for q in questions if q.type == "compositional"]
    known = [q for q in comp if q.category == "known"][:size]
    unknown = [q for q in comp if not q.answer_known][:size]
    second = [q for q in comp if q.category == "known_first_unknown_second"][:size]
    family = [q for q in questions if q.type == "inference"]
    family_known = [q for q in family if q.category == "known"][:size]
    family_unknown = [q for q in family if not q.answer_known][:size]
    model.eval()

    samples: list[str] = []

    def accuracy(cases: Sequence[tuple[ToyQuestion, TrainingExample]]) -> float:
        hits = 0
        for index, (question, example) in enumerate(cases):
            generated = greedy_answer(model, tokenizer, example.prompt)
            hits += extract_answer(example.prompt + generated) == question.answer
            if index == 0:
                samples.append(f"{question.question} -> {generated!r}")
        return hits / max(1, len(cases))

    result = {
        "closed_known": accuracy([(q, qa_example(q)) for q in known]),
        "closed_unknown": accuracy([(q, qa_example(q)) for q in unknown]),
        "gold_unknown": accuracy(
            [(q, qa_example(q, [passages[i] for i in q.supporting_ids])) for q in unknown]
        ),
        "closed_grandfather": accuracy([(q, qa_example(q)) for q in family_known]),
        "gold_grandfather": accuracy(
            [(q, qa_example(q, [passages[i] for i in q.supporting_ids])) for q in family_unknown]
        ),
        "continue_second": accuracy(
            [(q, qa_example(q, [passages[q.supporting_ids[1]]], accepted_steps=1)) for q in second]
        ),
    }
    model.train()
    return result, samples


def train(
    out: str | Path, config: TrainConfig | None = None, *, log: Callable[[str], None] | None = None
) -> Path:
    """Train the tokenizer and the model and save both under ``out``.

    Args:
        out: Output directory (created).
        config: Settings (default ``TrainConfig``).
        log: Receives progress lines (default: this module's logger).

    Returns:
        The output directory.
    """
    config = config or TrainConfig()
    emit = log or logger.info
    torch.set_num_threads(config.threads)
    random.seed(config.seed)
    world = generate_world(config.seed)
    questions = evaluation_questions(world)
    if config.init_from is not None:
        model, tokenizer = _load(config.init_from)
        circuit = None
    else:
        tokenizer = build_tokenizer(world)
        model, circuit = _build(config, len(tokenizer), order_layout(tokenizer))  # type: ignore[arg-type]
    model = model.to(config.device)
    params = sum(p.numel() for p in model.parameters())
    vocab = len(tokenizer)  # type: ignore[arg-type]
    emit(f"vocabulary {vocab}, parameters {params:,}, config {asdict(config)}")
    mix = ExampleMix(world, seed=config.seed)
    batch_rng, pad = random.Random(config.seed), SPECIAL_TOKENS.index("<pad>")
    next_batch = _batches(mix, tokenizer, config.batch_size, batch_rng, pad)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "norm" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "norm" not in n)]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": config.weight_decay},
            {"params": rest, "weight_decay": 0.0},
        ],
        lr=config.learning_rate,
        betas=(0.9, 0.98),
    )

    def rate(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / config.warmup_steps
        progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
        cosine = 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return config.min_lr_ratio + (1.0 - config.min_lr_ratio) * cosine

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    model.train()
    start = time.time()
    running = math.inf
    mix.max_distractors = 1
    mix.weights = dict(COPY_PHASE_WEIGHTS)
    copying = True
    for step in range(1, config.steps + 1):
        if copying and (step > config.copy_steps or running < config.copy_loss):
            copying = False
            emit(f"step {step} copy phase over (loss {running:.3f})")
            mix.weights = config.mix_weights()
            next_batch = _batches(mix, tokenizer, config.batch_size, batch_rng, pad)
        if step > config.easy_fraction * config.steps:
            mix.max_distractors = 3
        ids, labels, mask = (t.to(config.device) for t in next_batch())
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if circuit is not None and step <= config.order_hold * config.steps:
            circuit.hold(model, recalibrate=step % config.order_recalibrate == 0)
        optimizer.zero_grad(set_to_none=True)
        running = float(loss.detach()) if step == 1 else 0.9 * running + 0.1 * float(loss.detach())
        if step % 50 == 0:
            emit(f"step {step} loss {running:.3f} ({time.time() - start:.0f}s)")
        if config.eval_every and step % config.eval_every == 0:
            scores, samples = probe(model, tokenizer, world, questions, config.eval_size)
            shown = " ".join(f"{k} {v:.2f}" for k, v in scores.items())
            emit(f"step {step} probe {shown} ({time.time() - start:.0f}s)")
            for sample in samples:
                emit(f"  {sample}")
            save(copy.deepcopy(model), tokenizer, Path(out) / "checkpoint")
    return save(model.cpu(), tokenizer, out)


def save(model: torch.nn.Module, tokenizer: object, out: str | Path) -> Path:
    """Save float16 weights, the tokenizer and a generation config that stops at EOS.

    Args:
        model: Trained model.
        tokenizer: Its tokenizer.
        out: Directory.

    Returns:
        The directory.
    """
    path = Path(out)
    path.mkdir(parents=True, exist_ok=True)
    eos, pad = SPECIAL_TOKENS.index("</s>"), SPECIAL_TOKENS.index("<pad>")
    model.generation_config.eos_token_id = [eos, SPECIAL_TOKENS.index("<|im_end|>")]  # type: ignore[union-attr]
    model.generation_config.pad_token_id = pad  # type: ignore[union-attr]
    model.to(torch.float16).save_pretrained(path)  # type: ignore[operator]
    tokenizer.save_pretrained(path)  # type: ignore[attr-defined]
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m toyworld_training.train --out DIR [--quick]``.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).

    Returns:
        Exit status.
    """
    parser = argparse.ArgumentParser(description="Train the toy-world model.")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--quick", action="store_true", help="reduced run (about a minute)")
    parser.add_argument("--seed", type=int, default=0, help="seed of world, data and weights")
    parser.add_argument("--steps", type=int, default=None, help="override the number of steps")
    parser.add_argument("--device", default="cpu", help="torch device (the shipped run: cpu)")
    parser.add_argument(
        "--init-from",
        default=None,
        help="go on training this toy model directory (TrainConfig.fine_tune) instead of a new one",
    )
    parser.add_argument(
        "--search-traces",
        type=float,
        default=0.0,
        help="weight of search traces beside the default mix's 1.0 (the shipped run: 0)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.init_from is not None:
        config = TrainConfig.fine_tune(args.init_from)
    else:
        config = TrainConfig.quick() if args.quick else TrainConfig()
    config = replace(config, seed=args.seed, device=args.device, search_traces=args.search_traces)
    if args.steps is not None:
        config = replace(config, steps=args.steps)
    path = train(args.out, config)
    logger.info("saved %s", path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
