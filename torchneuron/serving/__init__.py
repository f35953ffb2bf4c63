"""Serving on neuron: the vLLM platform plugin (`vllm.platform_plugins` entry point `neuron`,
see plugin.py) with its platform, worker and model runner, and a tiny local model for demos and
tests. vLLM lives in its own environment (`make serve-demo`); nothing here imports it at import.

The plugin:
- `plugin.py`: the entry point; `register()` activates the neuron platform where there is a
  device.
- `neuron_platform.py`: `NeuronPlatform`, vLLM's view of the device, taking vLLM CPU's rules.
- `worker.py`: `NeuronWorker`, one vLLM worker process per neuron device.
- `model_runner.py`: `NeuronModelRunner`, weights, KV cache and activations on neuron.
- `kv_cache_size.py`: how many bytes of neuron memory the KV cache gets.
- `host_cache.py`: vLLM's shutdown call to `empty_host_cache()`, which would crash here.
- `decode_graphs.py`: decode steps replayed from neuron device graphs, broken at attention.

vLLM CPU's kernels on neuron tensors:
- `vllm_kernels.py`: the vLLM CPU kernels the plugin calls itself, in one place.
- `custom_ops.py`: vLLM's custom ops (rotary embedding, norms, activations) take their CPU
  kernels.
- `ir_kernels.py`: vLLM's RMS norms run vLLM CPU's compiled kernels in eager mode.
- `packed_linear.py`: linear layers run oneDNN's matmul on a prepacked copy of the weight.
- `greedy.py`: greedy sampling takes the CPU's kernel, `vllm._C.greedy_argmax`.

Demos and tests:
- `tiny_model.py`: a tiny Llama with a tokenizer built offline, saved as a local model folder.
- `server_process.py`: a server started as a process group, waited for and stopped with its
  group.
- `demo.py`: `make serve-demo`: `vllm serve` on the tiny model, asked by the `openai` client."""
