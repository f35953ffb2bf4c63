"""Device graphs (issue 56; docs/device-graphs.md): torch.neuron.NeuronGraph / torch.neuron.graph /
torch.accelerator.Graph capture a step once and replay it; results equal the CPU's, and the
same step run eagerly on neuron bit for bit; ops outside ATen are captured in signatures that
ran before the capture; what cannot be captured raises at capture, naming why; memory captured
work uses is the graph's until reset."""

import copy
import gc

import pytest
import torch

import torchneuron  # noqa: F401


def capture(fn):
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        out = fn()
    return g, out


# An op outside ATen reaching the device through the host-kernel fallback: oneDNN's linear,
# which Inductor's code calls, and one registered here with a Python CPU kernel (a torch.library
# custom op of a namespace of its own), which also stands in where PyTorch lacks oneDNN.
@torch.library.custom_op("neuron_graphs_test::affine", mutates_args=(), device_types="cpu")
def _affine(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return torch.addmm(bias, x, weight.t())


@_affine.register_fake
def _(x, weight, bias):
    return x.new_empty((x.shape[0], weight.shape[0]))


NON_ATEN_LINEARS = {
    "mkldnn::_linear_pointwise": lambda x, w, b: torch.ops.mkldnn._linear_pointwise(
        x, w, b, "none", [], ""),
    "neuron_graphs_test::affine": lambda x, w, b: torch.ops.neuron_graphs_test.affine(x, w, b),
}
NON_ATEN_OPS = [
    pytest.param("mkldnn::_linear_pointwise", marks=pytest.mark.skipif(
        not torch.backends.mkldnn.is_available(), reason="PyTorch built without oneDNN")),
    "neuron_graphs_test::affine",
]


def test_replay_reads_new_inputs_and_matches_the_cpu():
    x, w = torch.randn(16, 32), torch.randn(32, 8)
    xn, wn = x.to("neuron"), w.to("neuron")
    g, out = capture(lambda: torch.relu(xn @ wn) + 1)
    for _ in range(3):
        x = torch.randn(16, 32)
        xn.copy_(x)
        g.replay()
        torch.testing.assert_close(out.cpu(), torch.relu(x @ w) + 1)


def test_capture_runs_nothing_until_replay():
    x = torch.zeros(1000, device="neuron")
    g, _ = capture(lambda: x.add_(1))
    assert x.cpu().sum().item() == 0  # CUDA's rule: captured work runs only at replay
    g.replay()
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((1000,), 2.0))


def test_torch_accelerator_graph_on_a_side_stream():
    x = torch.randn(100, device="neuron")
    g = torch.accelerator.Graph()
    with torch.neuron.stream(torch.neuron.Stream()):
        g.capture_begin()
        y = x.exp() * 2
        g.capture_end()
    x.copy_(torch.arange(100.0))
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.arange(100.0).exp() * 2)


def test_a_training_step_replays_as_it_runs_eagerly_bit_for_bit():
    """Forward with dropout, backward and SGD captured whole: each replay equals the eager step
    from the same generator state, and draws new numbers."""
    torch.manual_seed(0)
    base = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.3), torch.nn.ReLU(),
                               torch.nn.Linear(32, 4)).to("neuron")
    eager, graphed = copy.deepcopy(base), copy.deepcopy(base)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, foreach=False)
    opt_g = torch.optim.SGD(graphed.parameters(), lr=0.1, foreach=False)
    data = [(torch.randn(8, 16), torch.randn(8, 4)) for _ in range(3)]

    def step(model, opt, x, y):
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss

    # .grad exists before capture (set_to_none=False keeps it): the captured step writes it.
    for p in graphed.parameters():
        p.grad = torch.zeros_like(p)
    for p in eager.parameters():
        p.grad = torch.zeros_like(p)
    sx, sy = torch.zeros(8, 16, device="neuron"), torch.zeros(8, 4, device="neuron")
    torch.neuron.manual_seed(7)
    g, loss_g = capture(lambda: step(graphed, opt_g, sx, sy))
    state = torch.neuron.get_rng_state()
    torch.neuron.manual_seed(7)
    losses = []
    for x, y in data:
        losses.append(step(eager, opt_e, x.to("neuron"), y.to("neuron")).cpu())
    torch.neuron.set_rng_state(state)  # the capture drew nothing: the same state as seed 7
    torch.neuron.manual_seed(7)
    replayed = []
    for x, y in data:
        sx.copy_(x)
        sy.copy_(y)
        g.replay()
        replayed.append(loss_g.cpu())
    for a, b in zip(losses, replayed):
        assert torch.equal(a, b)
    for pe, pg in zip(eager.parameters(), graphed.parameters()):
        assert torch.equal(pe.cpu(), pg.cpu())
    assert not torch.equal(replayed[0], replayed[1])


def test_dropout_draws_new_numbers_each_replay():
    ones = torch.ones(4096, device="neuron")
    g, out = capture(lambda: torch.nn.functional.dropout(ones, 0.5))
    g.replay()
    first = out.cpu().clone()
    g.replay()
    second = out.cpu()
    assert not torch.equal(first, second)
    for sample in (first, second):  # dropout's own distribution: zeros or 2
        assert set(sample.unique().tolist()) <= {0.0, 2.0}
        assert 0.4 < (sample == 0).float().mean().item() < 0.6


def test_make_graphed_callables_forward_and_backward_match_the_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4))
    dev = copy.deepcopy(cpu).to("neuron")
    graphed = torch.neuron.make_graphed_callables(dev, (torch.randn(8, 16, device="neuron"),))
    assert graphed is dev
    for _ in range(3):
        cpu.zero_grad(set_to_none=True)
        dev.zero_grad(set_to_none=True)
        x = torch.randn(8, 16)
        out_c, out_n = cpu(x), dev(x.to("neuron"))
        (out_c ** 2).sum().backward()
        (out_n ** 2).sum().backward()
        torch.testing.assert_close(out_n.cpu(), out_c)
        for pc, pn in zip(cpu.parameters(), dev.parameters()):
            torch.testing.assert_close(pn.grad.cpu(), pc.grad)


def test_make_graphed_callables_of_functions_and_eval_mode_falls_back():
    w = torch.randn(4, 4, device="neuron", requires_grad=True)

    def f(x):
        return (x @ w).sin()

    x = torch.randn(3, 4, device="neuron", requires_grad=True)
    gf = torch.neuron.make_graphed_callables(f, (x,))
    xi = torch.randn(3, 4, device="neuron", requires_grad=True)
    out = gf(xi)
    out.sum().backward()
    ref_x = xi.detach().cpu().requires_grad_()
    ref = (ref_x @ w.detach().cpu()).sin()
    ref.sum().backward()
    torch.testing.assert_close(out.cpu(), ref)
    torch.testing.assert_close(xi.grad.cpu(), ref_x.grad)

    m = torch.nn.Linear(4, 4).to("neuron")
    torch.neuron.make_graphed_callables(m, (torch.randn(2, 4, device="neuron"),))
    m.eval()  # another training state than at capture: the original forward runs
    xe = torch.randn(2, 4, device="neuron")
    torch.testing.assert_close(m(xe).cpu(), xe.cpu() @ m.weight.detach().cpu().T
                               + m.bias.detach().cpu())


def test_memory_is_the_graphs_until_reset():
    x = torch.randn(256, 256, device="neuron")
    gc.collect()  # what earlier tests left is freed now, not during the capture
    torch.neuron.synchronize()
    before = torch.neuron.memory_allocated()
    g = torch.neuron.NeuronGraph()
    with torch.neuron.graph(g):
        y = (x * 2).relu().sum(0)  # intermediates freed inside the capture
    address = y.data_ptr()
    held = torch.neuron.memory_allocated()
    assert held > before + 256 * 256 * 4  # the intermediate stays the graph's
    for _ in range(5):
        g.replay()
    torch.neuron.synchronize()
    assert torch.neuron.memory_allocated() == held  # replays reuse it
    assert y.data_ptr() == address
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2).relu().sum(0))
    del y
    g.reset()
    torch.neuron.synchronize()
    assert torch.neuron.memory_allocated() == before


@pytest.mark.parametrize("what, action, message", [
    ("item", lambda x: x.sum().item(), "host synchronization"),
    ("cpu", lambda x: x.cpu(), "host synchronization"),
    ("synchronize", lambda x: torch.neuron.synchronize(), "torch.neuron.synchronize()"),
    ("nonzero", lambda x: torch.nonzero(x), "aten::nonzero cannot be captured"),
    ("unique", lambda x: torch.unique(x), "cannot be captured"),
])
def test_what_cannot_be_captured_raises_with_the_reason(what, action, message):
    x = torch.randn(64, device="neuron")
    g = torch.neuron.NeuronGraph()
    with pytest.raises(RuntimeError, match="cannot be captured in a neuron graph") as info:
        with torch.neuron.graph(g):
            x.mul(2)
            action(x)
    assert message in str(info.value)
    assert not torch.neuron.is_current_stream_capturing()
    # The thread is not left capturing: eager work runs again.
    torch.testing.assert_close((x + 1).cpu(), x.cpu() + 1)


@pytest.mark.parametrize("name", NON_ATEN_OPS)
def test_an_op_outside_aten_is_captured_once_its_signature_ran(name, tmp_path):
    """Its signature's first call runs at the call (where its results' layout is learned and
    checked against its CPU kernel); a capture then records it like an ATen op."""
    linear = NON_ATEN_LINEARS[name]
    x, w, b = torch.randn(8, 32), torch.randn(16, 32), torch.randn(16)
    xn, wn, bn = x.to("neuron"), w.to("neuron"), b.to("neuron")
    torch.testing.assert_close(linear(xn, wn, bn).cpu(), linear(x, w, b))  # the warm-up
    g = torch.neuron.NeuronGraph()
    g.enable_debug_mode()
    with torch.neuron.graph(g):
        out = torch.relu(linear(xn, wn, bn)) * 2
    assert g.recorded_work() == 3
    g.debug_dump(str(tmp_path / "graph.txt"))
    assert name in (tmp_path / "graph.txt").read_text()
    for _ in range(3):
        x = torch.randn(8, 32)
        xn.copy_(x)
        g.replay()
        torch.testing.assert_close(out.cpu(), torch.relu(linear(x, w, b)) * 2)


@pytest.mark.parametrize("name", NON_ATEN_OPS)
def test_an_op_outside_aten_in_a_signature_never_run_is_refused_naming_it(name):
    linear = NON_ATEN_LINEARS[name]
    # Shapes no other test gives it: this signature has never run.
    x, w, b = torch.randn(5, 24), torch.randn(7, 24), torch.randn(7)
    xn, wn, bn = x.to("neuron"), w.to("neuron"), b.to("neuron")
    g = torch.neuron.NeuronGraph()
    with pytest.raises(RuntimeError, match=f"{name} cannot be captured in a neuron graph") as info:
        with torch.neuron.graph(g):
            xn.mul(2)
            linear(xn, wn, bn)
    assert "never ran outside a capture" in str(info.value)
    assert "warm-up" in str(info.value)
    assert not torch.neuron.is_current_stream_capturing()
    # Run once outside the capture, the same signature is captured.
    torch.testing.assert_close(linear(xn, wn, bn).cpu(), linear(x, w, b))
    g2, out = capture(lambda: linear(xn, wn, bn))
    xn.copy_(x * 3)
    g2.replay()
    torch.testing.assert_close(out.cpu(), linear(x * 3, w, b))


def test_recorded_work_counts_what_a_replay_runs():
    g = torch.neuron.NeuronGraph()
    assert g.recorded_work() == 0
    x = torch.ones(4, device="neuron")
    with torch.neuron.graph(g):
        y = x + 1
        assert g.recorded_work() == 1  # so far, asked on the capturing thread
        y.mul_(2)
    assert g.recorded_work() == 2
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 4.0))
    g.reset()
    assert g.recorded_work() == 0
    with torch.neuron.stream(torch.neuron.Stream()):
        g.capture_begin()
        y = x * 5
        g.capture_end()
    assert g.recorded_work() == 1
    empty = torch.neuron.NeuronGraph()
    with pytest.warns(UserWarning, match="graph is empty"):
        with torch.neuron.graph(empty):
            pass
    assert empty.recorded_work() == 0


def test_capture_state_and_misuse_errors():
    g = torch.neuron.NeuronGraph()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with pytest.raises(RuntimeError, match="other than the default stream"):
        g.capture_begin()
    assert not torch.neuron.is_current_stream_capturing()
    x = torch.ones(4, device="neuron")
    with torch.neuron.stream(torch.neuron.Stream()):
        g.capture_begin()
        assert torch.neuron.is_current_stream_capturing()
        y = x + 1
        with pytest.raises(RuntimeError, match="already capturing"):
            g.capture_begin()
        g.capture_end()
    with pytest.raises(RuntimeError, match="call reset"):
        with torch.neuron.graph(g):
            pass
    assert torch.neuron.current_stream() == torch.neuron.default_stream()  # left as it was
    g.replay()
    torch.testing.assert_close(y.cpu(), torch.full((4,), 2.0))
    g.reset()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with pytest.raises(TypeError, match="takes a torch.neuron.NeuronGraph"):
        torch.neuron.graph(object())


def test_an_empty_capture_warns_and_pools_are_ids():
    g = torch.neuron.NeuronGraph()
    with pytest.warns(UserWarning, match="graph is empty"):
        with torch.neuron.graph(g):
            pass
    g.replay()  # nothing to do
    handle = torch.neuron.graph_pool_handle()
    assert isinstance(handle, tuple) and len(handle) == 2 and handle != (0, 0)
    g2 = torch.neuron.NeuronGraph()
    x = torch.ones(3, device="neuron")
    with torch.neuron.graph(g2, pool=handle):
        y = x * 3
    assert g2.pool() == handle
    g2.replay()
    torch.testing.assert_close(y.cpu(), torch.full((3,), 3.0))


def test_a_replay_is_one_profiler_activity_named_for_it():
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(32, 32, device="neuron")
    g, _ = capture(lambda: (x @ x).relu())
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        g.replay()
        g.replay()
        torch.neuron.synchronize()
    names = [e.name for e in prof.events()]
    assert names.count("NeuronGraph.replay") >= 2  # the host call and the device activity
    device_replays = [e for e in prof.events() if e.name == "NeuronGraph.replay"
                      and e.device_type == torch.autograd.DeviceType.PrivateUse1]
    assert len(device_replays) == 2


def test_debug_dump_lists_the_captured_work(tmp_path):
    g = torch.neuron.NeuronGraph()
    g.enable_debug_mode()
    x = torch.ones(4, device="neuron")
    with torch.neuron.graph(g):
        (x + 1).mul_(2)
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    text = path.read_text()
    assert "2 pieces of work" in text and "aten::add" in text and "aten::mul_" in text
    other = torch.neuron.NeuronGraph()
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        other.debug_dump(str(path))


def test_an_error_at_replay_is_raised_at_the_next_synchronization():
    idx = torch.zeros(4, dtype=torch.long, device="neuron")
    src = torch.randn(8, device="neuron")
    g, out = capture(lambda: src[idx] * 2)
    idx.copy_(torch.tensor([0, 1, 2, 99]))  # out of range, found by the kernel at replay
    with pytest.raises(IndexError, match="index"):  # at the replay itself in sync mode
        g.replay()
        torch.neuron.synchronize()
    idx.copy_(torch.tensor([0, 1, 2, 3]))  # the device goes on
    g.replay()
    torch.testing.assert_close(out.cpu(), src.cpu()[:4] * 2)


# Which thread ran a replayed piece: a Python CPU kernel (outside ATen) records it.
REPLAY_THREAD = """
import threading, torch, torchneuron
ran_on = []
@torch.library.custom_op("replay_thread_test::scaled", mutates_args=(), device_types="cpu")
def scaled(x: torch.Tensor) -> torch.Tensor:
    ran_on.append(threading.get_ident())
    return x * 2
scaled.register_fake(lambda x: torch.empty_like(x))
x = torch.randn(64, device="neuron")
torch.ops.replay_thread_test.scaled(x + 1)  # the signature runs once before the capture
g = torch.neuron.NeuronGraph()
with torch.neuron.graph(g):
    out = torch.ops.replay_thread_test.scaled(x + 1)
new = torch.randn(64)
x.copy_(new)
del ran_on[:]
torch.neuron._sleep(50_000_000)  # 50 ms of device work ahead of the replay
g.replay()
returned_before_running = ran_on == []
torch.neuron.synchronize()
torch.testing.assert_close(out.cpu(), (new + 1) * 2)
print(returned_before_running, ran_on == [threading.get_ident()])
"""


def test_sync_mode_replays_on_the_calling_thread(python):
    # As sync mode's ops run: no hand-over to the stream's worker and back for each replay.
    # (The memory-protected runtime has no queued execution: every mode runs synchronously.)
    out = python(REPLAY_THREAD, {"NEURON_EAGER_MODE": "sync", "NEURON_MEMORY_PROTECT": "0"},
                 timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "False True", out.stdout + out.stderr


def test_async_mode_queues_the_replay(python):
    # As CUDA's replay is asynchronous: it returns while the stream is still busy. Which thread
    # then runs it is not fixed: a synchronization that finds it not started runs it in place.
    out = python(REPLAY_THREAD, {"NEURON_EAGER_MODE": "async", "NEURON_MEMORY_PROTECT": "0"},
                 timeout=300)
    assert out.stdout.strip().splitlines()[-1].split()[0] == "True", out.stdout + out.stderr
