"""Compatibility batteries: PyTorch's OpInfo database (ops.py) and Hugging Face architectures
(models.py), each run on neuron against the CPU, with reports under reports/."""
