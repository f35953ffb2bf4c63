"""Each ecosystem entry point runs in a fresh process, as a user's program would: a script file
(spawned workers re-import it), an environment with no neuron or accelerate setting at all, and
its result as one JSON line. The repository root goes on PYTHONPATH only so that the top-level
`torch_neuronx` shim is importable as it is from an installed wheel (an editable install made
before the shim existed does not map it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# What a user has not set: any of these would be a neuron- or accelerate-specific line.
_UNSET_PREFIXES = ("NEURON_", "ACCELERATE_", "TORCH_DEVICE_BACKEND_AUTOLOAD", "TORCHELASTIC_",
                   "LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                   "MASTER_PORT")


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_UNSET_PREFIXES)}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_VERBOSITY="error",
               TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def run_script(tmp_path: Path, code: str, *args: str, launcher: tuple[str, ...] | None = None,
               timeout: float = 300, **env: str) -> dict:
    """Writes `code` to a script in `tmp_path`, runs it (under `launcher`, e.g. accelerate
    launch, when given) and returns the JSON of its last line starting with '{'."""
    script = tmp_path / "program.py"
    script.write_text(textwrap.dedent(code))
    command = [*(launcher or (sys.executable,)), str(script), *args]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path,
                          env=clean_env(**env), timeout=timeout)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout[-2000:]
    return json.loads(lines[-1])


def launcher(module: str, *args: str) -> tuple[str, ...]:
    """`python -m accelerate.commands.launch ...` or `python -m torch.distributed.run ...`:
    the console scripts of the venv, found through this interpreter."""
    return (sys.executable, "-m", module, *args)
