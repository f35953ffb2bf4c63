"""The battery's worker process: checks the model types named on its command line one after the
other and appends one JSON line per event to a file, so that the parent (models_runner.py) sees
which architecture was running if this process dies (a segfault or abort in a model is recorded
as that architecture's failure, and the battery goes on in a fresh worker).

  python -m torchneuron.compat.models_worker RESULTS.jsonl THREADS TYPE [TYPE ...]
"""

from __future__ import annotations

import json
import logging
import os
import sys
import warnings


def _quiet() -> None:
    # Hundreds of tiny random models warn about their own configs; the report says what matters.
    # (Settings for transformers, written before it is imported; torchneuron reads none of them.)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)


def main(argv: list[str]) -> int:
    _quiet()
    results, threads, model_types = argv[0], int(argv[1]), argv[2:]
    import torch

    torch.set_num_threads(threads)
    from .models_catalog import by_type
    from .models_check import check

    with open(results, "a") as out:
        for model_type in model_types:
            out.write(json.dumps({"event": "start", "model_type": model_type}) + "\n")
            out.flush()
            record = check(by_type(model_type))
            out.write(json.dumps({"event": "done", "record": record}, default=str) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
