"""Where a library that already knows the device `neuron` misses it in one place, the smallest
correction, applied when that library is imported (never by importing it ourselves)."""

from .post_import import when_imported
from .transformers_pipeline import fix_pipeline_device


def install() -> None:
    """Called once by torchneuron/__init__.py."""
    when_imported("transformers.pipelines.base", fix_pipeline_device)
