"""The op battery (`torchneuron compat ops`): every OpInfo of PyTorch's op databases, each sample
run on neuron and on the CPU in four variants, judged case by case; reports/ops.{json,md}.

- `command.py`: `torchneuron compat ops`, the battery's entry.
- `cases.py`: what runs (which OpInfos and dtypes, samples, tolerances), read from OpInfo
  metadata.
- `runner.py`: one unit (an OpInfo, a dtype) in this process, each sample in four variants.
- `jobs.py`: the battery on the shared worker pool (units as jobs, lost cases as records).
- `report.py`: reports/ops.json and reports/ops.md."""
