"""The model battery (`torchneuron compat models`): every Hugging Face architecture built tiny
from its config, plus real MiniLM weights, run on neuron against the CPU; reports/models.*."""
