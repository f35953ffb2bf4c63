"""Every op in neuron's autocast lists (csrc/ops/Autocast.cpp, read through op_lists()) runs under
torch.autocast("neuron") with the dtype its policy prescribes, and with the values the CPU
computes for the same casts."""

import pytest
import torch

from torchneuron.ops.autocast import op_lists

LOW = (torch.bfloat16, torch.float16)


def r(*shape):
    return torch.randn(*shape)


def pos(*shape):  # domain of log, rsqrt, pow with tensor exponent
    return torch.rand(*shape) + 0.5


def unit(*shape):  # domain of acos, asin, erfinv
    return torch.rand(*shape) * 1.8 - 0.9


def sign(*shape):  # ±1 targets of margin and embedding losses
    return torch.randint(0, 2, shape).float() * 2 - 1


def conv_args(transposed=False):
    return [[1, 1], [0, 0], [1, 1], transposed, [0, 0], 1]


# op name -> arguments for one call (float32; the test casts them as each policy needs).
SAMPLES = {
    # lower_precision_fp
    "_convolution.deprecated": lambda: (r(1, 2, 5, 5), r(3, 2, 3, 3), r(3), *conv_args(),
                                        False, False, True),
    "_convolution": lambda: (r(1, 2, 5, 5), r(3, 2, 3, 3), r(3), *conv_args(), False, False,
                             True, True),
    "conv1d": lambda: (r(1, 2, 8), r(3, 2, 3)),
    "conv2d": lambda: (r(1, 2, 5, 5), r(3, 2, 3, 3)),
    "conv3d": lambda: (r(1, 2, 4, 4, 4), r(3, 2, 2, 2, 2)),
    "conv_tbc": lambda: (r(5, 2, 3), r(2, 3, 4), r(4), 0),
    "conv_transpose1d": lambda: (r(1, 2, 5), r(2, 3, 3)),
    "conv_transpose2d.input": lambda: (r(1, 2, 4, 4), r(2, 3, 3, 3)),
    "conv_transpose3d.input": lambda: (r(1, 2, 3, 3, 3), r(2, 3, 2, 2, 2)),
    "convolution": lambda: (r(1, 2, 5, 5), r(3, 2, 3, 3), None, *conv_args()),
    "prelu": lambda: (r(2, 3, 4), r(3)),
    "addmm": lambda: (r(3, 5), r(3, 4), r(4, 5)),
    "addmv": lambda: (r(3), r(3, 4), r(4)),
    "addr": lambda: (r(3, 4), r(3), r(4)),
    "matmul": lambda: (r(3, 4), r(4, 5)),
    "einsum": lambda: ("ij,jk->ik", [r(3, 4), r(4, 5)]),
    "mm": lambda: (r(3, 4), r(4, 5)),
    "mv": lambda: (r(3, 4), r(4)),
    "linalg_vecdot": lambda: (r(3, 4), r(3, 4)),
    "linear": lambda: (r(2, 4), r(3, 4), r(3)),
    "addbmm": lambda: (r(3, 5), r(2, 3, 4), r(2, 4, 5)),
    "baddbmm": lambda: (r(2, 3, 5), r(2, 3, 4), r(2, 4, 5)),
    "bmm": lambda: (r(2, 3, 4), r(2, 4, 5)),
    "chain_matmul": lambda: ([r(3, 4), r(4, 5), r(5, 2)],),
    "linalg_multi_dot": lambda: ([r(3, 4), r(4, 5), r(5, 2)],),
    "lstm_cell": lambda: (r(2, 4), [r(2, 3), r(2, 3)], r(12, 4), r(12, 3), r(12), r(12)),
    "gru_cell": lambda: (r(2, 4), r(2, 3), r(9, 4), r(9, 3), r(9), r(9)),
    "rnn_tanh_cell": lambda: (r(2, 4), r(2, 3), r(3, 4), r(3, 3), r(3), r(3)),
    "rnn_relu_cell": lambda: (r(2, 4), r(2, 3), r(3, 4), r(3, 3), r(3), r(3)),
    "scaled_dot_product_attention": lambda: (r(1, 2, 4, 8), r(1, 2, 4, 8), r(1, 2, 4, 8)),
    # fp32
    "acos": lambda: (unit(5),), "asin": lambda: (unit(5),), "erfinv": lambda: (unit(5),),
    "cosh": lambda: (r(5),), "exp": lambda: (r(5),), "expm1": lambda: (r(5),),
    "sinh": lambda: (r(5),), "tan": lambda: (r(5),), "log": lambda: (pos(5),),
    "log10": lambda: (pos(5),), "log2": lambda: (pos(5),), "log1p": lambda: (pos(5),),
    "reciprocal": lambda: (pos(5),), "rsqrt": lambda: (pos(5),),
    "pow.Tensor_Scalar": lambda: (pos(5), 2.0),
    "pow.Tensor_Tensor": lambda: (pos(5), r(5)),
    "pow.Scalar": lambda: (2.0, r(5)),
    "softplus": lambda: (r(5),),
    "layer_norm": lambda: (r(2, 4), [4], r(4), r(4)),
    "native_layer_norm": lambda: (r(2, 4), [4], r(4), r(4), 1e-5),
    "rms_norm": lambda: (r(2, 4), [4], r(4)),
    "group_norm": lambda: (r(2, 4, 3), 2, r(4), r(4)),
    "frobenius_norm.dim": lambda: (r(3, 4), [0, 1]),
    "nuclear_norm": lambda: (r(3, 4),),
    "nuclear_norm.dim": lambda: (r(3, 4), [0, 1]),
    "cosine_similarity": lambda: (r(3, 4), r(3, 4)),
    "poisson_nll_loss": lambda: (r(5), pos(5), True, False, 1e-8, 1),
    "cosine_embedding_loss": lambda: (r(3, 4), r(3, 4), sign(3)),
    "nll_loss": lambda: (r(3, 5).log_softmax(1), torch.randint(0, 5, (3,))),
    "nll_loss2d": lambda: (r(2, 5, 3, 3).log_softmax(1), torch.randint(0, 5, (2, 3, 3))),
    "hinge_embedding_loss": lambda: (r(5), sign(5)),
    "kl_div": lambda: (r(5).log_softmax(0), torch.rand(5)),
    "l1_loss": lambda: (r(5), r(5)),
    "smooth_l1_loss": lambda: (r(5), r(5)),
    "huber_loss": lambda: (r(5), r(5)),
    "mse_loss": lambda: (r(5), r(5)),
    "margin_ranking_loss": lambda: (r(5), r(5), sign(5)),
    "multilabel_margin_loss": lambda: (r(2, 4), torch.tensor([[3, 0, -1, 1], [0, 1, 2, -1]])),
    "soft_margin_loss": lambda: (r(5), sign(5)),
    "triplet_margin_loss": lambda: (r(3, 4), r(3, 4), r(3, 4)),
    "multi_margin_loss": lambda: (r(3, 4), torch.randint(0, 4, (3,))),
    "binary_cross_entropy_with_logits": lambda: (r(5), torch.rand(5)),
    "dist": lambda: (r(5), r(5)),
    "pdist": lambda: (r(4, 3),),
    "cdist": lambda: (r(3, 4), r(2, 4)),
    "renorm": lambda: (r(3, 4), 2, 0, 1.0),
    "logsumexp": lambda: (r(3, 4), [1]),
    "upsample_nearest1d": lambda: (r(1, 2, 4), [8]),
    "_upsample_nearest_exact1d": lambda: (r(1, 2, 4), [8]),
    "upsample_nearest2d": lambda: (r(1, 2, 4, 4), [8, 8]),
    "_upsample_nearest_exact2d": lambda: (r(1, 2, 4, 4), [8, 8]),
    "upsample_nearest3d": lambda: (r(1, 1, 2, 2, 2), [4, 4, 4]),
    "_upsample_nearest_exact3d": lambda: (r(1, 1, 2, 2, 2), [4, 4, 4]),
    "upsample_linear1d": lambda: (r(1, 2, 4), [8], False),
    "upsample_bilinear2d": lambda: (r(1, 2, 4, 4), [8, 8], False),
    "_upsample_bilinear2d_aa": lambda: (r(1, 2, 4, 4), [8, 8], False),
    "upsample_trilinear3d": lambda: (r(1, 1, 2, 2, 2), [4, 4, 4], False),
    "upsample_bicubic2d": lambda: (r(1, 2, 4, 4), [8, 8], False),
    "_upsample_bicubic2d_aa": lambda: (r(1, 2, 4, 4), [8, 8], False),
    # fp32_set_opt_dtype
    "prod": lambda: (pos(5),),
    "prod.dim_int": lambda: (pos(3, 4), 1),
    "softmax.int": lambda: (r(3, 4), 1),
    "log_softmax.int": lambda: (r(3, 4), 1),
    "cumprod": lambda: (pos(5), 0),
    "cumsum": lambda: (r(5), 0),
    "linalg_vector_norm": lambda: (r(5),),
    "linalg_matrix_norm": lambda: (r(3, 4), 1),
    "linalg_matrix_norm.str_ord": lambda: (r(3, 4), "fro"),
    "sum": lambda: (r(5),),
    "sum.dim_IntList": lambda: (r(3, 4), [1]),
    # fp32_append_dtype
    "norm.Scalar": lambda: (r(5), 2),
    "norm.ScalarOpt_dim": lambda: (r(3, 4), 2, [1], False),
    # promote: the first floating tensor arrives in low precision, the others in float32
    "addcdiv": lambda: (r(5), r(5), pos(5)),
    "addcmul": lambda: (r(5), r(5), r(5)),
    "atan2": lambda: (r(5), r(5)),
    "bilinear": lambda: (r(2, 3), r(2, 4), r(5, 3, 4), r(5)),
    "cross": lambda: (r(3, 3), r(3, 3)),
    "dot": lambda: (r(5), r(5)),
    "vdot": lambda: (r(5), r(5)),
    "grid_sampler": lambda: (r(1, 2, 4, 4), unit(1, 3, 3, 2), 0, 0, False),
    "index_put": lambda: (r(5), [torch.tensor([0, 2])], r(2)),
    "tensordot": lambda: (r(3, 4), r(4, 5), [1], [0]),
    "scatter_add": lambda: (r(5), 0, torch.tensor([0, 1, 0]), r(3)),
}

# The fused RNN cells have no CPU kernel: neuron has its own, checked against these references.
def _lstm_reference(igates, hgates, cx):
    i, f, g, o = (igates + hgates).chunk(4, 1)
    cy = f.sigmoid() * cx + i.sigmoid() * g.tanh()
    return o.sigmoid() * cy.tanh(), cy


def _gru_reference(igates, hgates, hx):
    ir, ii, in_ = igates.chunk(3, 1)
    hr, hi, hn = hgates.chunk(3, 1)
    r, z = (ir + hr).sigmoid(), (ii + hi).sigmoid()
    n = (in_ + r * hn).tanh()
    return (n + z * (hx - n),)


SAMPLES["_thnn_fused_lstm_cell"] = lambda: (r(2, 12), r(2, 12), r(2, 3))
SAMPLES["_thnn_fused_gru_cell"] = lambda: (r(2, 9), r(2, 9), r(2, 3))
CPU_REFERENCES = {"_thnn_fused_lstm_cell": _lstm_reference,
                  "_thnn_fused_gru_cell": _gru_reference}

# Listed because CUDA lists it, but no kernel exists for it outside CUDA: the policy casts the
# inputs, then the device reports the missing kernel as NotImplementedError.
CUDA_ONLY = {"_scaled_dot_product_flash_attention"}


def _policy_cases():
    for policy, ops in op_lists().items():
        if policy == "banned":
            continue
        for name in sorted(set(ops) - CUDA_ONLY):  # those have their own test below
            yield pytest.param(policy, name, id=f"{policy}:{name}")


def _aten(name):
    op, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), overload or "default")


def _map_tensors(obj, fn, floats_only=True):
    """Applies `fn` to every (floating) tensor in a nested argument list."""
    if isinstance(obj, torch.Tensor):
        return fn(obj) if obj.is_floating_point() or not floats_only else obj
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map_tensors(o, fn, floats_only) for o in obj)
    return obj


def _map_floats(obj, fn):
    return _map_tensors(obj, fn)


def _to(args, device=None, dtype=None):
    if device is not None:
        args = _map_tensors(args, lambda t: t.to(device), floats_only=False)
    if dtype is not None:
        args = _map_floats(args, lambda t: t.to(dtype))
    return args


def _tensors(out):
    return [out] if isinstance(out, torch.Tensor) else [t for t in out if isinstance(t, torch.Tensor)]


def _first_float_low(args, low):
    done = [False]

    def fn(t):
        if done[0]:
            return t
        done[0] = True
        return t.to(low)

    return _map_floats(args, fn)


def test_every_listed_op_has_a_sample_and_an_autocast_kernel():
    listed = {name for policy, ops in op_lists().items() for name in ops}
    assert listed - set(SAMPLES) - {"binary_cross_entropy"} == CUDA_ONLY
    assert set(SAMPLES) <= listed
    for name in listed:
        qualified = "aten::" + name
        assert torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "AutocastPrivateUse1"), name


def test_lists_follow_cuda():
    lists = op_lists()
    assert {"mm", "bmm", "linear", "conv2d", "scaled_dot_product_attention"} <= set(
        lists["lower_precision_fp"])
    assert {"layer_norm", "group_norm", "mse_loss", "nll_loss", "exp"} <= set(lists["fp32"])
    assert {"softmax.int", "log_softmax.int", "sum"} <= set(lists["fp32_set_opt_dtype"])
    for ops in lists.values():
        assert len(ops) == len(set(ops)), "an op is listed twice"


@pytest.mark.parametrize("low", LOW, ids=str)
@pytest.mark.parametrize("policy,name", list(_policy_cases()))
def test_listed_op_dtype_and_values(policy, name, low):
    torch.manual_seed(0)
    args = SAMPLES[name]()
    if policy == "lower_precision_fp":
        given, expected = args, low
    elif policy == "promote":
        given, expected = _first_float_low(args, low), torch.float32
    else:
        given, expected = _to(args, dtype=low), torch.float32

    with torch.autocast("neuron", dtype=low):
        out = _aten(name)(*_to(given, device="neuron"))
    # the CPU, same casts, no autocast
    ref = CPU_REFERENCES.get(name, _aten(name))(*_to(given, dtype=expected))

    for got, want in zip(_tensors(out), _tensors(ref)):
        assert got.device.type == "neuron"
        if want.is_floating_point():
            assert got.dtype == expected, f"{name} under autocast({low}) gave {got.dtype}"
        torch.testing.assert_close(got.cpu(), want)


def test_cuda_only_op_reports_the_missing_kernel():
    name = "_scaled_dot_product_flash_attention"
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::" + name, "AutocastPrivateUse1")
    q = torch.randn(1, 2, 4, 8, device="neuron")
    with torch.autocast("neuron"), pytest.raises((NotImplementedError, RuntimeError)):
        _aten(name)(q, q, q)


def test_binary_cross_entropy_is_banned_like_cuda():
    p, t = torch.rand(5, device="neuron"), torch.rand(5, device="neuron")
    with torch.autocast("neuron"), pytest.raises(RuntimeError, match="unsafe to autocast on neuron"):
        torch.nn.functional.binary_cross_entropy(p, t)
    # Outside autocast it is an ordinary op.
    torch.testing.assert_close(torch.nn.functional.binary_cross_entropy(p, t).cpu(),
                               torch.nn.functional.binary_cross_entropy(p.cpu(), t.cpu()))


def test_unlisted_ops_run_unchanged():
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast("neuron"):
        out = (a + a).relu()
        mixed = a.bfloat16() * a  # ordinary type promotion, no cast policy
    assert out.dtype == torch.float32 and mixed.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), (a.cpu() + a.cpu()).relu())
