"""Integration tests of the batched decoding engine (``langchain_adaptive_rag.engine``)."""
