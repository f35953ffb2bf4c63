"""torch.cuda's legacy spellings on torch.neuron: typed tensor names, typed storages and
Tensor.storage_type(), and the deprecated torch.neuron.amp aliases."""

import io
import warnings

import pytest
import torch

from torchneuron.device import legacy_types


@pytest.mark.parametrize("name,dtype", sorted(legacy_types.TENSOR_TYPES.items()))
def test_tensor_type_names_match_tensor_type(name, dtype):
    cls = getattr(torch.neuron, name)
    t = torch.zeros(2, dtype=dtype, device="neuron")
    assert t.type() == f"torch.neuron.{name}"
    assert isinstance(t, cls)
    assert not isinstance(t.cpu(), cls)
    assert repr(cls) == f"<class 'torch.neuron.{name}'>"
    # Tensor.type accepts the class as it accepts torch.cuda.FloatTensor.
    converted = torch.ones(3, device="neuron", dtype=torch.int32 if dtype != torch.int32
                           else torch.int64).type(cls)
    assert converted.dtype == dtype and converted.device.type == "neuron"
    torch.testing.assert_close(converted.cpu(), torch.ones(3, dtype=dtype))


def test_isinstance_checks_dtype_and_device_like_cuda():
    t = torch.zeros(2, device="neuron")
    assert isinstance(t, torch.neuron.FloatTensor)
    assert not isinstance(t, torch.neuron.DoubleTensor)
    assert not isinstance(torch.zeros(2), torch.neuron.FloatTensor)
    assert not isinstance(3.0, torch.neuron.FloatTensor)


def test_legacy_constructors():
    sized = torch.neuron.FloatTensor(2, 3)
    assert sized.shape == (2, 3) and sized.dtype == torch.float32 and sized.device.type == "neuron"
    assert torch.neuron.LongTensor(torch.Size([4])).shape == (4,)
    assert torch.neuron.FloatTensor().shape == (0,)
    data = torch.neuron.FloatTensor([[1, 2], [3, 4]])
    torch.testing.assert_close(data.cpu(), torch.FloatTensor([[1, 2], [3, 4]]))
    on_one = torch.neuron.IntTensor([5, 6], device="neuron:1")
    assert on_one.device == torch.device("neuron:1")
    torch.testing.assert_close(on_one.cpu(), torch.IntTensor([5, 6]))
    same = torch.neuron.FloatTensor(data)
    assert same.data_ptr() == data.data_ptr()


def test_legacy_constructor_errors_name_the_problem():
    with pytest.raises(TypeError, match=r"expected torch.neuron.FloatTensor \(got torch.FloatTensor\)"):
        torch.neuron.FloatTensor(torch.zeros(2))
    with pytest.raises(RuntimeError, match="expects device type neuron but got cpu"):
        torch.neuron.FloatTensor(2, device="cpu")
    with pytest.raises(TypeError, match=r"invalid arguments \('str',\)"):
        torch.neuron.FloatTensor("2")


def test_storage_type_is_the_neuron_typed_storage():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage's deprecation
        t = torch.zeros(2, device="neuron", dtype=torch.float16)
        assert t.storage_type() is torch.neuron.HalfStorage
        assert torch.zeros(2).storage_type() is torch.FloatStorage
        storage = torch.neuron.FloatStorage(4)
        assert storage.device.type == "neuron" and storage.dtype == torch.float32
        assert isinstance(storage, torch.neuron.FloatStorage)
        assert not isinstance(torch.FloatStorage(4), torch.neuron.FloatStorage)
        filled = torch.neuron.DoubleStorage([1.0, 2.5])
        assert filled.tolist() == [1.0, 2.5]
        assert torch.neuron.FloatStorage in torch._storage_classes
        with pytest.raises(RuntimeError, match="from_buffer: Not available for neuron storage"):
            torch.neuron.FloatStorage.from_buffer(b"\0" * 8, "native")


def test_typed_storage_survives_save_and_load():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        storage = torch.neuron.FloatStorage([1.0, 2.0, 3.0])
        buffer = io.BytesIO()
        torch.save(storage, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=False)
        assert loaded.device.type == "neuron" and loaded.tolist() == [1.0, 2.0, 3.0]


# ------------------------------------------------------------------ torch.neuron.amp

def test_amp_grad_scaler_alias_warns_with_the_neuron_wording():
    with pytest.warns(FutureWarning, match=r"torch.amp.GradScaler\('neuron', args...\)"):
        scaler = torch.neuron.amp.GradScaler(init_scale=1024.0)
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler._device == "neuron" and scaler.get_scale() == 1024.0


def test_amp_grad_scaler_state_dict_round_trip_and_step_matches_cpu():
    def train(device, scaler):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 2).to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4).to(device)
        for _ in range(3):
            opt.zero_grad()
            scaler.scale(model(x).square().mean()).backward()
            scaler.step(opt)
            scaler.update()
        return model, scaler

    with pytest.warns(FutureWarning):
        neuron_scaler = torch.neuron.amp.GradScaler(init_scale=256.0, growth_interval=2)
    model, neuron_scaler = train("neuron", neuron_scaler)
    cpu_model, cpu_scaler = train("cpu", torch.amp.GradScaler("cpu", init_scale=256.0,
                                                              growth_interval=2))
    torch.testing.assert_close(model.weight.detach().cpu(), cpu_model.weight.detach())
    state = neuron_scaler.state_dict()
    assert state == cpu_scaler.state_dict()
    with pytest.warns(FutureWarning):
        restored = torch.neuron.amp.GradScaler()
    restored.load_state_dict(state)
    assert restored.state_dict() == state and restored.get_scale() == neuron_scaler.get_scale()


def test_amp_autocast_alias_uses_neuron_autocast():
    a = torch.randn(4, 4)
    with pytest.warns(FutureWarning, match=r"torch.amp.autocast\('neuron', args...\)"):
        ctx = torch.neuron.amp.autocast()
    with ctx:
        out = a.to("neuron") @ a.to("neuron")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = a @ a
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.cpu(), expected)
    with pytest.warns(FutureWarning):
        with torch.neuron.amp.autocast(dtype=torch.float16):
            assert (a.to("neuron") @ a.to("neuron")).dtype == torch.float16


def test_amp_custom_fwd_bwd_aliases():
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    with pytest.warns(FutureWarning, match="device_type='neuron'"):
        Square.forward = staticmethod(torch.neuron.amp.custom_fwd(Square.forward))
    with pytest.warns(FutureWarning, match="device_type='neuron'"):
        Square.backward = staticmethod(torch.neuron.amp.custom_bwd(Square.backward))
    x = torch.tensor([1.0, -2.0], device="neuron", requires_grad=True)
    Square.apply(x).sum().backward()
    torch.testing.assert_close(x.grad.cpu(), torch.tensor([2.0, -4.0]))


def test_amp_submodule_imports_like_torch_cuda_amp():
    from torch.neuron.amp import GradScaler  # noqa: F401
    import torch.neuron.amp as amp_module
    assert amp_module is torch.neuron.amp
