"""The Trainium time model: a step's time on a machine this one is not, predicted from a trace
of the step at full size (FakeTensorMode) priced per engine with the figures of the machine
table (runtime/profiles.py, MACHINES). `torchneuron predict` is its command; docs/time-model.md
says what it models, what it does not, and how far off it is."""

from .layout import Layout, machine_named
from .predict import Prediction, predict, trace_transformer
from . import engines
from .price import price
from .trace import collective, mark_resident, trace
from .transformer import CONFIGS, TransformerConfig, config_named

__all__ = ["CONFIGS", "engines", "Layout", "Prediction", "TransformerConfig", "collective",
           "config_named",
           "machine_named", "mark_resident", "predict", "price", "trace", "trace_transformer"]
