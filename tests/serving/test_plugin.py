"""Fast checks of the serving plugin, in the default suite: the KV cache size rule and the
shutdown workaround (everywhere), and, where vLLM is installed, that the `vllm.platform_plugins` entry point and the platform class
load, that vLLM picks neuron by itself, and its CPU platform when VLLM_TARGET_DEVICE=cpu says so
or VLLM_PLUGINS leaves neuron out."""

from __future__ import annotations

import importlib.metadata

import pytest
import torch

from torchneuron.serving import kv_cache_size
from torchneuron.serving.kv_cache_size import GiB, DeviceMemory, kv_cache_bytes


def memory(device_free: float, backing: float) -> DeviceMemory:
    return DeviceMemory(int(device_free * GiB), int(backing * GiB), "test")


def test_default_kv_cache_is_modest_and_shrinks_to_what_backs_the_device():
    assert kv_cache_bytes(None, memory(24, 20)) == kv_cache_size.DEFAULT_KV_CACHE_BYTES == GiB
    small = memory(24, 2)  # a device much larger than the host memory behind it
    assert kv_cache_bytes(None, small) == int(2 * GiB * kv_cache_size.DEFAULT_SHARE_OF_BACKING)


def test_explicit_kv_cache_size_is_kept_when_it_fits():
    assert kv_cache_bytes(3 * GiB, memory(24, 20)) == 3 * GiB


@pytest.mark.parametrize("free, backing, limit", [(2, 20, "device free: 2.00"),
                                                  (24, 2, "backing it: 2.00")])
def test_explicit_kv_cache_beyond_device_or_backing_memory_is_refused(free, backing, limit):
    with pytest.raises(ValueError, match=f"asks for 3.00 GiB.*{limit}.*VLLM_CPU_KVCACHE_SPACE"):
        kv_cache_bytes(3 * GiB, memory(free, backing))


def test_nonpositive_kv_cache_size_is_refused():
    with pytest.raises(ValueError, match="must be positive"):
        kv_cache_bytes(0, memory(24, 20))


def test_device_memory_reads_the_device_and_its_backing():
    device = torch.device("neuron", 0)
    figures = kv_cache_size.device_memory(device)
    free, total = torch.neuron.mem_get_info(device)
    assert 0 < figures.device_free <= total
    assert figures.backing_available > 0
    assert figures.backing_source == "torchneuron._C.runtime.backing_memory_available"


def test_empty_host_cache_after_device_use_no_longer_crashes(python):
    # In a fresh interpreter: without host_cache.install() this call ends the process (SIGSEGV).
    done = python("import torch\n"
                  "from torchneuron.serving import host_cache\n"
                  "x = torch.ones(4, device='neuron') + 1\n"
                  "host_cache.install()\n"
                  "torch.accelerator.empty_host_cache()\n"
                  "torch.testing.assert_close(x.cpu(), torch.ones(4) + 1)\n"
                  "print('survived')\n")
    assert done.returncode == 0 and done.stdout.strip() == "survived", done.stderr[-2000:]


# --- where vLLM is installed (the serving environment, `make test-serve`) -----------------


def test_entry_point_loads_the_neuron_platform():
    pytest.importorskip("vllm")
    from vllm.platforms.interface import Platform, PlatformEnum

    (entry,) = [e for e in importlib.metadata.entry_points(group="vllm.platform_plugins")
                if e.name == "neuron"]
    class_path = entry.load()()
    module_name, class_name = class_path.rsplit(".", 1)
    platform = getattr(importlib.import_module(module_name), class_name)
    assert issubclass(platform, Platform) and platform._enum == PlatformEnum.OOT
    assert (platform.device_type, platform.dispatch_key, platform.dist_backend) == \
        ("neuron", "PrivateUse1", "neuron")
    assert platform.get_device_total_memory(0) == \
        torch.neuron.get_device_properties(0).total_memory


def test_vllm_picks_neuron_unless_the_cpu_is_asked_for(monkeypatch):
    pytest.importorskip("vllm")
    from vllm.platforms import resolve_current_platform_cls_qualname

    monkeypatch.delenv("VLLM_TARGET_DEVICE", raising=False)
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    assert resolve_current_platform_cls_qualname() == \
        "torchneuron.serving.neuron_platform.NeuronPlatform"
    monkeypatch.setenv("VLLM_PLUGINS", "neuron")
    assert resolve_current_platform_cls_qualname() == \
        "torchneuron.serving.neuron_platform.NeuronPlatform"
    monkeypatch.setenv("VLLM_TARGET_DEVICE", "cpu")
    assert resolve_current_platform_cls_qualname() == "vllm.platforms.cpu.CpuPlatform"


@pytest.mark.parametrize("plugins", ["", "some_other_plugin"])
def test_vllm_plugins_leaving_neuron_out_gives_vllms_cpu_platform(monkeypatch, plugins):
    """docs/serving.md's comparison switch. vLLM picks its CPU platform only where the version of
    the distribution `vllm` says "cpu"; the serving environment's metadata-only `vllm` (Makefile,
    VLLM_STAND_IN) is versioned as vLLM's CPU builds are, or no platform is found ("Device
    string must not be empty" when the engine starts)."""
    pytest.importorskip("vllm")
    from vllm.platforms import resolve_current_platform_cls_qualname

    assert "cpu" in importlib.metadata.version("vllm"), "the stand-in `vllm` lost its +cpu"
    monkeypatch.delenv("VLLM_TARGET_DEVICE", raising=False)
    monkeypatch.setenv("VLLM_PLUGINS", plugins)
    assert resolve_current_platform_cls_qualname() == "vllm.platforms.cpu.CpuPlatform"


@pytest.mark.parametrize("dropped", ["triton", "torchvision", "torchaudio", "torchcodec"])
def test_serving_environment_holds_nothing_vllm_cpu_cannot_use(dropped):
    """The Makefile (SERVE_DROPPED) uninstalls what vllm-cpu pulls in but cannot use: CUDA's
    triton, which vLLM's CPU platform disables and which printed nanobind leak reports at every
    exit, and CUDA or mismatched torchvision, torchaudio, torchcodec, which break transformers."""
    pytest.importorskip("vllm")
    import importlib.util

    assert importlib.util.find_spec(dropped) is None, \
        f"{dropped} is in the serving environment: rebuild it with `make serve-demo`"


def test_platform_refuses_what_neuron_cannot_run():
    pytest.importorskip("vllm")
    from torchneuron.serving.model_runner import NeuronModelRunner
    from torchneuron.serving.neuron_platform import NeuronPlatform

    NeuronPlatform.check_if_supports_dtype(torch.float32)
    with pytest.raises(ValueError, match="torch.float64 is not supported on neuron"):
        NeuronPlatform.check_if_supports_dtype(torch.float64)
    with pytest.raises(ValueError, match="runs on a neuron device, got cpu"):
        NeuronModelRunner(None, torch.device("cpu"))


def test_custom_ops_on_neuron_run_vllms_cpu_kernels_and_match_the_cpu():
    """The rotary embedding dispatches to vLLM's CPU kernel (one in-place call through the
    boxed fallback) on neuron, and gives what its PyTorch-native form gives on the CPU."""
    pytest.importorskip("vllm")
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.custom_op import CustomOp
    from vllm.model_executor.layers.rotary_embedding import get_rope

    from torchneuron.serving import custom_ops

    custom_ops.install()
    assert CustomOp.forward_oot is custom_ops._forward_oot
    custom_ops.install()  # a second call changes nothing
    assert CustomOp.forward_oot is custom_ops._forward_oot

    with set_current_vllm_config(VllmConfig()):
        rope = get_rope(32, max_position=64, is_neox_style=True, dtype=torch.float32)
    torch.manual_seed(0)
    positions = torch.tensor([0, 5, 17, 63])
    query, key = torch.randn(4, 4 * 32), torch.randn(4, 2 * 32)
    expected_q, expected_k = rope.forward_native(positions, query.clone(), key.clone())

    calls = []
    forward_cpu = type(rope).forward_cpu
    rope.forward_cpu = lambda *args: calls.append(1) or forward_cpu(rope, *args)
    rope.to("neuron")
    q, k = rope.forward_oot(positions.to("neuron"), query.to("neuron"), key.to("neuron"))
    assert calls == [1] and q.device.type == k.device.type == "neuron"
    torch.testing.assert_close(q.cpu(), expected_q)
    torch.testing.assert_close(k.cpu(), expected_k)


def test_greedy_sampling_on_neuron_runs_vllms_cpu_kernel_and_matches_the_cpu(monkeypatch):
    """Greedy sampling of neuron logits is one `greedy_argmax` call (vLLM CPU's kernel, through
    the boxed fallback), with vLLM CPU's tokens; other logits keep vLLM's own path."""
    pytest.importorskip("vllm")
    from vllm.v1.sample.sampler import Sampler

    from torchneuron.serving import greedy

    greedy.install()
    assert Sampler.greedy_sample is greedy._greedy_sample
    greedy.install()  # a second call changes nothing
    assert Sampler.greedy_sample is greedy._greedy_sample

    torch.manual_seed(0)
    logits = torch.randn(5, 512)
    logits[2, 40] = logits[2, 300] = 50.0  # a tie: vLLM CPU's kernel decides it
    expected = torch.ops._C.greedy_argmax(logits)

    calls = []
    kernel = greedy.greedy_argmax
    monkeypatch.setattr(greedy, "greedy_argmax",
                        lambda x: calls.append(x.device.type) or kernel(x))
    tokens = Sampler.greedy_sample(logits.to("neuron"))
    assert calls == ["neuron"] and tokens.device.type == "neuron"
    torch.testing.assert_close(tokens.cpu(), expected)

    # CPU logits and non-float32 neuron logits take vLLM's argmax (the kernel takes float32).
    torch.testing.assert_close(Sampler.greedy_sample(logits), logits.argmax(dim=-1))
    half = logits.to(torch.bfloat16)
    torch.testing.assert_close(Sampler.greedy_sample(half.to("neuron")).cpu(),
                               half.argmax(dim=-1))
    assert calls == ["neuron"]
