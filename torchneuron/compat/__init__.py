"""Compatibility batteries, each run on neuron against the CPU with reports under reports/:
ops/ (PyTorch's OpInfo databases) and models/ (Hugging Face architectures), beside what both
share: pool.py and worker.py (crash-isolating worker processes) and judge.py (Mismatch, compare)."""
