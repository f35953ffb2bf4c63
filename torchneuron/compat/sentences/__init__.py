"""The sentence-transformers battery (`torchneuron compat sentence-transformers`): encode and a
short contrastive fit with real MiniLM weights on neuron against the CPU;
reports/sentence-transformers.{json,md}.

- `cases.py`: "encode" and "fit" with all-MiniLM-L6-v2, against the CPU.
- `command.py`: `torchneuron compat sentence-transformers`, every case of cases.py."""
