"""Compatibility batteries, each run on neuron against the CPU with reports under reports/:
ops/ (PyTorch's OpInfo databases) and models/ (Hugging Face architectures), beside what both
share: pool.py and worker.py (crash-isolating worker processes) and judge.py (Mismatch, compare).

The batteries:
- `ops/`: the op battery, every OpInfo of PyTorch's op databases.
- `models/`: the model battery, every Hugging Face architecture built tiny, plus MiniLM.
- `diffusion/`: the diffusers battery, model classes and pipelines.
- `adapters/`: the PEFT battery, adapter methods trained and merged.
- `sentences/`: the sentence-transformers battery, encode and a contrastive fit.
- `vision/`: the torchvision and timm batteries (run in the torch 2.14 environment).

What they share:
- `judge.py`: the one result judge, a neuron result against the CPU's, leaf by leaf.
- `pool.py`: the one crash-isolating worker pool (a crash or hang costs one case).
- `worker.py`: a battery worker process, driven by JSON lines.
- `staged.py`: staged cases, the shape of the small batteries (diffusers, PEFT, sentences).
- `random_draws.py`: a model's own random numbers taken from the CPU run into the neuron run.
- `outcomes.py`: one outcome word per case, and the comparison of two runs.
- `report_page.py`: the batteries' self-contained HTML report.
- `nightly.py`: `torchneuron compat all`, every battery into one dated run, compared with the
  previous.
- `cli.py`: `torchneuron compat ...`, the batteries' command line."""
