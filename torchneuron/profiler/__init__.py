"""Device activities for torch.profiler (recorded in csrc/profiler, handed to Kineto through
PyTorch's PrivateUse1 profiler registry) and the estimate of their time on Trainium: a roofline
per kernel, a table column, a second trace track and a one-screen step summary.

- `roofline.py`: the Trainium time of one kernel, estimated from a roofline and the profile table.
- `summary.py`: a step's estimated time (the one-screen summary, the key_averages column).
- `trace.py`: the estimated time as a second track in a Chrome/Perfetto trace.
- `cli.py`: `torchneuron estimate SCRIPT`, a script's estimated Trainium time."""

from .roofline import Estimate, estimate_activity, estimate_records
from .summary import StepEstimate, estimate_step, summary, table
from .trace import add_estimated_track, export_chrome_trace, tensorboard_trace_handler

__all__ = ["Estimate", "estimate_activity", "estimate_records", "StepEstimate", "estimate_step",
           "summary", "table", "add_estimated_track", "export_chrome_trace",
           "tensorboard_trace_handler"]
