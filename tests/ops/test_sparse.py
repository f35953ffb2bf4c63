"""Sparse tensors on neuron (csrc/aten/native/Sparse.cpp, csrc/aten/SparseMembers.*): COO and the
compressed layouts live on neuron as on CUDA, their members are neuron tensors, and every result
matches the CPU's."""

import io
import warnings

import pytest
import torch
from torch.testing import assert_close

pytestmark = pytest.mark.filterwarnings("ignore:Sparse (CSR|invariant|BSR|CSC)")


def dense_with_zeros(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=g)
    return x * (torch.rand(*shape, generator=g) < 0.4)


def members(t):
    if t.layout == torch.sparse_coo:
        return [t._indices(), t._values()]
    if t.layout in (torch.sparse_csr, torch.sparse_bsr):
        return [t.crow_indices(), t.col_indices(), t.values()]
    return [t.ccol_indices(), t.row_indices(), t.values()]


def assert_on_neuron(t):
    assert t.device.type == "neuron"
    for m in members(t) if t.layout != torch.strided else []:
        assert m.device.type == "neuron" and m.layout == torch.strided


CONVERSIONS = {
    "coo": lambda x: x.to_sparse(),
    "coo_sparse_dim1": lambda x: x.to_sparse(1),
    "csr": lambda x: x.to_sparse_csr(),
    "csc": lambda x: x.to_sparse_csc(),
    "bsr": lambda x: x.to_sparse_bsr((2, 2)),
    "bsc": lambda x: x.to_sparse_bsc((2, 2)),
}


@pytest.mark.parametrize("name", CONVERSIONS)
def test_dense_to_sparse_layouts_match_cpu(name):
    x = dense_with_zeros(4, 6)
    convert = CONVERSIONS[name]
    on_neuron = convert(x.to("neuron"))
    assert_on_neuron(on_neuron)
    expected = convert(x)
    assert on_neuron.layout == expected.layout
    assert_close(on_neuron.cpu(), expected)
    assert_close(on_neuron.to_dense().cpu(), x)


@pytest.mark.parametrize("name", ["coo", "csr", "csc", "bsr"])
def test_sparse_moves_between_cpu_and_neuron(name):
    x = dense_with_zeros(4, 6, seed=1)
    cpu_sparse = CONVERSIONS[name](x)
    on_neuron = cpu_sparse.to("neuron")
    assert_on_neuron(on_neuron)
    assert_close(on_neuron.cpu(), cpu_sparse)
    assert_close(on_neuron.to_dense().cpu(), x)


def test_sparse_coo_tensor_on_neuron_and_coalesce():
    indices = torch.tensor([[0, 1, 1, 0], [2, 0, 0, 2]])
    values = torch.tensor([1.0, 2.0, 3.0, 4.0])
    cpu = torch.sparse_coo_tensor(indices, values, (2, 3))
    neuron = torch.sparse_coo_tensor(indices, values, (2, 3), device="neuron")
    assert_on_neuron(neuron)
    assert not neuron.is_coalesced()
    coalesced = neuron.coalesce()
    assert coalesced.is_coalesced() and coalesced._nnz() == 2
    assert_close(coalesced.cpu(), cpu.coalesce())
    assert_close(coalesced._values().cpu(), cpu.coalesce()._values())
    # From neuron members the device follows them, as CUDA's does.
    from_members = torch.sparse_coo_tensor(indices.to("neuron"), values.to("neuron"), (2, 3))
    assert_on_neuron(from_members)
    assert_close(from_members.to_dense().cpu(), cpu.to_dense())


def test_empty_and_zeros_in_sparse_layouts():
    for layout in (torch.sparse_coo, torch.sparse_csr):
        t = torch.zeros(3, 4, layout=layout, device="neuron")
        assert t.layout == layout
        assert_on_neuron(t)
        assert_close(t.to_dense().cpu(), torch.zeros(3, 4))


def test_accessors_are_views_of_the_neuron_members():
    s = dense_with_zeros(3, 4).to("neuron").to_sparse()
    s._values().mul_(2)  # writes through, as Adagrad's sqrt_ on _values() relies on
    assert_close(s.to_dense().cpu(), dense_with_zeros(3, 4) * 2)


@pytest.mark.parametrize("name", ["coo", "csr"])
def test_mm_addmm_and_sparse_mm_match_cpu(name):
    a = dense_with_zeros(5, 4)
    b = torch.randn(4, 3)
    c = torch.randn(5, 3)
    sa = CONVERSIONS[name](a)
    sn = CONVERSIONS[name](a.to("neuron"))
    bn, cn = b.to("neuron"), c.to("neuron")
    assert_close(torch.mm(sn, bn).cpu(), torch.mm(sa, b))
    assert_close(torch.sparse.mm(sn, bn).cpu(), torch.sparse.mm(sa, b))
    assert_close(torch.addmm(cn, sn, bn, beta=0.5, alpha=2).cpu(),
                 torch.addmm(c, sa, b, beta=0.5, alpha=2))
    assert_close((sn @ bn).cpu(), sa @ b)


def test_sparse_times_sparse_matches_cpu():
    a, b = dense_with_zeros(4, 5), dense_with_zeros(5, 3, seed=2)
    product = torch.sparse.mm(a.to("neuron").to_sparse(), b.to("neuron").to_sparse())
    assert_on_neuron(product)
    assert_close(product.cpu(), torch.sparse.mm(a.to_sparse(), b.to_sparse()))


def test_sampled_addmm_matches_cpu():
    mask = dense_with_zeros(4, 4).to_sparse_csr()
    m1, m2 = torch.randn(4, 3), torch.randn(3, 4)
    expected = torch.sparse.sampled_addmm(mask, m1, m2, beta=0.5, alpha=2)
    got = torch.sparse.sampled_addmm(mask.to("neuron"), m1.to("neuron"), m2.to("neuron"),
                                     beta=0.5, alpha=2)
    assert_on_neuron(got)
    assert_close(got.cpu(), expected)


def test_sparse_mask_matches_cpu():
    x = torch.randn(4, 5)
    mask = dense_with_zeros(4, 5).to_sparse()
    got = x.to("neuron").sparse_mask(mask.to("neuron"))
    assert_on_neuron(got)
    assert_close(got.cpu(), x.sparse_mask(mask))
    mask_csr = dense_with_zeros(4, 5).to_sparse_csr()
    assert_close(x.to("neuron").sparse_mask(mask_csr.to("neuron")).cpu(), x.sparse_mask(mask_csr))


def test_sums_match_cpu():
    x = dense_with_zeros(3, 4, 2)
    s, sn = x.to_sparse(2), x.to("neuron").to_sparse(2)
    assert_close(torch.sparse.sum(sn).cpu(), torch.sparse.sum(s))
    assert_close(torch.sparse.sum(sn, dim=1).cpu(), torch.sparse.sum(s, dim=1))
    assert_close(torch.sparse.sum(sn, dim=(0, 2)).cpu(), torch.sparse.sum(s, dim=(0, 2)))
    csr = dense_with_zeros(3, 4).to_sparse_csr()
    assert_close(csr.to("neuron").sum().cpu(), csr.sum())


def test_elementwise_and_in_place_ops_match_cpu():
    a, b = dense_with_zeros(3, 4), dense_with_zeros(3, 4, seed=3)
    sa, sb = a.to_sparse(), b.to_sparse()
    na, nb = sa.to("neuron"), sb.to("neuron")
    assert_close((na + nb).cpu(), sa + sb)
    assert_close((na * 3).cpu(), sa * 3)
    assert_close(torch.sin(na).cpu(), torch.sin(sa))
    na.add_(nb)
    assert_on_neuron(na)
    assert_close(na.cpu(), sa + sb)
    dense = torch.randn(3, 4)
    dn = dense.to("neuron")
    dn.add_(nb, alpha=-0.5)  # what SGD does with a sparse gradient
    assert_close(dn.cpu(), dense.add(sb, alpha=-0.5))


def grads_of(device, dense_a, dense_b, layout):
    a = dense_a.to(device)
    a = a.to_sparse() if layout == "coo" else a.to_sparse_csr()
    a.requires_grad_()
    b = dense_b.to(device).detach().requires_grad_()
    torch.sparse.mm(a, b).sum().backward()
    return a.grad, b.grad


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_autograd_through_sparse_mm_matches_cpu(layout):
    a, b = dense_with_zeros(4, 5), torch.randn(5, 3)
    expected = grads_of("cpu", a, b, layout)
    got = grads_of("neuron", a, b, layout)
    for g, e in zip(got, expected):
        assert g.device.type == "neuron" and g.layout == e.layout
        assert_close(g.cpu().to_dense(), e.to_dense())


def test_autograd_through_to_sparse_to_dense_and_sum_matches_cpu():
    x = dense_with_zeros(3, 4)
    grads = {}
    for device in ("cpu", "neuron"):
        xd = x.to(device).detach().requires_grad_()
        s = xd.to_sparse()
        loss = torch.sparse.sum(s * s) + (s.to_dense() * 2).sum()
        loss.backward()
        grads[device] = xd.grad
    assert_close(grads["neuron"].cpu(), grads["cpu"])


def train_embedding(device, optimizer_class, steps=3, **options):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(10, 4, sparse=True).to(device)
    opt = optimizer_class(emb.parameters(), **options)
    batches = torch.tensor([[1, 2, 2, 7], [0, 7, 9, 9], [3, 3, 1, 5]])
    for step in range(steps):
        opt.zero_grad()
        emb(batches[step].to(device)).pow(2).sum().backward()
        assert emb.weight.grad.layout == torch.sparse_coo
        opt.step()
    return emb.weight.detach()


@pytest.mark.parametrize("optimizer_class,options", [
    (torch.optim.SGD, {"lr": 0.1}),
    (torch.optim.SGD, {"lr": 0.1, "momentum": 0.0, "foreach": False}),
    (torch.optim.Adagrad, {"lr": 0.1}),
    (torch.optim.SparseAdam, {"lr": 0.1}),
])
def test_sparse_embedding_training_matches_cpu(optimizer_class, options):
    expected = train_embedding("cpu", optimizer_class, **options)
    got = train_embedding("neuron", optimizer_class, **options)
    assert got.device.type == "neuron"
    assert_close(got.cpu(), expected)


def unscaled_sparse_grad(device, poison=False):
    torch.manual_seed(0)
    emb = torch.nn.Embedding(6, 3, sparse=True).to(device)
    opt = torch.optim.SGD(emb.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler(device, init_scale=1024.0)
    out = emb(torch.tensor([0, 2, 2, 5], device=device)).sum()
    if poison:
        out = out * torch.tensor(float("inf"), device=device)
    scaler.scale(out).backward()
    scaler.unscale_(opt)
    found_inf = sum(v.item() for v in scaler._check_inf_per_device(opt).values())
    return emb.weight.grad, found_inf


def test_grad_scaler_unscales_sparse_gradients_like_cpu():
    expected, expected_inf = unscaled_sparse_grad("cpu")
    got, got_inf = unscaled_sparse_grad("neuron")
    assert got.layout == torch.sparse_coo and got.device.type == "neuron"
    assert_close(got.cpu(), expected)
    assert got_inf == expected_inf == 0
    assert unscaled_sparse_grad("neuron", poison=True)[1] == 1


@pytest.mark.parametrize("name", ["coo", "csr", "csc", "bsr"])
def test_save_and_load_keep_sparse_neuron_tensors(name):
    x = dense_with_zeros(4, 6)
    sparse = CONVERSIONS[name](x.to("neuron"))
    buffer = io.BytesIO()
    torch.save({"t": sparse}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["t"]
    assert_on_neuron(loaded)
    assert loaded.layout == sparse.layout
    assert_close(loaded.cpu(), CONVERSIONS[name](x))
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")["t"]
    assert on_cpu.device.type == "cpu"
    assert_close(on_cpu, CONVERSIONS[name](x))


# Errors: each raises the exception the CPU (or CUDA) raises, with a message naming the cause.

def test_op_without_a_cpu_sparse_kernel_raises_not_implemented_naming_the_key():
    s = dense_with_zeros(3, 4).to_sparse()
    with pytest.raises(NotImplementedError):
        torch.cumsum(s, 0)
    with pytest.raises(NotImplementedError, match="SparseCPU kernel"):
        torch.cumsum(s.to("neuron"), 0)
    csr = dense_with_zeros(3, 4).to_sparse_csr()
    with pytest.raises(NotImplementedError):
        torch.cumsum(csr, 0)
    with pytest.raises(NotImplementedError, match="SparseCsrCPU kernel"):
        torch.cumsum(csr.to("neuron"), 0)


def test_mkldnn_layout_is_refused_clearly():
    x = torch.randn(2, 3, device="neuron")
    with pytest.raises(RuntimeError, match="neuron supports strided, sparse COO and sparse "
                                           "compressed .* got layout Mkldnn"):
        x.to_mkldnn()


def test_mixing_a_cpu_sparse_tensor_into_a_neuron_op_raises_like_cuda():
    s = dense_with_zeros(3, 4).to_sparse()
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        s.to("neuron") + s


def test_members_on_two_devices_are_refused():
    indices = torch.tensor([[0, 1], [1, 2]])
    values = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="must match backend of values"):
        torch.sparse_coo_tensor(indices, values.to("neuron"), (3, 3))  # the CPU's own check
    with pytest.raises(RuntimeError, match=r"backend of indices \(PrivateUseOne\) must match"):
        torch.sparse_coo_tensor(indices.to("neuron"), values, (3, 3))


def test_invalid_indices_are_refused_as_on_cpu():
    indices = torch.tensor([[0, 5], [1, 2]])
    values = torch.tensor([1.0, 2.0])
    with pytest.raises(RuntimeError, match="index"):
        torch.sparse_coo_tensor(indices, values, (3, 3), check_invariants=True)
    with pytest.raises(RuntimeError, match="index"):
        torch.sparse_coo_tensor(indices, values, (3, 3), device="neuron", check_invariants=True)


def test_shape_mismatch_in_sparse_mm_raises_like_cpu():
    s = dense_with_zeros(3, 4).to_sparse()
    b = torch.randn(5, 2)
    with pytest.raises(RuntimeError) as cpu_error:
        torch.sparse.mm(s, b)
    with pytest.raises(RuntimeError) as neuron_error:
        torch.sparse.mm(s.to("neuron"), b.to("neuron"))
    assert str(cpu_error.value).split("\n")[0] == str(neuron_error.value).split("\n")[0]


def test_no_warning_beyond_the_cpus():
    x = dense_with_zeros(3, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        x.to("neuron").to_sparse().coalesce().to_dense()
    assert not [w for w in caught if "neuron" in str(w.message)]


def test_members_are_neuron_memory_freed_with_the_tensor():
    x = dense_with_zeros(64, 64).to("neuron")
    torch.neuron.empty_cache()
    before = torch.neuron.memory_allocated()
    s = x.to_sparse().coalesce()
    members_bytes = s._indices().untyped_storage().nbytes() + s._values().untyped_storage().nbytes()
    assert torch.neuron.memory_allocated() >= before + members_bytes
    del s
    assert torch.neuron.memory_allocated() == before
