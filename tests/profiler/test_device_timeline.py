"""Device activities in torch.profiler (ProfilerActivity.PrivateUse1): every kernel the neuron
device runs is a device event with its time on the device clock, device, stream and the CPU op
that launched it; key_averages, export_chrome_trace, schedule and tensorboard_trace_handler
show them as they show CUDA kernels."""

import glob
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
from torch.autograd import DeviceType

from torchneuron._C import profiler as _profiler_c

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def work(device):
    torch.manual_seed(0)
    a = torch.randn(64, 32).to(device)
    b = torch.randn(32, 16).to(device)
    c = a @ b                       # native kernel (mm)
    d = c + c                       # native fast path (add)
    e = torch.cumsum(d, dim=0)      # boxed fallback
    return e.sum(dim=1)             # boxed fallback (reduction)


def profiled(**kwargs):
    with profile(activities=ACTIVITIES, **kwargs) as prof:
        out = work("neuron")
        torch.neuron.synchronize()
    return prof, out


def test_kernels_are_device_events_linked_to_their_cpu_op():
    prof, out = profiled()
    torch.testing.assert_close(out.cpu(), work("cpu"))
    kernels = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]
    names = {e.name for e in kernels}
    assert {"aten::mm", "aten::add", "aten::cumsum", "aten::sum"} <= names
    for e in kernels:
        assert e.time_range.end >= e.time_range.start
        assert e.device_index == 0
    # The CPU op that launched each kernel carries its device time, as CUDA's ops do.
    ops = {e.key: e for e in prof.key_averages()}
    for name in ("aten::mm", "aten::add", "aten::cumsum", "aten::sum"):
        assert ops[name].device_time_total > 0, name
    assert ops["aten::randn"].device_time_total == 0  # ran on the CPU


def test_table_sorts_by_device_time():
    prof, _ = profiled()
    text = prof.key_averages().table(sort_by="device_time_total", row_limit=10)
    assert "aten::mm" in text
    assert "neuron" in text.lower()


def test_chrome_trace_has_a_device_row_linked_to_cpu_ops(tmp_path):
    prof, _ = profiled()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert {"aten::mm", "aten::add", "aten::cumsum"} <= {k["name"] for k in kernels}
    cpu_ids = {e["args"].get("External id") for e in events if e.get("cat") == "cpu_op"}
    for k in kernels:
        assert k["args"]["device"] == 0
        assert "stream" in k["args"] and k["dur"] >= 0
        assert k["args"]["correlation"] in cpu_ids
        assert json.loads(k["args"]["input_shapes"])
    mm = next(k for k in kernels if k["name"] == "aten::mm")
    assert json.loads(mm["args"]["input_shapes"]) == [[64, 32], [32, 16]]
    assert mm["args"]["input_dtypes"] == "Float,Float"


def test_schedule_and_tensorboard_trace_handler(tmp_path):
    with profile(activities=ACTIVITIES, schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
                 on_trace_ready=tensorboard_trace_handler(str(tmp_path))) as prof:
        for _ in range(5):
            work("neuron")
            prof.step()
    files = glob.glob(str(tmp_path / "*.pt.trace.json"))
    assert len(files) == 1
    events = json.loads(open(files[0]).read())["traceEvents"]
    mm = [e for e in events if e.get("cat") == "kernel" and e["name"] == "aten::mm"]
    assert len(mm) == 2  # two active steps, one matmul each


def test_ranges_and_marks_appear_on_the_device_row(tmp_path):
    with profile(activities=ACTIVITIES) as prof:
        with torch.neuron.nvtx.range("step {}", 3):
            assert torch.neuron.nvtx.range_push("inner") == 1
            work("neuron")
            assert torch.neuron.nvtx.range_pop() == 1
        torch.neuron.nvtx.mark("checkpoint")
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    names = {e["name"] for e in json.loads(path.read_text())["traceEvents"]
             if e.get("cat") == "gpu_user_annotation"}
    assert {"step 3", "inner", "checkpoint"} <= names
    assert torch.neuron.nvtx.range_pop() == -1  # none open, as nvtxRangePop


def test_nvtx_range_end_needs_an_open_id():
    rid = torch.neuron.nvtx.range_start("x")
    torch.neuron.nvtx.range_end(rid)
    with pytest.raises(ValueError, match="no open range"):
        torch.neuron.nvtx.range_end(rid)


def test_nothing_is_recorded_with_the_profiler_off():
    profiled()
    before = len(_profiler_c.records())
    assert not _profiler_c.recording()
    work("neuron")
    assert len(_profiler_c.records()) == before


def test_cpu_only_profiling_records_no_device_rows():
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        work("neuron")
    assert not [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def test_compiled_graphs_are_device_activities():
    def f(x, w):
        return torch.relu(x @ w) * 2

    compiled = torch.compile(f, backend="neuron")
    x, w = torch.randn(16, 8), torch.randn(8, 4)
    compiled(x.to("neuron"), w.to("neuron"))  # compile outside the profiled region
    with profile(activities=ACTIVITIES):
        out = compiled(x.to("neuron"), w.to("neuron"))
    torch.testing.assert_close(out.cpu(), f(x, w))
    graphs = [r for r in _profiler_c.records() if r["name"].startswith("compiled_graph")]
    assert len(graphs) == 1
    assert graphs[0]["inputs"] == [([16, 8], "Float"), ([8, 4], "Float")]
    assert graphs[0]["correlation"] > 0 and graphs[0]["end_ns"] >= graphs[0]["start_ns"]


def test_collectives_are_device_activities(python):
    code = (
        "import torch, torchneuron, torch.distributed as dist, socket\n"
        "from torch.profiler import profile, ProfilerActivity\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
        "dist.init_process_group('neuron', init_method=f'tcp://127.0.0.1:{port}', rank=0,"
        " world_size=1)\n"
        "t = torch.arange(6.).to('neuron')\n"
        "with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):\n"
        "    dist.all_reduce(t)\n"
        "torch.testing.assert_close(t.cpu(), torch.arange(6.))\n"
        "from torchneuron._C import profiler as _profiler_c\n"
        "names = [r['name'] for r in _profiler_c.records()]\n"
        "assert 'c10d::allreduce_' in names, names\n"
        "dist.destroy_process_group()\n"
        "print('ok')\n")
    out = python(code)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def test_host_device_copies_are_memcpy_activities(tmp_path):
    # Copies are device activities too, named and typed as CUDA's (Kineto's GPU_MEMCPY, "cat":
    # "gpu_memcpy" in the trace), linked to the aten::copy_ that issued them.
    x = torch.arange(12.0).view(3, 4)
    with profile(activities=ACTIVITIES) as prof:
        on_device = x.to("neuron")                      # HtoD
        twin = on_device.to("neuron:1")                 # DtoD
        back = (on_device * 2).cpu()                    # DtoH
        strided = on_device.t().contiguous()            # a DtoD copy with a layout change
    torch.testing.assert_close(back, x * 2)
    torch.testing.assert_close(twin.cpu(), x)
    torch.testing.assert_close(strided.cpu(), x.t().contiguous())
    copies = [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1
              and e.name.startswith("Memcpy")]
    names = [e.name for e in copies]
    assert "Memcpy HtoD (Host -> Device)" in names
    assert "Memcpy DtoH (Device -> Host)" in names
    assert "Memcpy DtoD (Device -> Device)" in names
    ops = {e.key: e for e in prof.key_averages()}
    assert ops["aten::copy_"].device_time_total > 0
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    memcpy = [e for e in events if e.get("cat") == "gpu_memcpy"]
    assert {e["name"] for e in memcpy} >= {"Memcpy HtoD (Host -> Device)",
                                           "Memcpy DtoH (Device -> Host)"}
    htod = next(e for e in memcpy if e["name"].startswith("Memcpy HtoD"))
    assert json.loads(htod["args"]["input_shapes"]) == [[3, 4]]
    cpu_ids = {e["args"].get("External id") for e in events if e.get("cat") == "cpu_op"}
    assert all(e["args"]["correlation"] in cpu_ids for e in memcpy)
