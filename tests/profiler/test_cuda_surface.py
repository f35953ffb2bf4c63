"""The rest of torch.cuda's debugging and tooling surface on torch.neuron: mirrored where the
device has the fact, refused with NotImplementedError naming what to use where it has not."""

import os

import pytest
import torch


def test_caching_allocator_alloc_and_delete():
    before = torch.neuron.memory_allocated()
    ptr = torch.neuron.caching_allocator_alloc(4096)
    assert isinstance(ptr, int) and ptr != 0
    assert torch.neuron.memory_allocated() >= before + 4096
    torch.neuron.caching_allocator_delete(ptr)
    assert torch.neuron.memory_allocated() == before
    with pytest.raises(ValueError, match="caching_allocator_alloc"):
        torch.neuron.caching_allocator_delete(ptr)
    with pytest.raises(TypeError):
        torch.neuron.caching_allocator_alloc(-1)


def test_allocator_backend_and_processes():
    assert torch.neuron.get_allocator_backend() == "native"
    x = torch.ones(1 << 16, device="neuron")
    text = torch.neuron.list_processes()
    assert text.splitlines()[0] == "neuron:0" and str(os.getpid()) in text
    assert torch.neuron.list_gpu_processes() == text
    torch.testing.assert_close(x.cpu(), torch.ones(1 << 16))


def test_memory_names_of_torch_cuda_memory():
    x = torch.ones(1000, device="neuron")
    nested = torch.neuron.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == torch.neuron.memory_allocated()
    assert torch.neuron.memory_cached() == torch.neuron.memory_reserved()
    assert torch.neuron.max_memory_cached() == torch.neuron.max_memory_reserved()
    free, total = torch.neuron.mem_get_info()
    assert torch.neuron.device_memory_used() == total - free
    torch.neuron.memory.set_per_process_memory_fraction(0.5)
    assert torch.neuron.get_per_process_memory_fraction() == 0.5
    torch.neuron.memory.set_per_process_memory_fraction(1.0)
    del x


@pytest.mark.parametrize("name, instead", [
    ("utilization", "torch.profiler"), ("temperature", "neuron-monitor"),
    ("power_draw", "neuron-monitor"), ("clock_rate", "get_device_properties"),
    ("memory_usage", "memory_allocated"), ("host_memory_stats", "memory_stats"),
    ("host_memory_stats_as_nested_dict", "memory_stats"),
    ("reset_peak_host_memory_stats", "memory_stats"),
    ("reset_accumulated_host_memory_stats", "memory_stats")])
def test_refused_names_say_what_to_use(name, instead):
    with pytest.raises(NotImplementedError, match=instead):
        getattr(torch.neuron, name)()
