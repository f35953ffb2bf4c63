"""nki.multi_rank_simulate: a kernel runs as N ranks whose nki.collectives calls exchange data;
each collective's result on every rank equals the NumPy result of the same collective over the
ranks' inputs (replica groups that split the ranks included), and a collective the ranks do not
make alike is refused with a clear error instead of hanging."""

import numpy as np
import pytest
import torch

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl
from torchneuron.kernels.nki import NkiUnsupportedError, NkiValidationError

OPS = {"add": (nl.add, np.add), "maximum": (nl.maximum, np.maximum),
       "minimum": (nl.minimum, np.minimum)}


def inputs(world, shape=(8, 16), seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(world)]


def run(kernel, xs, **static):
    return nki.multi_rank_simulate(kernel, world_size=len(xs),
                                   per_rank_inputs=[((x,), dict(static)) for x in xs])


def lists_of(groups, rank):
    return next(g for g in groups if rank in g)


def private(x):
    """x copied into private HBM, where the collectives' srcs live (the reference's example)."""
    src = nl.ndarray(x.shape, x.dtype, buffer=nl.private_hbm)
    nisa.dma_copy(dst=src, src=x)
    return src


@nki.jit
def all_reduce_kernel(x, groups, op):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ncc.all_reduce(srcs=[private(x)], dsts=[out], replica_group=ncc.ReplicaGroup(groups),
                   op=OPS[op][0])
    return out


@nki.jit
def all_gather_kernel(x, groups):
    n = len(groups[0])
    out = nl.ndarray((x.shape[0] * n, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    ncc.all_gather(srcs=[private(x)], dsts=[out], replica_group=ncc.ReplicaGroup(groups),
                   collective_dim=0)
    return out


@nki.jit
def reduce_scatter_kernel(x, groups, op):
    n = len(groups[0])
    out = nl.ndarray((x.shape[0] // n, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
    ncc.reduce_scatter(srcs=[private(x)], dsts=[out], replica_group=ncc.ReplicaGroup(groups),
                       collective_dim=0, op=OPS[op][0])
    return out


@nki.jit
def all_to_all_kernel(x, groups):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ncc.all_to_all(srcs=[private(x)], dsts=[out], replica_group=ncc.ReplicaGroup(groups),
                   collective_dim=0)
    return out


@nki.jit
def permute_kernel(x, pairs):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    ncc.collective_permute(srcs=[private(x)], dsts=[out], source_target_pairs=pairs)
    return out


GROUPS = [(2, [[0, 1]]), (4, [[0, 1, 2, 3]]), (4, [[0, 1], [2, 3]]), (4, [[2, 0], [3, 1]])]
GROUP_IDS = ["2-ranks", "4-ranks", "4-split-contiguous", "4-split-strided-reordered"]


@pytest.mark.parametrize("world,groups", GROUPS, ids=GROUP_IDS)
@pytest.mark.parametrize("op", sorted(OPS))
def test_all_reduce(world, groups, op):
    xs = inputs(world)
    results = run(all_reduce_kernel, xs, groups=groups, op=op)
    for rank, out in enumerate(results):
        members = lists_of(groups, rank)
        expected = xs[members[0]]
        for m in members[1:]:
            expected = OPS[op][1](expected, xs[m])
        assert isinstance(out, np.ndarray)
        torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(expected))


@pytest.mark.parametrize("world,groups", GROUPS, ids=GROUP_IDS)
def test_all_gather_concatenates_in_rank_list_order(world, groups):
    xs = inputs(world)
    for rank, out in enumerate(run(all_gather_kernel, xs, groups=groups)):
        expected = np.concatenate([xs[m] for m in lists_of(groups, rank)], axis=0)
        torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(expected))


@pytest.mark.parametrize("world,groups", GROUPS, ids=GROUP_IDS)
def test_reduce_scatter_gives_each_rank_its_block(world, groups):
    xs = inputs(world)
    for rank, out in enumerate(run(reduce_scatter_kernel, xs, groups=groups, op="add")):
        members = lists_of(groups, rank)
        total = sum(xs[m] for m in members)
        expected = np.split(total, len(members), axis=0)[members.index(rank)]
        torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(expected))


@pytest.mark.parametrize("world,groups", GROUPS, ids=GROUP_IDS)
def test_all_to_all_exchanges_blocks(world, groups):
    xs = inputs(world)
    for rank, out in enumerate(run(all_to_all_kernel, xs, groups=groups)):
        members = lists_of(groups, rank)
        me = members.index(rank)
        expected = np.concatenate([np.split(xs[m], len(members), axis=0)[me] for m in members])
        torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(expected))


@pytest.mark.parametrize("world", [2, 4])
def test_collective_permute_around_a_ring(world):
    xs = inputs(world)
    pairs = [(r, (r + 1) % world) for r in range(world)]
    for rank, out in enumerate(run(permute_kernel, xs, pairs=pairs)):
        torch.testing.assert_close(torch.from_numpy(out), torch.from_numpy(xs[rank - 1]))


@pytest.mark.parametrize("world", [2, 4])
def test_rank_id_is_each_ranks_own(world):
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(ncc.rank_id()))
        nisa.dma_copy(dst=out, src=t)
        return out

    results = run(k, [np.zeros((4, 4), np.float32)] * world)
    for rank, out in enumerate(results):
        np.testing.assert_array_equal(out, np.full((4, 4), rank, np.float32))


def test_coalesced_all_reduce_and_a_sequence_of_collectives():
    """Two tensors in one call, then a second collective on the result: the rendezvous keeps
    the ranks in step."""
    @nki.jit
    def k(x, y):
        a = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        b = nl.ndarray(y.shape, y.dtype, buffer=nl.shared_hbm)
        group = ncc.ReplicaGroup([[0, 1, 2]])
        ncc.all_reduce([private(x), private(y)], [a, b], group, nl.add)
        c = nl.ndarray((x.shape[0] * 3, x.shape[1]), x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([a], [c], group, collective_dim=0)
        return b, c

    xs, ys = inputs(3, seed=1), inputs(3, (4, 8), seed=2)
    results = nki.multi_rank_simulate(k, world_size=3, per_rank_inputs={
        r: ((xs[r], ys[r]), {}) for r in range(3)})
    for b, c in results:
        torch.testing.assert_close(torch.from_numpy(b), torch.from_numpy(sum(ys)))
        torch.testing.assert_close(torch.from_numpy(c), torch.from_numpy(np.tile(sum(xs), (3, 1))))


def test_sbuf_all_gather_along_the_free_dimension():
    @nki.jit
    def k(x):
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        g = nl.ndarray((x.shape[0], x.shape[1] * 2), x.dtype, buffer=nl.sbuf)
        ncc.all_gather([t], [g], ncc.ReplicaGroup([[1, 0]]), collective_dim=1)
        out = nl.ndarray(g.shape, x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=g)
        return out

    xs = inputs(2)
    for out in run(k, xs):
        torch.testing.assert_close(torch.from_numpy(out),
                                   torch.from_numpy(np.concatenate([xs[1], xs[0]], axis=1)))


def test_an_ordinary_call_stays_rank_zero_of_one():
    x = inputs(1)[0]
    torch.testing.assert_close(torch.from_numpy(all_reduce_kernel(x, [[0]], "add")),
                               torch.from_numpy(x))
    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*rank 0 of one"):
        all_reduce_kernel(x, [[0, 1]], "add")


# ---- collectives the ranks do not make alike --------------------------------------------------

def test_mismatched_shapes_are_refused_naming_ranks_and_shapes():
    @nki.jit
    def k(x):
        rows = 4 if ncc.rank_id() == 0 else 2
        src = private(x[0:rows, :])
        out = nl.ndarray(src.shape, x.dtype, buffer=nl.shared_hbm)
        ncc.all_reduce([src], [out], ncc.ReplicaGroup([[0, 1]]), nl.add)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-mismatch\] rank 1 calls "
                       r"nki.collectives.all_reduce\(src \(2, 16\) float32.*but rank 0 waits at "
                       r"nki.collectives.all_reduce\(src \(4, 16\) float32") as info:
        run(k, inputs(2))
    assert "on rank 1 of nki.multi_rank_simulate's 2 ranks" in "".join(info.value.__notes__)


def test_mismatched_ops_are_refused():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        op = nl.add if ncc.rank_id() == 0 else nl.maximum
        ncc.all_reduce([private(x)], [out], ncc.ReplicaGroup([[0, 1]]), op)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-mismatch\].*op=maximum.*op=add"):
        run(k, inputs(2))


def test_mismatched_operations_are_refused():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        group = ncc.ReplicaGroup([[0, 1]])
        if ncc.rank_id() == 0:
            ncc.all_reduce([private(x)], [out], group, nl.add)
        else:
            ncc.all_to_all([private(x)], [out], group, collective_dim=0)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-mismatch\] rank 1 calls "
                       r"nki.collectives.all_to_all.*rank 0 waits at nki.collectives.all_reduce"):
        run(k, inputs(2))


def test_mismatched_groups_are_refused():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        groups = [[0, 1, 2, 3]] if ncc.rank_id() == 0 else [[0, 1], [2, 3]]
        ncc.all_reduce([private(x)], [out], ncc.ReplicaGroup(groups), nl.add)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-mismatch\] rank 1 .*"
                       r"replica_group=\[\[0, 1\], \[2, 3\]\].*rank 0 .*"
                       r"replica_group=\[\[0, 1, 2, 3\]\]"):
        run(k, inputs(4))


def test_a_rank_that_skips_the_collective_is_refused_not_waited_for():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        if ncc.rank_id() != 1:
            ncc.all_reduce([private(x)], [out], ncc.ReplicaGroup([[0, 1]]), nl.add)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-rendezvous\] rank 0 waits at "
                       r"nki.collectives.all_reduce.*but rank 1 returned without reaching it"):
        run(k, inputs(2))


def test_ranks_waiting_on_each_other_in_a_cycle_are_refused():
    """Rank 0 would wait for rank 1 in [[0, 1], [2]], rank 1 for rank 2 in [[1, 2], [0]], rank 2
    for rank 0: a cycle that would hang; rank 1's arrival already conflicts with rank 0's call."""
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        me = ncc.rank_id()
        groups = [[[0, 1], [2]], [[1, 2], [0]], [[2, 0], [1]]][me]
        ncc.all_reduce([private(x)], [out], ncc.ReplicaGroup(groups), nl.add)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-mismatch\] rank 1 calls .*"
                       r"replica_group=\[\[1, 2\], \[0\]\]\) but rank 0 waits"):
        run(k, inputs(3))


def test_group_rules():
    xs = inputs(2)
    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*names rank 2; the world "
                       r"has ranks 0 to 1"):
        run(all_reduce_kernel, xs, groups=[[0, 2]], op="add")
    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*names rank 0 twice"):
        run(all_reduce_kernel, xs, groups=[[0, 1], [0]], op="add")
    with pytest.raises(NkiValidationError, match=r"\[collective-group\] .*rank 1 is in no rank "
                       r"list of replica group \[\[0\]\]"):
        run(all_reduce_kernel, xs, groups=[[0]], op="add")
    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*leave rank 0 the target "
                       r"of no pair"):
        run(permute_kernel, xs, pairs=[(0, 1)])


def test_shape_rules():
    xs = inputs(2)

    @nki.jit
    def gather_on_dim_1(x):
        out = nl.ndarray((x.shape[0], x.shape[1] * 2), x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([private(x)], [out], ncc.ReplicaGroup([[0, 1]]), collective_dim=1)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-shape\].*collective_dim=1; "
                       r"supported are 0 for HBM tensors"):
        run(gather_on_dim_1, xs)

    @nki.jit
    def wrong_dst(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        ncc.all_gather([private(x)], [out], ncc.ReplicaGroup([[0, 1]]), collective_dim=0)
        return out

    with pytest.raises(NkiValidationError, match=r"\[collective-shape\].*dimension 0 times 2"):
        run(wrong_dst, xs)
    with pytest.raises(NkiValidationError, match=r"\[collective-shape\].*split into 2 equal"):
        run(reduce_scatter_kernel, inputs(2, (3, 4)), groups=[[0, 1]], op="add")


# ---- the call's own arguments -----------------------------------------------------------------

def test_bad_world_sizes_and_rank_inputs():
    xs = inputs(2)
    per_rank = [((x,), {"groups": [[0, 1]], "op": "add"}) for x in xs]
    with pytest.raises(ValueError, match=r"world_size=0 must be at least 1"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=0, per_rank_inputs=[])
    with pytest.raises(TypeError, match=r"world_size=True must be an int"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=True, per_rank_inputs=per_rank)
    with pytest.raises(ValueError, match=r"2 entries for world_size=3"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=3, per_rank_inputs=per_rank)
    with pytest.raises(ValueError, match=r"keys \[0, 2\]; a mapping needs one key for each rank "
                       r"0 to 1"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=2,
                                per_rank_inputs={0: per_rank[0], 2: per_rank[1]})
    with pytest.raises(TypeError, match=r"the input of rank 1 must be an \(args, kwargs\) pair"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=2,
                                per_rank_inputs=[per_rank[0], (xs[1],)])
    with pytest.raises(TypeError, match=r"positional"):
        nki.multi_rank_simulate(all_reduce_kernel, 2, per_rank)


def test_ranks_must_share_one_specialization():
    xs = inputs(2)
    with pytest.raises(NkiValidationError, match=r"\[multi-rank-inputs\].*on rank 1, args\[0\] "
                       r"has shape \(8, 16\) float32 on rank 0 but \(4, 16\) float32"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=2, per_rank_inputs=[
            ((xs[0],), {"groups": [[0, 1]], "op": "add"}),
            ((xs[1][:4],), {"groups": [[0, 1]], "op": "add"})])
    with pytest.raises(NkiValidationError, match=r"\[multi-rank-inputs\].*on rank 1, "
                       r"kwargs\['op'\] is 'add' on rank 0 but 'maximum'"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=2, per_rank_inputs=[
            ((xs[0],), {"groups": [[0, 1]], "op": "add"}),
            ((xs[1],), {"groups": [[0, 1]], "op": "maximum"})])
    with pytest.raises(NkiValidationError, match=r"\[multi-rank-inputs\].*rank 1 passes 1 "
                       r"positional arguments and keywords \['groups'\]"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=2, per_rank_inputs=[
            ((xs[0],), {"groups": [[0, 1]], "op": "add"}), ((xs[1],), {"groups": [[0, 1]]})])


def test_torch_tensors_and_grid_launches_are_refused():
    with pytest.raises(TypeError, match=r"takes NumPy arrays; got a torch tensor"):
        nki.multi_rank_simulate(all_reduce_kernel, world_size=1, per_rank_inputs=[
            ((torch.zeros(4, 4),), {"groups": [[0]], "op": "add"})])
    with pytest.raises(NkiUnsupportedError, match=r"how the cores of a Logical NeuronCore map "
                       r"to ranks is not documented"):
        nki.multi_rank_simulate(all_reduce_kernel[2], world_size=2, per_rank_inputs=[
            ((x,), {"groups": [[0, 1]], "op": "add"}) for x in inputs(2)])


def test_replica_groups_from_partition_ops_and_self_index():
    rg = ncc.ReplicaGroup.from_partition_op
    assert rg(8, ncc.rg_partition_op.bitwise_and, 0).groups == [list(range(8))]
    assert rg(8, ncc.rg_partition_op.div, 4).groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert rg(8, ncc.rg_partition_op.mod, 4).groups == [[0, 4], [1, 5], [2, 6], [3, 7]]

    @nki.jit
    def k(x, groups):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=float(ncc.self_index_in_replica_group(groups)))
        nisa.dma_copy(dst=out, src=t)
        return out

    groups = rg(4, ncc.rg_partition_op.mod, 2)  # [[0, 2], [1, 3]]
    results = run(k, [np.zeros((2, 2), np.float32)] * 4, groups=groups)
    assert [int(out[0, 0]) for out in results] == [0, 0, 1, 1]
    with pytest.raises(NkiValidationError, match=r"\[collective-group\].*rank 3 is in no rank "
                       r"list of replica group \[\[0, 1, 2\]\]"):
        run(k, [np.zeros((2, 2), np.float32)] * 4, groups=ncc.ReplicaGroup([[0, 1, 2]]))


def test_a_rank_that_breaks_a_rule_ends_the_others_waiting_at_a_collective():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        if ncc.rank_id() == 1:
            nl.ndarray((256, 4), nl.float32, buffer=nl.sbuf)  # beyond the 128 partitions
        ncc.all_reduce([private(x)], [out], ncc.ReplicaGroup([[0, 1]]), nl.add)
        return out

    with pytest.raises(NkiValidationError, match=r"256") as info:
        run(k, inputs(2))
    assert "on rank 1 of nki.multi_rank_simulate's 2 ranks" in "".join(info.value.__notes__)


def test_the_reference_example():
    """nki.multi_rank_simulate's page: rank r's input is filled with r, the ReplicaGroup is a
    static keyword argument, every rank returns the sum."""
    @nki.jit
    def example(x, replica_group):
        src = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.private_hbm)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=x)
        ncc.all_reduce(srcs=[src], dsts=[out], replica_group=replica_group, op=nl.add)
        return out

    xs = [np.full((128, 512), rank, dtype=np.float32) for rank in range(2)]
    group = ncc.ReplicaGroup([[0, 1]])
    results = nki.multi_rank_simulate(example, world_size=2, per_rank_inputs=[
        ((x,), {"replica_group": group}) for x in xs])
    assert isinstance(results, list) and len(results) == 2
    for out in results:
        np.testing.assert_allclose(out, xs[0] + xs[1])
