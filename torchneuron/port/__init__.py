"""`torchneuron port`: finds the code that ties a program to CUDA and rewrites it to
device-agnostic PyTorch (torch.accelerator, torch.amp, torch.distributed defaults).
A pure source tool: nothing here imports torch, so it runs fast and without the device.

- `cli.py`: `torchneuron port check|fix|codes`, the command line over engine and report.
- `engine.py`: one file through the tool: read, parse, scan, rewrite, check, rescan and write.
- `sources.py`: which files to read, and reading them (Python and notebooks, UTF-8 only).
- `notebook.py`: Jupyter notebooks as one module, and the rewrite back into their cells.
- `syntax.py`: is this Python at all (Python's parser first, then libcst).
- `rules.py`: the one table of codes: what each means, what its fix writes or its hint.
- `scanner.py`: walks one module and records every CUDA-ism as a finding, with its fix.
- `findings.py`: what the scanner and its handlers share (Finding, Fix, Scan, Reporter).
- `cuda_api.py`: the torch.cuda API, looked up in the rules and rewritten to its target.
- `devices.py`: device and backend arguments (`.cuda()`, "cuda", NCCL, DDP's `device_ids`).
- `conditions.py`: tests of a device's type against 'cuda', and the idioms built on them.
- `guards.py`: a fix never makes a program worse where a device test decides an `if`.
- `facts.py`: what the code around a node proves (names through imports, an accelerator,
  integers).
- `rewriter.py`: applies a scan's fixes, then settles imports and writes out the accelerator.
- `hoist.py`: the last step of a rewrite: the accelerator placeholders written out.
- `cst_util.py`: small libcst helpers (names, strings, argument lists keeping their format).
- `report.py`: how results are shown (one line per finding, counts, JSON)."""
