"""Test helper: a scripted tool-calling model, as transformers weights and as a GGUF file.

The model calls the search tool until a ``<tool_response>`` is in its context, then
answers, in a chat template of the Hermes form (tools listed in the system turn, calls
as ``<tool_call>`` JSON, results in ``<tool_response>`` turns; the form of Qwen2.5's and
Hermes' templates). Its weights:

- layer 0's attention is uniform (zero queries and keys) and carries only the
  ``<tool_response>`` token's value into a ``FLAG`` dimension; other layers and the MLPs
  add nothing;
- the output rows send the generation prompt's last token (``GENERATION``) to the call
  (one added token holding the whole call's text) or, with the flag set, to the answer,
  and the call or the answer (``WRITTEN``) to ``<|im_end|>``.

``write_tool_caller_gguf`` writes the same design as a one-layer Llama GGUF file with a
byte-level SentencePiece vocabulary, the template in its metadata, for llama.cpp's
``llama-server --jinja``, which parses the calls from the template's form.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = [
    "ANSWER_LOGIT",
    "CALL",
    "CALL_LOGIT",
    "END_LOGIT",
    "FLAG",
    "FLAG_LOGIT",
    "FOUND",
    "GENERATION",
    "HERMES_TEMPLATE",
    "QUESTION",
    "SEEN",
    "WRITTEN",
    "write_tool_caller_gguf",
]

HERMES_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n"
    "{% if messages[0].role == 'system' %}{{ messages[0].content }}\n\n{% endif %}"
    "# Tools\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n"
    'Call a tool as <tool_call>\n{"name": <name>, "arguments": <arguments>}\n</tool_call>'
    "<|im_end|>\n{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'system' and tools %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "<|im_start|>assistant\n{{ message.content }}{% for call in message.tool_calls %}"
    '<tool_call>\n{"name": "{{ call.function.name }}", "arguments": '
    "{{ call.function.arguments | tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}"
    "<|im_start|>user\n<tool_response>\n{{ message.content }}\n</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
"""A chat template in the Hermes form (written for these tests, after Qwen2.5's layout)."""

CALL = '<tool_call>\n{"name": "search", "arguments": {"query": "Anna Berg"}}\n</tool_call>'
"""The model's whole call, one token of its vocabulary."""
QUESTION = "When was Anna Berg born?"
FOUND = [("Anna Berg", "Anna Berg (born 1931) is a Swedish film director.")]
"""What the search tool finds for the call's query (title, text)."""

GENERATION, WRITTEN, FLAG, SEEN = 0, 1, 2, 3
"""The hidden dimensions the weights use: the generation prompt's last token, a token
written in the reply, a tool response seen (attention's output), the response token."""

CALL_LOGIT, ANSWER_LOGIT, FLAG_LOGIT, END_LOGIT = 100.1, 100.0, 10_000.0, 100_000.0
"""Output weights: no flag, the call wins by 0.1; any flag makes the answer win; after a
written token, the end of the turn."""


def write_tool_caller_gguf(path: Path, *, width: int = 16, heads: int = 2) -> Path:
    """Write the scripted tool caller as a one-layer Llama GGUF file (float32).

    Its vocabulary: ``<unk>``, ``<s>``, ``</s>``, ``<|im_start|>``, ``<|im_end|>`` (the
    end of generation), the 256 byte tokens, ``▁``, the call and ``<tool_response>``
    (user-defined: matched in the prompt's text, written as their text) and ``▁1931``.

    Args:
        path: The file to write.
        width: Hidden size (at least 4).
        heads: Attention heads (dividing ``width``).

    Returns:
        ``path``.
    """
    import gguf

    kind = gguf.TokenType
    tokens: list[str] = []
    types: list[int] = []

    def add(text: str, token_type: int) -> int:
        tokens.append(text)
        types.append(token_type)
        return len(tokens) - 1

    unknown = add("<unk>", kind.UNKNOWN)
    begin = add("<s>", kind.CONTROL)
    add("</s>", kind.CONTROL)
    add("<|im_start|>", kind.CONTROL)
    end = add("<|im_end|>", kind.CONTROL)
    newline = add("<0x00>", kind.BYTE) + 0x0A  # the generation prompt ends with "\n"
    for byte in range(1, 256):
        add(f"<0x{byte:02X}>", kind.BYTE)
    add("\u2581", kind.NORMAL)
    call = add(CALL, kind.USER_DEFINED)
    response = add("<tool_response>", kind.USER_DEFINED)
    answer = add("\u25811931", kind.NORMAL)

    vocab, ffn = len(tokens), width
    embeddings = np.zeros((vocab, width), np.float32)
    embeddings[newline, GENERATION] = 1.0
    embeddings[call, WRITTEN] = 1.0
    embeddings[answer, WRITTEN] = 1.0
    embeddings[response, SEEN] = 1.0
    rows = np.zeros((vocab, width), np.float32)
    rows[call, GENERATION] = CALL_LOGIT
    rows[answer, GENERATION] = ANSWER_LOGIT
    rows[answer, FLAG] = FLAG_LOGIT
    rows[end, WRITTEN] = END_LOGIT
    values = np.zeros((width, width), np.float32)
    values[0, SEEN] = 1.0  # head 0 carries the response token
    out = np.zeros((width, width), np.float32)
    out[FLAG, 0] = 1.0  # and writes it into the flag

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("scripted tool caller")
    writer.add_context_length(4096)
    writer.add_embedding_length(width)
    writer.add_block_count(1)
    writer.add_feed_forward_length(ffn)
    writer.add_head_count(heads)
    writer.add_head_count_kv(heads)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_dimension_count(width // heads)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_types(types)
    writer.add_bos_token_id(begin)
    writer.add_eos_token_id(end)
    writer.add_unk_token_id(unknown)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(HERMES_TEMPLATE)
    zeros = np.zeros((width, width), np.float32)
    ones = np.ones(width, np.float32)
    for name, tensor in (
        ("token_embd.weight", embeddings),
        ("blk.0.attn_norm.weight", ones),
        ("blk.0.attn_q.weight", zeros),
        ("blk.0.attn_k.weight", zeros),
        ("blk.0.attn_v.weight", values),
        ("blk.0.attn_output.weight", out),
        ("blk.0.ffn_norm.weight", ones),
        ("blk.0.ffn_gate.weight", np.zeros((ffn, width), np.float32)),
        ("blk.0.ffn_up.weight", np.zeros((ffn, width), np.float32)),
        ("blk.0.ffn_down.weight", np.zeros((width, ffn), np.float32)),
        ("output_norm.weight", ones),
        ("output.weight", rows),
    ):
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
