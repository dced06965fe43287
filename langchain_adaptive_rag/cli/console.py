"""How the command line's own process prints: library progress bars and notices off."""

from __future__ import annotations

import warnings

__all__ = ["quiet_model_libraries"]


def quiet_model_libraries() -> None:
    """The command line shows its own progress: no weight-loading bars, no library notices.

    Set for this process only (the command line owns it); the library itself changes no
    logging or warning settings.
    """
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers(\.|$)")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"transformers(\.|$)")
