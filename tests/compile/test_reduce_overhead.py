"""torch.compile(backend="neuron", mode="reduce-overhead") captures each compiled graph into device
graphs (torchneuron/compile/reduce_overhead.py, docs/compile.md): results equal mode="default"
and the CPU, one graph per input-shape key, training steps too, and a graph that cannot be
captured runs compiled with one warning naming why."""

import copy
import warnings

import pytest
import torch

from torchneuron.compile import reduce_overhead


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    reduce_overhead._warned.clear()
    yield
    torch._dynamo.reset()


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))


@pytest.fixture
def made(monkeypatch):
    """Every GraphedCompiledGraph the backend makes while the test runs."""
    made = []
    original = reduce_overhead.GraphedCompiledGraph.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(reduce_overhead.GraphedCompiledGraph, "__init__", record)
    return made


def test_inference_equals_default_mode_and_the_cpu(made):
    model = mlp()
    neuron = copy.deepcopy(model).to("neuron")
    graphed = torch.compile(neuron, backend="neuron", mode="reduce-overhead")
    default = torch.compile(copy.deepcopy(neuron), backend="neuron")
    with torch.no_grad():
        for step in range(4):  # warm-up, capture, two replays
            x = torch.randn(4, 16)
            out = graphed(x.to("neuron")).clone()
            torch.testing.assert_close(out.cpu(), default(x.to("neuron")).cpu())
            torch.testing.assert_close(out.cpu(), model(x))
    assert len(made) == 1
    [one] = made
    assert len(one.keys) == 1
    [captured] = one.keys.values()
    assert captured.graph is not None and not captured.failed


def test_outputs_are_overwritten_by_the_next_replay_as_with_cuda_graphs():
    model = mlp().to("neuron")
    graphed = torch.compile(model, backend="neuron", mode="reduce-overhead")
    with torch.no_grad():
        graphed(torch.randn(2, 16, device="neuron"))
        graphed(torch.randn(2, 16, device="neuron"))
        a = graphed(torch.ones(2, 16, device="neuron"))
        kept = a.clone()
        b = graphed(torch.zeros(2, 16, device="neuron"))
    assert a.data_ptr() == b.data_ptr()  # the graph's own output, replayed into
    torch.testing.assert_close(kept.cpu(), model.cpu()(torch.ones(2, 16)))


def test_one_graph_per_input_shape(made):
    model = mlp()
    graphed = torch.compile(copy.deepcopy(model).to("neuron"), backend="neuron",
                            mode="reduce-overhead", dynamic=False)
    with torch.no_grad():
        for rows in (2, 2, 2, 5, 5, 5, 2):
            x = torch.randn(rows, 16)
            torch.testing.assert_close(graphed(x.to("neuron")).cpu(), model(x))
    keys = [key for graph in made for key, captured in graph.keys.items()
            if captured.graph is not None]
    assert len(keys) == 2  # rows 2 and rows 5, each captured once (a recompile per shape)


def test_training_steps_equal_default_mode(made):
    """Forward and backward graphs are both captured; SGD steps run eagerly between replays and
    the parameters follow mode="default" step for step."""
    model = mlp().to("neuron")
    graphed_model, default_model = copy.deepcopy(model), copy.deepcopy(model)
    graphed = torch.compile(graphed_model, backend="neuron", mode="reduce-overhead")
    default = torch.compile(default_model, backend="neuron")
    opt_g = torch.optim.SGD(graphed_model.parameters(), lr=0.1)
    opt_d = torch.optim.SGD(default_model.parameters(), lr=0.1)
    torch.manual_seed(1)
    for _ in range(5):
        x, y = torch.randn(8, 16, device="neuron"), torch.randn(8, 8, device="neuron")
        for fn, opt in ((graphed, opt_g), (default, opt_d)):
            opt.zero_grad()
            torch.nn.functional.mse_loss(fn(x), y).backward()
            opt.step()
        for p, q in zip(graphed_model.parameters(), default_model.parameters()):
            torch.testing.assert_close(p.cpu(), q.cpu())
    captured = [c for graph in made for c in graph.keys.values() if c.graph is not None]
    assert len(made) == 2 and len(captured) == 2  # the forward's graph and the backward's


def test_cudagraphs_option_captures_too():
    model = mlp()
    graphed = torch.compile(copy.deepcopy(model).to("neuron"), backend="neuron",
                            options={"triton.cudagraphs": True})
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(3, 16)
            torch.testing.assert_close(graphed(x.to("neuron")).cpu(), model(x))


def test_a_graph_that_writes_its_input_runs_compiled_with_one_warning():
    def scale_in_place(x):
        x.mul_(2)
        return x + 1

    compiled = torch.compile(scale_in_place, backend="neuron", mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.arange(6.0)
            xn = x.to("neuron")
            out = compiled(xn)
            torch.testing.assert_close(out.cpu(), x * 2 + 1)
            torch.testing.assert_close(xn.cpu(), x * 2)
    ours = [w for w in caught if "reduce-overhead" in str(w.message)]
    assert len(ours) == 1 and "in place" in str(ours[0].message)


def test_a_graph_that_cannot_be_captured_runs_compiled_with_the_reason():
    """A compiled graph that reads a CPU tensor (a host transfer) cannot be captured: it runs as
    compiled, every call, with one warning that names the input."""
    table = torch.arange(8.0)

    def add_host_table(x):
        return x + table.to(x.device)

    compiled = torch.compile(add_host_table, backend="neuron", mode="reduce-overhead")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(8)
            torch.testing.assert_close(compiled(x.to("neuron")).cpu(), x + table)
    ours = [w for w in caught if "reduce-overhead" in str(w.message)]
    assert len(ours) == 1 and "on cpu" in str(ours[0].message)


def test_a_parameter_replaced_after_capture_is_read_where_the_graph_reads_it():
    model = mlp()
    neuron = copy.deepcopy(model).to("neuron")
    graphed = torch.compile(neuron, backend="neuron", mode="reduce-overhead")
    x = torch.randn(2, 16)
    with torch.no_grad():
        for _ in range(3):  # warm-up, capture, replay
            graphed(x.to("neuron"))
        new_state = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
        model.load_state_dict(new_state, assign=True)
        neuron.load_state_dict({k: v.to("neuron") for k, v in new_state.items()}, assign=True)
        for _ in range(2):
            torch.testing.assert_close(graphed(x.to("neuron")).cpu(), model(x))


def test_outputs_of_a_dropped_graph_are_no_longer_taken_for_captured_ones(made):
    """A backward's input at a captured forward output's address is read in place; once the
    graphs are gone (a reset, a recompile) that memory may hold any tensor, which must be copied."""
    import gc

    model = mlp().to("neuron")
    graphed = torch.compile(model, backend="neuron", mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(3):
            out = graphed(torch.randn(2, 16, device="neuron"))
    address = out.data_ptr()
    assert reduce_overhead._captured_output(address)
    del graphed, out
    made.clear()
    torch._dynamo.reset()
    gc.collect()
    assert not reduce_overhead._captured_output(address)
