"""vLLM's decode steps on neuron replay device graphs (torchneuron/serving/decode_graphs.py), as
vLLM's do on CUDA: captured for vLLM's capture sizes unless `enforce_eager`, dispatched by
vLLM for uniform decode batches (padded to the next capture size), with greedy tokens equal to
Hugging Face `generate()` on the CPU. The engine runs in this process
(VLLM_ENABLE_V1_MULTIPROCESSING=0) so that its runner can be inspected. Each test runs on the
model uncompiled (`compilation_config` mode 0: the graphs are all that differs from eager) and
compiled (vLLM's default mode, Inductor's C++ code, which calls oneDNN's linear, an op outside
ATen), one engine at a time."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from serving_common import MAX_MODEL_LEN, MAX_TOKENS, PROMPTS  # noqa: E402

pytestmark = pytest.mark.slow

MAX_NUM_SEQS = 8
CAPTURE_SIZES = [1, 2, 4, 8]
# The engine's compile settings, per fixture parameter.
COMPILATION = {"uncompiled": {"compilation_config": {"mode": 0}}, "compiled": {}}


def engine_config(model_dir, **options):
    from vllm.engine.arg_utils import EngineArgs
    return EngineArgs(model=str(model_dir), dtype="float32", max_model_len=MAX_MODEL_LEN,
                      max_num_seqs=MAX_NUM_SEQS, kv_cache_memory_bytes=32 << 20,
                      **options).create_engine_config()


@pytest.fixture(scope="module", params=list(COMPILATION))
def llm(request, model_dir):
    from vllm import LLM
    from vllm.platforms import current_platform

    assert current_platform.device_type == "neuron", "the neuron plugin did not activate"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        engine = LLM(model=str(model_dir), dtype="float32", max_model_len=MAX_MODEL_LEN,
                     seed=0, enforce_eager=False, kv_cache_memory_bytes=32 << 20,
                     max_num_seqs=MAX_NUM_SEQS, **COMPILATION[request.param])
        try:
            (state,) = engine.collective_rpc(graph_state)
            assert state["compiled"] == (request.param == "compiled"), state
            yield engine
        finally:
            engine.llm_engine.engine_core.shutdown()


def graph_state(worker) -> dict:
    from vllm.config import CompilationMode

    wrapper = worker.model_runner.model
    return {"wrapper": type(wrapper).__name__,
            "compiled": worker.vllm_config.compilation_config.mode != CompilationMode.NONE,
            "graphs": getattr(wrapper, "num_graphs", dict)(),
            "captures": getattr(wrapper, "captures", 0),
            "replays": getattr(wrapper, "replays", 0)}


def greedy(n: int = MAX_TOKENS):
    from vllm import SamplingParams
    return SamplingParams(temperature=0, max_tokens=n, ignore_eos=True)


def test_graphs_compiled_or_not_unless_enforce_eager(model_dir):
    from vllm.config import CUDAGraphMode

    graphs = engine_config(model_dir, enforce_eager=False, compilation_config={"mode": 0})
    assert graphs.compilation_config.cudagraph_mode == CUDAGraphMode.FULL_DECODE_ONLY
    assert graphs.compilation_config.cudagraph_capture_sizes == CAPTURE_SIZES
    assert graphs.compilation_config.max_cudagraph_capture_size == 8
    # `enforce_eager` (vLLM's default compile settings otherwise): neither compiled nor graphs.
    eager = engine_config(model_dir, enforce_eager=True)
    assert eager.compilation_config.cudagraph_mode == CUDAGraphMode.NONE
    assert eager.compilation_config.cudagraph_capture_sizes == []
    # Explicit sizes are kept (up to the largest decode batch); cudagraph_mode NONE is obeyed.
    sized = engine_config(model_dir, compilation_config={"mode": 0,
                                                         "cudagraph_capture_sizes": [1, 3, 64]})
    assert sized.compilation_config.cudagraph_capture_sizes == [1, 3]
    off = engine_config(model_dir, compilation_config={"mode": 0, "cudagraph_mode": "NONE"})
    assert off.compilation_config.cudagraph_mode == CUDAGraphMode.NONE
    # `vllm serve`'s spelling of the same: no torch.compile, graphs.
    from vllm.engine.arg_utils import EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser
    cli = EngineArgs.from_cli_args(EngineArgs.add_cli_args(FlexibleArgumentParser()).parse_args(
        ["--model", str(model_dir), "--max-num-seqs", str(MAX_NUM_SEQS), "-cc.mode=none"]))
    served = cli.create_engine_config().compilation_config
    assert served.cudagraph_mode == CUDAGraphMode.FULL_DECODE_ONLY
    assert served.cudagraph_capture_sizes == CAPTURE_SIZES
    # vLLM's default mode compiles the model; its Inductor code is captured as well.
    compiled = engine_config(model_dir)
    assert compiled.compilation_config.mode != 0
    assert compiled.compilation_config.cudagraph_mode == CUDAGraphMode.FULL_DECODE_ONLY
    assert compiled.compilation_config.cudagraph_capture_sizes == CAPTURE_SIZES


def test_each_capture_size_has_a_graph_broken_at_each_attention(llm):
    (state,) = llm.collective_rpc(graph_state)
    assert state["wrapper"] == "NeuronGraphWrapper"
    assert state["captures"] == len(CAPTURE_SIZES)
    # Two layers: their KV-cache updates and attentions run eagerly between the graphs: three
    # uncompiled (nothing runs between a layer's KV-cache update and its attention), five
    # compiled (Inductor schedules some of the layer's other work there).
    graphs = 5 if state["compiled"] else 3
    assert state["graphs"] == {n: (graphs, 4) for n in CAPTURE_SIZES}


@pytest.mark.parametrize("batch", [1, 3, 5])
def test_greedy_tokens_from_replayed_graphs_match_hf_on_cpu(llm, hf_greedy, batch):
    # 3 and 5 requests decode in batches padded to the graphs of 4 and 8.
    (before,) = llm.collective_rpc(graph_state)
    outs = llm.generate(PROMPTS[:batch], greedy(), use_tqdm=False)
    (after,) = llm.collective_rpc(graph_state)
    for out in outs:
        assert list(out.outputs[0].token_ids) == hf_greedy(out.prompt_token_ids)
    # Every decode step after the first token replays a graph (a batch shrinks as nothing
    # finishes early here: all requests ask for the same number of tokens).
    assert after["replays"] - before["replays"] >= MAX_TOKENS - 1
    assert after["captures"] == before["captures"], "no capture after start-up"


def test_continuous_batching_mixes_graph_and_eager_steps(llm, hf_greedy):
    # 15 requests, 8 at a time, asking for 3 to 16 tokens: as requests finish, others start,
    # so prefill and decode share steps (eager) between uniform decode steps (graphs), and the
    # decode batch shrinks and grows between graph sizes.
    prompts = [p + f" {i}" for i in range(3) for p in PROMPTS]
    params = [greedy(3 + (5 * i) % 14) for i in range(len(prompts))]
    (before,) = llm.collective_rpc(graph_state)
    outs = llm.generate(prompts, params, use_tqdm=False)
    (after,) = llm.collective_rpc(graph_state)
    for out, p in zip(outs, params):
        assert list(out.outputs[0].token_ids) == hf_greedy(out.prompt_token_ids, p.max_tokens)
    assert after["replays"] > before["replays"]


def test_replays_show_in_the_profiler(llm):
    from torch.profiler import ProfilerActivity, profile

    # The engine runs in this process: its replays are this process's profiler events.
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        llm.generate(PROMPTS[:2], greedy(4), use_tqdm=False)
    replays = [e for e in prof.events() if e.name == "NeuronGraph.replay"]
    # 3 decode steps of a batch of 2, each replaying 3 graphs.
    assert len(replays) >= 3 * 3


def test_an_empty_segment_is_dropped_without_hiding_other_warnings(monkeypatch):
    # Between a layer's KV-cache update and its attention a segment records nothing: dropped,
    # and of capture_end's warnings only "the graph is empty" is silenced.
    import warnings

    import torch

    from torchneuron.serving.decode_graphs import NeuronDecodeCapture

    capture_end = torch.neuron.NeuronGraph.capture_end

    def capture_end_with_another_warning(graph):
        warnings.warn("another warning of capture_end", UserWarning)
        capture_end(graph)

    monkeypatch.setattr(torch.neuron.NeuronGraph, "capture_end", capture_end_with_another_warning)
    capture = NeuronDecodeCapture()
    with torch.neuron.stream(torch.neuron.Stream()), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        capture._begin_segment()
        capture._end_segment()
    assert capture.graphs == [] and capture.segments == []
    assert [str(w.message) for w in seen] == ["another warning of capture_end"]
