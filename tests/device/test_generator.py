"""The neuron generator is shaped like CUDA's Philox generator: its state is 16 bytes (seed,
offset), every random op draws from a stream fixed by (seed, offset) and then moves the offset
past its output, so saved states replay and distinct offsets give independent streams.

Neuron's random numbers are not the CPU's for the same seed (CUDA's are not either); what is
checked against the CPU is the distribution of the values, and, through the generator's
documented construction (mt19937 state filled from Philox4x32-10 keyed by (seed, offset)), the
values themselves: a CPU generator given that state draws exactly the neuron numbers."""

import copy
import threading

import numpy as np
import pytest
import torch

# ----------------------------------------------------------------------------- reference

M32 = 0xFFFFFFFF


def philox_words(seed: int, subsequence: int, count: int) -> list[int]:
    """Philox4x32-10 (Salmon et al. 2011, as ATen's philox_engine): 32-bit outputs of the
    counter (0, 0, subsequence) under key seed, in order."""
    key0, key1 = seed & M32, seed >> 32
    out, n = [], 0
    while len(out) < count:
        c = [n & M32, n >> 32, subsequence & M32, subsequence >> 32]
        k0, k1 = key0, key1
        for _ in range(10):
            p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
            c = [((p1 >> 32) ^ c[1] ^ k0) & M32, p1 & M32, ((p0 >> 32) ^ c[3] ^ k1) & M32,
                 p0 & M32]
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        out.extend(c)
        n += 1
    return out[:count]


def cpu_generator_for(seed: int, offset: int) -> torch.Generator:
    """A CPU generator whose mt19937 state is what neuron derives from (seed, offset), in the
    layout of CPUGeneratorImpl's state (its legacy THGeneratorState struct plus float normal)."""
    words = philox_words(seed, offset, 624)
    state = bytearray(torch.Generator().get_state().numpy().tobytes())
    header = np.array([seed], dtype=np.uint64).tobytes() + np.array([1, 1], np.int32).tobytes()
    header += np.array([0], dtype=np.uint64).tobytes()  # left=1, seeded=1, next=0
    body = np.array(words, dtype=np.uint64).tobytes()
    state[:len(header) + len(body)] = header + body
    # No cached Box-Muller samples: the double one's int flag follows three doubles; the float
    # one's bool flag follows the padded legacy struct (5048 bytes) and the float itself.
    normal_valid_at = len(header) + len(body) + 3 * 8
    state[normal_valid_at:normal_valid_at + 4] = bytes(4)
    state[5048 + 4] = 0
    return torch.Generator().set_state(torch.tensor(list(state), dtype=torch.uint8))


def seed_and_offset(state: torch.Tensor) -> tuple[int, int]:
    return state[:8].view(torch.int64).item(), state[8:].view(torch.int64).item()


# ----------------------------------------------------------------------------- tests

def test_state_is_sixteen_bytes_of_seed_and_offset():
    torch.manual_seed(123)
    state = torch.neuron.get_rng_state()
    assert state.dtype == torch.uint8 and state.shape == (16,) and state.device.type == "cpu"
    assert seed_and_offset(state) == (123, 0)
    g = torch.Generator(device="neuron").manual_seed(9)
    assert g.get_state().shape == (16,) and seed_and_offset(g.get_state()) == (9, 0)


def test_offset_advances_by_output_size_rounded_to_four():
    g = torch.Generator(device="neuron").manual_seed(1)
    assert g.get_offset() == 0
    torch.randn(5, device="neuron", generator=g)
    assert g.get_offset() == 8
    torch.rand(2, 4, device="neuron", generator=g)
    assert g.get_offset() == 16
    g.set_offset(400)
    assert g.get_offset() == 400 and seed_and_offset(g.get_state()) == (1, 400)
    g.manual_seed(2)
    assert g.get_offset() == 0  # a new seed starts a new stream at offset 0, as on CUDA


@pytest.mark.parametrize("seed,offset", [(0, 0), (7, 8), (2**63 + 5, 2**40)])
def test_values_are_the_cpu_mt19937_filled_from_philox(seed, offset):
    g = torch.Generator(device="neuron")
    g.manual_seed(seed)
    g.set_offset(offset)
    for draw in (lambda gen, dev: torch.randn(37, generator=gen, device=dev),
                 lambda gen, dev: torch.rand(5, 3, generator=gen, device=dev),
                 lambda gen, dev: torch.bernoulli(torch.full((9,), 0.5, device=dev), generator=gen),
                 lambda gen, dev: torch.randint(0, 1000, (11,), generator=gen, device=dev)):
        at = g.get_offset()
        expected = draw(cpu_generator_for(seed, at), "cpu")
        with torch.neuron.device(0):
            got = draw(g, "neuron")
        torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


def test_distribution_matches_the_cpu():
    torch.manual_seed(0)
    n = 200_000
    for make in (lambda d: torch.randn(n, device=d), lambda d: torch.rand(n, device=d),
                 lambda d: torch.empty(n, device=d).exponential_(2.0),
                 lambda d: torch.bernoulli(torch.full((n,), 0.3, device=d))):
        ref, got = make("cpu"), make("neuron").cpu()
        for stat in (torch.mean, torch.std):
            torch.testing.assert_close(stat(got), stat(ref), atol=0.01, rtol=0.01)


def test_set_rng_state_replays_the_same_values():
    torch.manual_seed(5)
    torch.randn(3, device="neuron")
    state = torch.neuron.get_rng_state()
    first = [torch.randn(6, device="neuron").cpu(), torch.rand(2, 2, device="neuron").cpu()]
    torch.neuron.set_rng_state(state)
    again = [torch.randn(6, device="neuron").cpu(), torch.rand(2, 2, device="neuron").cpu()]
    for a, b in zip(first, again):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_distinct_offsets_give_distinct_streams_and_equal_offsets_equal_ones():
    def draw(seed, offset):
        g = torch.Generator(device="neuron").manual_seed(seed)
        g.set_offset(offset)
        return torch.randn(64, device="neuron", generator=g).cpu()

    torch.testing.assert_close(draw(3, 64), draw(3, 64), rtol=0, atol=0)
    values = [draw(3, off) for off in (0, 4, 8, 64, 2**32)] + [draw(4, 0)]
    for i in range(len(values)):
        for j in range(i + 1, len(values)):
            assert not torch.isclose(values[i], values[j]).any(), (i, j)


def test_deepcopy_of_a_generator_continues_the_same_stream():
    g = torch.Generator(device="neuron").manual_seed(21)
    torch.rand(3, device="neuron", generator=g)
    twin = copy.deepcopy(g)
    assert twin.device == g.device and twin.get_offset() == g.get_offset()
    torch.testing.assert_close(torch.rand(9, device="neuron", generator=twin).cpu(),
                               torch.rand(9, device="neuron", generator=g).cpu(), rtol=0, atol=0)


def test_checkpoint_recomputes_the_same_dropout_mask():
    torch.manual_seed(0)
    w_cpu = torch.randn(32, 32)

    def run(checkpointed):
        torch.manual_seed(11)
        x = torch.ones(16, 32, device="neuron")
        w = w_cpu.to("neuron").requires_grad_()

        def block(x):
            return torch.nn.functional.dropout(x @ w, 0.5).relu()

        y = (torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
             if checkpointed else block(x))
        y.sum().backward()
        return y.detach().cpu(), w.grad.cpu()

    plain, ckpt = run(False), run(True)
    torch.testing.assert_close(ckpt[0], plain[0])
    torch.testing.assert_close(ckpt[1], plain[1])
    # The gradient is the CPU's for the mask neuron drew.
    y, mask = plain[0], plain[0] != 0
    x = torch.ones(16, 32)
    expected = x.t() @ (mask.float() * 2.0)
    torch.testing.assert_close(plain[1], expected)


def test_concurrent_draws_lose_no_offset_updates():
    g = torch.Generator(device="neuron").manual_seed(1)
    per_thread, threads = 50, 4

    def work():
        with torch.neuron.device(0):
            for _ in range(per_thread):
                torch.rand(8, device="neuron", generator=g)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=60)
    assert g.get_offset() == per_thread * threads * 8


# ----------------------------------------------------------------------------- errors

def test_set_rng_state_of_the_wrong_size_names_the_layout():
    with pytest.raises(RuntimeError, match=r"16 bytes laid out as \(seed: uint64, offset: uint64\)"
                                           r".*got 5056 bytes"):
        torch.neuron.set_rng_state(torch.get_rng_state())  # a CPU generator's state


def test_set_rng_state_of_the_wrong_dtype_names_the_layout():
    with pytest.raises(TypeError, match=r"torch.uint8 CPU tensor of 16 bytes.*got a Long"):
        torch.neuron.set_rng_state(torch.zeros(2, dtype=torch.int64))
    with pytest.raises(TypeError, match="torch.uint8 CPU tensor"):
        torch.Generator(device="neuron").set_state(torch.zeros(16, dtype=torch.uint8,
                                                               device="neuron"))


def test_offsets_that_are_not_multiples_of_four_are_refused():
    g = torch.Generator(device="neuron").manual_seed(3)
    with pytest.raises(RuntimeError, match="offset must be a multiple of 4"):
        g.set_offset(6)
    bad = torch.tensor([3, 6], dtype=torch.int64).view(torch.uint8)
    with pytest.raises(RuntimeError, match="offset must be a multiple of 4"):
        g.set_state(bad)
    assert seed_and_offset(g.get_state()) == (3, 0)  # a refused state changes nothing
