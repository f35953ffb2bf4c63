"""What libraries written for AWS's TorchNeuron expect of the device: the smallest correction
where one misses `neuron` or fails the way neuron is served (applied when that library is
imported, never by importing it ourselves), and one core per launched process.

- `post_import.py`: runs a function on a module right after its first import, without
  importing it.
- `transformers_pipeline.py`: transformers' `pipeline(...)` devices (an integer, none,
  `device_map="auto"`) mean neuron.
- `transformers_serve.py`: `transformers serve` stops its generation threads on Ctrl-C and
  answers bad requests (max_tokens below 1, a prompt that fills the context) with vLLM's 400s.
- `launcher_rank.py`: a process started by torchrun or `accelerate launch` starts on
  neuron:LOCAL_RANK."""

from ..runtime import device_state
from .launcher_rank import start_on_local_rank
from .post_import import when_imported
from .transformers_pipeline import fix_pipeline_device
from .transformers_serve import fix_shutdown, fix_validation


def install() -> None:
    """Called once by torchneuron/__init__.py."""
    when_imported("transformers.pipelines.base", fix_pipeline_device)
    when_imported("transformers.cli.serving.server", fix_shutdown)
    when_imported("transformers.cli.serving.utils", fix_validation)
    device_state.on_configured(start_on_local_rank)
