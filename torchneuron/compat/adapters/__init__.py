"""The PEFT battery (`torchneuron compat peft`): LoRA, DoRA, IA3, prefix and prompt tuning on a
decoder, an encoder and an encoder-decoder, trained a few steps on neuron against the CPU, and
merge_and_unload() checked; reports/peft.{json,md}.

- `cases.py`: the PEFT methods on three tiny architectures, staged as "train" and "merge".
- `command.py`: `torchneuron compat peft`, every case of cases.py."""
