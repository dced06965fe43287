"""The batched decoding engine behind [`ChatTransformers`][].

Each module is one role (see the contributor guide, ``docs/engine.md``):

- ``request``: one call's prompt, samples, options and recorded signals.
- ``scheduler``: queues concurrent calls and admits them into a running batch.
- ``runner``: the batched KV-cache loop (prefill, steps, joins, leaves); ``prefill``
  plans its prefill passes.
- ``capabilities``: what a loaded model supports, computed once per model.
- ``kv_cache``, ``prefix_cache``, ``shared_prompts``: the cache manager's parts.
- ``sampler`` and ``step_logits``: next-token distributions, draws and read-backs.
- ``hooks``, ``attention_rows``, ``layers``: reading attention rows and hidden states.
- ``local_model``: a loaded model with its lock, scheduler and prefix cache.
"""

__all__: list[str] = []
