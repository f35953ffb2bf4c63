"""Serving on neuron: the vLLM platform plugin (`vllm.platform_plugins` entry point `neuron`,
see plugin.py) with its platform, worker and model runner, and a tiny local model for demos and
tests. vLLM lives in its own environment (`make serve-demo`); nothing here imports it at import."""
