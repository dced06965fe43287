"""Training of the toy-world model (a checkout's tool, not part of the installed package).

The package ships the trained weights (``langchain_adaptive_rag.toyworld.TOY_MODEL_PATH``);
this folder holds what made them, run from the repository root:
``python -m toyworld_training.train --out DIR [--quick] [--device D]``.

- ``toyworld_training.data``: the training text, a seeded mix of examples in the
  graphs' prompt format over the world's known facts and fresh practice entities;
- ``toyworld_training.circuit``: the reading circuit set into the first two layers;
- ``toyworld_training.order_circuit``: the year-order circuit for comparisons;
- ``toyworld_training.train``: the tokenizer, the model and the training loop.
"""
