"""The PEFT battery (`torchneuron compat peft`): LoRA, DoRA, IA3, prefix and prompt tuning on a
decoder, an encoder and an encoder-decoder, trained a few steps on neuron against the CPU, and
merge_and_unload() checked; reports/peft.{json,md}. Pieces: cases, command."""
