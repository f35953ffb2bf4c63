"""The README's demo: a small GPT trained on neuron next to the same run on CPU."""
