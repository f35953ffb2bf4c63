"""The Trainium time model: a step's time on a machine this one is not, predicted from a trace
of the step at full size (FakeTensorMode) priced per engine with the figures of the machine
table (runtime/profiles.py, MACHINES). `torchneuron predict` is its command; docs/time-model.md
says what it models, what it does not, and how far off it is.

- `layout.py`: how the user declares a step's ranks (tp, pp, fsdp, the rest data parallel).
- `transformer.py`: a Llama-style decoder as one rank of a tensor-parallel group runs it.
- `trace.py`: a step's ops under FakeTensorMode, with shapes, dtypes and FLOPs, never run.
- `engines.py`: the time of one op on one rank, per engine, from the machine's figures.
- `collectives.py`: the time of one collective over ranks, as ring algorithms take it.
- `price.py`: prices a trace on one rank, op by op (engines, collectives, stalls).
- `predict.py`: a step's predicted time: trace, price, and what the trace does not hold.
- `cli.py`: `torchneuron predict`, the command."""

from .layout import Layout, machine_named
from .predict import Prediction, predict, trace_transformer
from . import engines
from .price import price
from .trace import collective, mark_resident, trace
from .transformer import CONFIGS, TransformerConfig, config_named

__all__ = ["CONFIGS", "engines", "Layout", "Prediction", "TransformerConfig", "collective",
           "config_named",
           "machine_named", "mark_resident", "predict", "price", "trace", "trace_transformer"]
