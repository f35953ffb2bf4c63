"""torch.neuron is a package split like torch.cuda (memory, streams, random, properties): its
public names are exactly today's, each submodule has an `__all__` the package re-exports, the
submodules import as `torch.neuron.<name>`, and the runtime layer never reaches up into it."""

import ast
import importlib
import pathlib

import pytest
import torch

import torchneuron
from torchneuron.device import legacy_types

SUBMODULES = ("memory", "streams", "random", "properties", "monitoring")

# The public names of torch.neuron before the split into submodules; none may go missing.
PUBLIC_NAMES = {
    "is_available", "is_initialized", "init", "device_count", "current_device", "set_device",
    "synchronize", "eager_mode", "device", "device_of",
    "memory_stats", "memory_allocated", "max_memory_allocated", "memory_reserved",
    "max_memory_reserved", "reset_peak_memory_stats", "reset_accumulated_memory_stats",
    "reset_max_memory_allocated", "empty_cache", "mem_get_info",
    "set_per_process_memory_fraction", "get_per_process_memory_fraction", "memory_snapshot",
    "memory_summary",
    "Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream", "set_stream",
    "default_generators", "get_rng_state", "get_rng_state_all", "set_rng_state",
    "set_rng_state_all", "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
    "get_device_properties", "get_device_name", "get_device_capability",
    "get_amp_supported_dtype", "is_bf16_supported",
    # torch.cuda's tooling surface (issue 19; docs/torch-cuda-coverage.md)
    "caching_allocator_alloc", "caching_allocator_delete", "get_allocator_backend",
    "host_memory_stats", "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats",
    "reset_peak_host_memory_stats", "list_gpu_processes", "list_processes",
    "memory_stats_as_nested_dict", "memory_cached", "max_memory_cached", "reset_max_memory_cached",
    "device_memory_used", "utilization", "temperature", "power_draw", "clock_rate", "memory_usage",
    # torch.cuda's legacy typed names (issue 18) and IPC collection (issue 23)
    *legacy_types.TENSOR_TYPES, *legacy_types.STORAGE_TYPES, "ipc_collect",
    # the readiness accounting and its contract (issue 52; docs/readiness.md)
    "expect", "ExpectationError", "readiness_summary", "reset_readiness",
    # device graphs (issue 56; docs/device-graphs.md)
    "NeuronGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
    "make_graphed_callables",
}

RUNTIME_DIR = pathlib.Path(torchneuron.__file__).parent / "runtime"


# ------------------------------------------------------------------ the package's shape

def test_all_names_exist_and_cover_todays_public_api():
    assert set(torch.neuron.__all__) == PUBLIC_NAMES
    assert len(torch.neuron.__all__) == len(PUBLIC_NAMES)  # no name listed twice
    for name in torch.neuron.__all__:
        assert hasattr(torch.neuron, name), name


def test_private_names_torch_reads_stay_on_the_package():
    torch.ones(1, device="neuron")  # device state exists from the first device use on
    assert torch.neuron._initialized is True  # torch.utils.checkpoint saves device RNG state
    assert torch.neuron._is_in_bad_fork() is False
    assert torch.neuron._device_index("neuron:2") == 2


@pytest.mark.parametrize("name", SUBMODULES)
def test_submodules_have_their_own_all_and_the_package_reexports_it(name):
    submodule = getattr(torch.neuron, name)
    assert submodule.__name__ == f"torchneuron.device.{name}"
    assert submodule.__all__ and set(submodule.__all__) <= set(torch.neuron.__all__)
    for public in submodule.__all__:
        assert getattr(torch.neuron, public) is getattr(submodule, public), public
    # `import torch.neuron.memory` finds the same module, not a second copy of the file.
    assert importlib.import_module(f"torch.neuron.{name}") is submodule


def test_submodules_split_the_names_without_overlap():
    seen = {}
    for name in SUBMODULES:
        for public in getattr(torch.neuron, name).__all__:
            assert public not in seen, f"{public} in both {seen.get(public)} and {name}"
            seen[public] = name


# ------------------------------------------------------------------ layering

DEVICE_MODULES = ("torchneuron.device", "torch.neuron")


def names_device_module(dotted: str) -> bool:
    return any(dotted == m or dotted.startswith(m + ".") for m in DEVICE_MODULES)


def device_module_imports(source: str, package: str = "torchneuron.runtime") -> list[str]:
    """Every place `source`, a module of `package`, imports or names the device module:
    `torchneuron.device` (absolute or relative, its submodules included) or `torch.neuron`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if names_device_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            targets = [module] + [f"{module}.{a.name}" for a in node.names]
            found += [t for t in targets if names_device_module(t)][:1]
        elif (isinstance(node, ast.Attribute) and node.attr == "neuron"
              and isinstance(node.value, ast.Name) and node.value.id == "torch"):
            found.append("torch.neuron")
    return found


@pytest.mark.parametrize("source", [
    "import torchneuron.device",
    "from torchneuron.device import memory_allocated",
    "from .. import device",
    "from ..device._index import _device_index",
    "from torch.neuron.memory import memory_allocated",
    "import torch\nindex = torch.neuron._device_index(None)",
])
def test_the_layering_check_catches_each_way_of_reaching_up(source):
    assert device_module_imports(source)


@pytest.mark.parametrize("source", ["from . import config", "from ..runtime import profiles",
                                    "import torch\ntorch.accelerator.device_count()"])
def test_the_layering_check_lets_the_runtimes_own_imports_pass(source):
    assert device_module_imports(source) == []


def test_the_runtime_layer_does_not_reach_up_into_the_device_module():
    files = sorted(RUNTIME_DIR.rglob("*.py"))
    assert files, RUNTIME_DIR
    offending = {}
    for f in files:
        package = ".".join(("torchneuron", *f.relative_to(RUNTIME_DIR.parent).parent.parts))
        offending[str(f.relative_to(RUNTIME_DIR))] = device_module_imports(f.read_text(), package)
    assert {f: found for f, found in offending.items() if found} == {}


# ------------------------------------------------------------------ behaviour through submodules

def test_memory_submodule_counts_a_neuron_tensor_whose_round_trip_equals_the_cpu():
    memory = torch.neuron.memory
    torch.neuron.synchronize()
    base = memory.memory_allocated()
    cpu = torch.randn(256, 64)
    on_device = cpu.to("neuron")
    assert memory.memory_allocated() - base >= cpu.nbytes
    assert memory.memory_allocated() == torch.neuron.memory_allocated()
    torch.testing.assert_close(on_device.cpu(), cpu, rtol=0, atol=0)
    torch.testing.assert_close((on_device * 2 + 1).cpu(), cpu * 2 + 1)
    del on_device
    assert memory.memory_allocated() == base


@pytest.mark.parametrize("device,error", [(99, IndexError), ("cpu", ValueError),
                                          (1.5, TypeError)])
def test_submodules_reject_what_is_not_a_neuron_device(device, error):
    with pytest.raises(error):
        torch.neuron.memory.memory_allocated(device)
    with pytest.raises(error):
        torch.neuron.properties.get_device_name(device)
    with pytest.raises(error):
        torch.neuron.random.get_rng_state(device)
    with pytest.raises(error):
        torch.neuron.streams.current_stream(device)


def test_random_submodule_seeds_the_same_stream_as_the_package():
    torch.neuron.random.manual_seed(7)
    through_submodule = torch.randn(64, device="neuron").cpu()
    torch.neuron.manual_seed(7)
    through_package = torch.randn(64, device="neuron").cpu()
    torch.neuron.manual_seed(8)
    other_seed = torch.randn(64, device="neuron").cpu()
    torch.testing.assert_close(through_submodule, through_package, rtol=0, atol=0)
    assert not torch.equal(through_submodule, other_seed)
    assert torch.neuron.random.initial_seed() == 8


def test_streams_submodule_runs_work_on_its_stream_as_the_cpu_computes_it():
    a = torch.randn(32, 32)
    s = torch.neuron.streams.Stream(1)
    assert isinstance(s, torch.neuron.Stream) and s.device == torch.device("neuron", 1)
    with torch.neuron.streams.stream(s):
        assert torch.neuron.current_device() == 1
        assert torch.neuron.streams.current_stream() == s
        out = (a.to("neuron:1") @ a.to("neuron:1")).relu()
    assert torch.neuron.current_device() == 0
    s.synchronize()
    torch.testing.assert_close(out.cpu(), (a @ a).relu())


def test_properties_submodule_reports_the_allocators_capacity():
    props = torch.neuron.properties.get_device_properties(0)
    assert props is not None and props.total_memory == torch.neuron.memory.mem_get_info(0)[1]
    assert torch.neuron.properties.get_device_name(0) == props.name
