"""Runs the serving tests' prompts through one vLLM engine in a process of its own and prints
JSON: the prompts' token ids, the greedy tokens and their log-probabilities, the seeded
samples, and for every worker its rank, device, the backend of its tensor-parallel device group
and where its weights and KV cache live. The platform is vLLM's choice
(`VLLM_TARGET_DEVICE=cpu`, or `VLLM_PLUGINS` leaving neuron out, gives its CPU platform).

    python tests/serving/engine_run.py <model dir> [--tensor-parallel-size N] [--compile | --graphs]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from serving_common import (  # noqa: E402
    MAX_MODEL_LEN, MAX_TOKENS, PROMPTS, rms_norm_priorities)

# collective_rpc sends the probe below to the worker processes by value.
os.environ["VLLM_ALLOW_INSECURE_SERIALIZATION"] = "1"

SEEDED = dict(temperature=0.8, top_p=0.9, top_k=40, seed=7)


def worker_placement(worker) -> dict:
    import torch.distributed as dist
    from vllm.distributed import get_tp_group

    runner = worker.model_runner
    return {
        "rank": worker.rank,
        "device": str(worker.device),
        "tp_backend": str(dist.get_backend(get_tp_group().device_group)),
        "weights": sorted({str(p.device) for p in runner.model.parameters()}),
        "kv_cache": sorted({str(t.device) for t in runner.kv_caches}),
        "rms_norm_priorities": rms_norm_priorities(worker),
        "graph_replays": getattr(runner.model, "replays", None),
    }


def chosen_logprobs(completion) -> list[float]:
    """The log-probability of each token greedy decoding chose (vLLM's raw logprobs, from the
    float32 logits)."""
    return [step[token].logprob for token, step in zip(completion.token_ids, completion.logprobs)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("--tensor-parallel-size", type=int, default=1)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--compile", action="store_true",
                      help="vLLM's default torch.compile mode (with decode graphs) instead "
                           "of eager")
    mode.add_argument("--graphs", action="store_true",
                      help="no torch.compile and no enforce_eager: neuron's decode graphs")
    args = parser.parse_args()

    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    # float32, as the model is saved: vLLM's "auto" would run a float32 model in bfloat16.
    graphs = {"compilation_config": {"mode": 0}} if args.graphs else {}
    llm = LLM(model=args.model, dtype="float32", max_model_len=MAX_MODEL_LEN, seed=0,
              enforce_eager=not (args.compile or args.graphs), kv_cache_memory_bytes=32 << 20,
              max_num_seqs=16, tensor_parallel_size=args.tensor_parallel_size, **graphs)
    # With each chosen token's log-probability: the logits, compared across platforms.
    greedy = llm.generate(PROMPTS, SamplingParams(temperature=0, max_tokens=MAX_TOKENS,
                                                  ignore_eos=True, logprobs=0), use_tqdm=False)
    seeded = llm.generate(PROMPTS, SamplingParams(max_tokens=MAX_TOKENS, ignore_eos=True,
                                                  **SEEDED), use_tqdm=False)
    print("RESULT " + json.dumps({
        "platform": current_platform.device_type,
        "prompt_ids": [list(o.prompt_token_ids) for o in greedy],
        "greedy": [list(o.outputs[0].token_ids) for o in greedy],
        "greedy_logprobs": [chosen_logprobs(o.outputs[0]) for o in greedy],
        "seeded": [list(o.outputs[0].token_ids) for o in seeded],
        "workers": llm.collective_rpc(worker_placement),
    }))


if __name__ == "__main__":
    main()
