"""vLLM's `LLM` on neuron, held to Hugging Face `generate()` on the CPU and to vLLM's own CPU
platform: greedy tokens, seeded sampling, prefix caching and chunked prefill, where the KV cache
lives, and the error for a prompt longer than the model's context. The neuron engine runs in this
process (VLLM_ENABLE_V1_MULTIPROCESSING=0) so that its worker can be inspected; vLLM's CPU
platform runs in a process of its own (tests/serving/engine_run.py), before it."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("vllm")

from serving_common import (  # noqa: E402
    MAX_MODEL_LEN, MAX_TOKENS, PROMPTS, rms_norm_priorities, run_script)

pytestmark = pytest.mark.slow

KV_CACHE_BYTES = 32 << 20
BATCHED_TOKENS = 64  # smaller than the longest prompt: its prefill is chunked
SEEDED = dict(temperature=0.8, top_p=0.9, top_k=40, seed=7)


@pytest.fixture(scope="module")
def vllm_cpu(model_dir) -> dict:
    """vLLM's CPU platform on the same prompts: run, and exited, before the neuron engine. It is
    chosen as docs/serving.md says to compare: `VLLM_PLUGINS` leaving neuron out."""
    out = run_script("engine_run.py", str(model_dir), env={"VLLM_PLUGINS": ""})
    return json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT ")))


@pytest.fixture(scope="module")
def llm(model_dir, vllm_cpu):
    from vllm import LLM
    from vllm.platforms import current_platform

    assert current_platform.device_type == "neuron", "the neuron plugin did not activate"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        engine = LLM(model=str(model_dir), dtype="float32", max_model_len=MAX_MODEL_LEN,
                     seed=0, enforce_eager=True, kv_cache_memory_bytes=KV_CACHE_BYTES,
                     max_num_seqs=16, max_num_batched_tokens=BATCHED_TOKENS,
                     enable_prefix_caching=True, enable_chunked_prefill=True)
        yield engine
        engine.llm_engine.engine_core.shutdown()


def greedy(n: int = MAX_TOKENS):
    from vllm import SamplingParams
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)


def test_greedy_batch_matches_hf_on_cpu_and_vllm_cpu(llm, vllm_cpu, tokenizer, hf_greedy):
    outs = llm.generate(PROMPTS, greedy(), use_tqdm=False)
    lengths = {len(o.prompt_token_ids) for o in outs}
    assert len(lengths) == len(PROMPTS), "the prompts should all differ in length"
    for prompt, out, cpu_tokens in zip(PROMPTS, outs, vllm_cpu["greedy"]):
        assert list(out.prompt_token_ids) == tokenizer(prompt).input_ids
        tokens = list(out.outputs[0].token_ids)
        assert tokens == hf_greedy(out.prompt_token_ids), prompt
        assert tokens == cpu_tokens, prompt
    assert vllm_cpu["platform"] == "cpu" and vllm_cpu["workers"][0]["kv_cache"] == ["cpu"]


def test_logits_match_vllm_cpu_and_every_linear_layer_runs_packed(llm, vllm_cpu):
    # Every linear layer (the LM head's too) runs vLLM CPU's oneDNN matmul on a packed copy of
    # its neuron weight (torchneuron/serving/packed_linear.py), and the RMS norms run vLLM
    # CPU's kernels where vLLM CPU runs a chain of PyTorch ops (ir_kernels.py), so the logits
    # are vLLM CPU's: the chosen tokens' log-probabilities agree to float32 rounding.
    import torch
    from vllm import SamplingParams

    def linear_layers(worker):
        from vllm.model_executor.layers.linear import LinearBase
        from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

        from torchneuron.serving.packed_linear import ATTRIBUTE
        layers = [m for m in worker.model_runner.model.modules()
                  if isinstance(m, (LinearBase, ParallelLMHead))]
        return {"layers": len(layers),
                "packed": sum(getattr(m.__dict__.get(ATTRIBUTE), "handler", None) is not None
                              for m in layers),
                "weights": sorted({str(m.weight.device) for m in layers})}

    outs = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=MAX_TOKENS,
                                                ignore_eos=True, logprobs=0), use_tqdm=False)
    for out, cpu_tokens, cpu_logprobs in zip(outs, vllm_cpu["greedy"],
                                             vllm_cpu["greedy_logprobs"]):
        completion = out.outputs[0]
        assert list(completion.token_ids) == cpu_tokens
        logprobs = [step[token].logprob
                    for token, step in zip(completion.token_ids, completion.logprobs)]
        torch.testing.assert_close(torch.tensor(logprobs), torch.tensor(cpu_logprobs))
    (placement,) = llm.collective_rpc(linear_layers)
    # Two layers of qkv, o, gate_up and down projections, and the LM head.
    assert placement == {"layers": 9, "packed": 9, "weights": ["neuron:0"]}
    (priorities,) = llm.collective_rpc(rms_norm_priorities)
    assert priorities == [["vllm_cpu_c", "native"]] * 2
    assert vllm_cpu["workers"][0]["rms_norm_priorities"] == [["native"]] * 2


def test_seeded_sampling_is_reproducible_and_stays_in_the_cpus_nucleus(llm, model_dir):
    import torch
    from transformers import AutoModelForCausalLM
    from vllm import SamplingParams

    first = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True,
                                                 **SEEDED), use_tqdm=False)
    again = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True,
                                                 **SEEDED), use_tqdm=False)
    other = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True,
                                                 **{**SEEDED, "seed": 8}), use_tqdm=False)
    samples = [list(o.outputs[0].token_ids) for o in first]
    assert samples == [list(o.outputs[0].token_ids) for o in again]
    assert samples != [list(o.outputs[0].token_ids) for o in other]

    # Neuron has its own random stream (as CUDA's differs from the CPU's), so the samples are
    # not the CPU's; each must still be a token the CPU's top-k/top-p filter lets through.
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    for out, tokens in zip(first, samples):
        ids = torch.tensor([list(out.prompt_token_ids) + tokens])
        with torch.no_grad():
            logits = model(ids).logits[0, len(out.prompt_token_ids) - 1:-1]
        probs = torch.softmax(logits / SEEDED["temperature"], dim=-1)
        for step, token in enumerate(tokens):
            p, order = probs[step].sort(descending=True)
            before = torch.cumsum(p, 0) - p  # mass of the tokens ranked above
            allowed = order[(before < SEEDED["top_p"])][:SEEDED["top_k"]]
            assert token in allowed.tolist(), (step, token)


def test_prefix_caching_and_chunked_prefill(llm, tokenizer, hf_greedy):
    config = llm.llm_engine.vllm_config
    assert config.cache_config.enable_prefix_caching
    assert config.scheduler_config.enable_chunked_prefill
    block = config.cache_config.block_size
    shared = " ".join(["A long shared system prompt keeps the same blocks."] * 13)
    prompts = [shared + " First question?", shared + " Second, different question?"]
    assert max(block, BATCHED_TOKENS) < len(tokenizer(prompts[1]).input_ids) \
        < MAX_MODEL_LEN - MAX_TOKENS

    first = llm.generate(prompts[:1], greedy(), use_tqdm=False)[0]
    second = llm.generate(prompts[1:], greedy(), use_tqdm=False)[0]
    # The second request reuses the first one's full blocks of the shared prefix.
    assert (first.num_cached_tokens or 0) == 0
    assert second.num_cached_tokens >= block
    for out in (first, second):
        assert list(out.outputs[0].token_ids) == hf_greedy(out.prompt_token_ids)


def test_kv_cache_lives_in_neuron_memory(llm):
    def placement(worker):
        import torch
        runner = worker.model_runner
        kv = {t.untyped_storage().data_ptr(): t for t in runner.kv_caches}.values()
        return {
            "kv_devices": sorted({str(t.device) for t in kv}),
            "kv_bytes": sum(t.untyped_storage().nbytes() for t in kv),
            "weight_devices": sorted({str(p.device) for p in runner.model.parameters()}),
            "weight_bytes": sum(p.nbytes for p in runner.model.parameters()),
            "allocated": torch.neuron.memory_allocated(worker.device),
        }

    (worker,) = llm.collective_rpc(placement)
    config = llm.llm_engine.vllm_config
    model = config.model_config
    hf = model.hf_config
    # vLLM's own figure: the blocks it reported, times the bytes of one block in every layer.
    block_bytes = (config.cache_config.block_size * 2 * hf.num_key_value_heads
                   * model.get_head_size() * 4 * hf.num_hidden_layers)
    reported = config.cache_config.num_gpu_blocks * block_bytes
    assert worker["kv_devices"] == ["neuron:0"] and worker["weight_devices"] == ["neuron:0"]
    assert worker["kv_bytes"] == reported
    assert reported <= KV_CACHE_BYTES
    assert worker["allocated"] >= worker["kv_bytes"] + worker["weight_bytes"]


def test_enforce_eager_captures_no_decode_graphs(llm):
    def graph_mode(worker):
        runner = worker.model_runner
        return (type(runner.model).__name__, runner.compilation_config.cudagraph_mode.name,
                runner.cudagraph_dispatcher.get_capture_descs())

    # The model is vLLM's own, not wrapped in torchneuron's NeuronGraphWrapper.
    (state,) = llm.collective_rpc(graph_mode)
    assert state == ("LlamaForCausalLM", "NONE", [])


def test_too_long_prompt_gets_vllms_error_and_the_engine_keeps_serving(llm, hf_greedy):
    from vllm.exceptions import VLLMValidationError

    too_long = " ".join(["word"] * (2 * MAX_MODEL_LEN))
    with pytest.raises(VLLMValidationError, match="maximum context length is 256"):
        llm.generate([too_long], greedy(), use_tqdm=False)
    out = llm.generate(PROMPTS[1:2], greedy(), use_tqdm=False)[0]
    assert list(out.outputs[0].token_ids) == hf_greedy(out.prompt_token_ids)
