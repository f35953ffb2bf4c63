"""The sentence-transformers battery (`torchneuron compat sentence-transformers`): encode and a
short contrastive fit with real MiniLM weights on neuron against the CPU;
reports/sentence-transformers.{json,md}. Pieces: cases, command."""
