"""Memory snapshots shaped like torch.cuda.memory's: PyTorch's own _memory_viz reads and draws
them, the history is bounded by max_entries, and NEURON_OOM_SNAPSHOT writes one on an
out-of-memory error whose message names the file."""

import base64
import json
import pickle
import re

import pytest
import torch
from torch.cuda import _memory_viz

from torchneuron._C import profiler as _profiler_c


@pytest.fixture
def history():
    torch.neuron.memory._record_memory_history(max_entries=1000)
    yield
    torch.neuron.memory._record_memory_history(enabled=None)


def allocate_and_free():
    a = torch.randn(1000).to("neuron")
    b = torch.randn(300_000).to("neuron")  # a large-pool block
    keep_addr = b.data_ptr()
    freed_addr = a.data_ptr()
    torch.testing.assert_close((b[:1000] + a).cpu(), b.cpu()[:1000] + a.cpu())
    del a
    return b, keep_addr, freed_addr


def test_snapshot_has_cuda_structure(history):
    b, keep, freed = allocate_and_free()
    snap = torch.neuron.memory._snapshot()
    assert set(snap) == {"segments", "device_traces", "allocator_settings"}
    seg = next(s for s in snap["segments"] if s["address"] == keep)
    assert seg["blocks"][0]["state"] == "active_allocated"
    assert seg["allocated_size"] == seg["total_size"] >= b.numel() * 4
    assert seg["segment_type"] == "large"
    actions = [(e["action"], e["addr"]) for e in snap["device_traces"][0]]
    assert ("alloc", keep) in actions
    assert ("alloc", freed) in actions and ("free_completed", freed) in actions


def test_allocations_carry_their_python_frames(history):
    b, keep, freed = allocate_and_free()
    snap = torch.neuron.memory._snapshot()
    alloc = next(e for e in snap["device_traces"][0] if e["action"] == "alloc"
                 and e["addr"] == keep)
    # The frames CUDA's snapshots hold: innermost first, this file's function among them.
    assert {"filename", "line", "name"} <= set(alloc["frames"][0])
    here = [f for f in alloc["frames"] if f["filename"] == __file__]
    assert [f["name"] for f in here][:2] == ["allocate_and_free",
                                             "test_allocations_carry_their_python_frames"]
    freed_entry = next(e for e in snap["device_traces"][0] if e["action"] == "free_completed"
                       and e["addr"] == freed)
    assert any(f["name"] == "test_allocations_carry_their_python_frames"
               for f in freed_entry["frames"])
    # The live block carries its allocation's frames (memory_viz's segment view shows them).
    block = next(s for s in snap["segments"] if s["address"] == keep)["blocks"][0]
    assert block["frames"] == alloc["frames"]
    _memory_viz.segment_plot(snap)


def test_context_none_records_no_frames():
    torch.neuron.memory._record_memory_history(context=None, max_entries=100)
    try:
        allocate_and_free()
        entries = torch.neuron.memory._snapshot()["device_traces"][0]
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    assert entries and all(e["frames"] == [] for e in entries)


def test_memory_viz_renders_our_allocations(history, tmp_path):
    b, keep, freed = allocate_and_free()
    path = tmp_path / "snap.pickle"
    torch.neuron.memory._dump_snapshot(str(path))
    snap = pickle.loads(path.read_bytes())
    for html in (_memory_viz.trace_plot(snap), _memory_viz.segment_plot(snap)):
        assert html.lstrip().startswith("<!DOCTYPE html>") or "<html" in html
        embedded = json.loads(re.search(r"(\[\{\"name\": \"snapshot.pickle\".*?\}\])", html)
                              .group(1))[0]["base64"]
        drawn = pickle.loads(base64.b64decode(embedded))
        assert keep in {s["address"] for s in drawn["segments"]}
    # The text renderers walk every field the viewers read.
    assert "free completed" in _memory_viz.trace(snap)  # the block `a` freed
    assert "segment" in _memory_viz.segsum(snap).lower()
    _memory_viz.trace_plot(snap, filter_freed=True)


def test_history_keeps_the_last_max_entries():
    torch.neuron.memory._record_memory_history(max_entries=5)
    try:
        for _ in range(10):
            torch.ones(10, device="neuron")
        # The allocator's events (a free is two entries).
        assert len(_profiler_c.memory_history()) == 5
        assert torch.neuron.memory._snapshot()["device_traces"][0][-1]["action"] == "free_completed"
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    torch.ones(10, device="neuron")
    assert torch.neuron.memory._snapshot()["device_traces"][0] == []


@pytest.mark.parametrize("kwargs, message", [
    ({"enabled": "yes"}, "enabled"), ({"context": "x"}, "context"), ({"stacks": "cpp"}, "stacks"),
    ({"max_entries": -1}, "max_entries")])
def test_record_memory_history_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        torch.neuron.memory._record_memory_history(**kwargs)


def test_oom_writes_a_snapshot_and_says_where(tmp_path, python):
    target = tmp_path / "oom-%p.pickle"
    code = (
        "import pickle, torch, torchneuron, os\n"
        "keep = torch.empty(4 << 20, dtype=torch.uint8, device='neuron')\n"
        "try:\n"
        "    torch.empty(64 << 20, dtype=torch.uint8, device='neuron')\n"
        "except torch.OutOfMemoryError as e:\n"
        "    msg = str(e)\n"
        f"path = {str(target)!r}.replace('%p', str(os.getpid()))\n"
        "assert path in msg and 'NEURON_OOM_SNAPSHOT' in msg, msg\n"
        "snap = pickle.load(open(path, 'rb'))\n"
        "actions = [e['action'] for e in snap['device_traces'][0]]\n"
        "assert 'oom' in actions and 'alloc' in actions, actions\n"
        "assert keep.data_ptr() in [s['address'] for s in snap['segments']]\n"
        "torch.neuron.empty_cache()\n"
        "x = torch.ones(10, device='neuron')\n"
        "torch.testing.assert_close(x.cpu(), torch.ones(10))\n"
        "print('ok')\n")
    out = python(code, env={"NEURON_HBM_BYTES": "32MiB", "NEURON_OOM_SNAPSHOT": str(target)})
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_oom_without_the_variable_writes_nothing(tmp_path, python):
    code = ("import torch, torchneuron\n"
            "try:\n"
            "    torch.empty(64 << 20, dtype=torch.uint8, device='neuron')\n"
            "except torch.OutOfMemoryError as e:\n"
            "    assert 'snapshot' not in str(e), str(e)\n"
            "    print('ok')\n")
    out = python(code, env={"NEURON_HBM_BYTES": "32MiB"})
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
