"""``python -m langchain_adaptive_rag.cli``: the ``adaptive-rag`` command."""

import sys

from langchain_adaptive_rag.cli import main

if __name__ == "__main__":
    sys.exit(main())
