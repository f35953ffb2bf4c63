"""Bug class found by the model battery (Mixtral and every model on transformers' grouped MoE
path): transformers counts tokens per expert with torch.histc on int32 on any device that is not
CPU or MPS, as CUDA allows; neuron ran the CPU kernel, which raised "histogram_cpu not
implemented for 'Int'". Neuron now bins integers like CUDA (csrc/aten/native/IntegerHistc.cpp)."""

import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8])
def test_integer_histc_counts_like_float_histc_on_cpu(dtype):
    x = torch.tensor([0, 1, 1, 3, 3, 3, 7, 9], dtype=dtype)
    got = torch.histc(x.to("neuron"), bins=4, min=0, max=3)
    assert got.dtype == dtype and got.device.type == "neuron"
    expected = torch.histc(x.float(), bins=4, min=0, max=3).to(dtype)
    torch.testing.assert_close(got.cpu(), expected)


def test_float_histc_matches_cpu():
    x = torch.randn(100)
    torch.testing.assert_close(torch.histc(x.to("neuron"), bins=7, min=-2, max=2).cpu(),
                               torch.histc(x, bins=7, min=-2, max=2))


def test_histc_bad_bins_raises_like_cpu():
    with pytest.raises(RuntimeError, match="bins"):
        torch.histc(torch.ones(3, dtype=torch.int32, device="neuron"), bins=-1)
