"""Neuron tensors shared between processes (torchneuron/device/ipc.py,
csrc/device/SharedStorage.*): the receiver aliases the sender's device memory, which is freed when
every process has let go and counts in the sender's statistics only. Spawned processes only (the
start method docs/semantics.md asks for sharing); every result is compared with the CPU's."""

import os
import signal

import pytest
import torch
import torch.multiprocessing as mp
from torch.testing import assert_close

import torchneuron
from torchneuron._C import device as _device_c

pytestmark = pytest.mark.ipc  # every test here shares neuron tensors (see tests/conftest.py)
CTX = mp.get_context("spawn")
TIMEOUT = 120


def _consumer(inbox, outbox):
    t = inbox.get(timeout=TIMEOUT)
    outbox.put((t.device.type, t.cpu(), torch.neuron.memory_allocated()))
    t.mul_(10)  # seen by the producer: the same memory
    outbox.put("written")
    inbox.get(timeout=TIMEOUT)  # hold the tensor until the producer has looked


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_queue_shares_neuron_memory_both_ways_and_frees_it_after_both_let_go(start_method):
    ctx = mp.get_context(start_method)
    torch.neuron.empty_cache()
    baseline = torch.neuron.memory_allocated()
    x = torch.arange(6.0).reshape(2, 3).to("neuron")
    inbox, outbox = ctx.Queue(), ctx.Queue()
    p = ctx.Process(target=_consumer, args=(inbox, outbox))
    p.start()
    inbox.put(x)
    device, seen, consumer_allocated = outbox.get(timeout=TIMEOUT)
    assert device == "neuron"
    assert_close(seen, torch.arange(6.0).reshape(2, 3))
    assert consumer_allocated == 0  # counted in the owner's statistics only
    assert outbox.get(timeout=TIMEOUT) == "written"
    assert_close(x.cpu(), torch.arange(6.0).reshape(2, 3) * 10)
    assert _device_c.is_shared_storage(x)
    assert torch.neuron.memory_allocated() == baseline + x.nbytes  # counted once, here
    x.add_(1)
    inbox.put(None)
    p.join(TIMEOUT)
    assert p.exitcode == 0
    del x
    assert torch.neuron.memory_allocated() == baseline


def _dies_holding(inbox, conn):
    t = inbox.get(timeout=TIMEOUT)
    conn.send(t.sum().item())  # a pipe writes at once (a queue's feeder thread would not)
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_consumer_killed_while_holding_a_tensor_leaks_nothing_in_the_survivor():
    torch.neuron.empty_cache()
    baseline = torch.neuron.memory_allocated()
    x = torch.full((1024,), 2.0, device="neuron")
    inbox = CTX.Queue()
    receiver, sender = CTX.Pipe(duplex=False)
    p = CTX.Process(target=_dies_holding, args=(inbox, sender))
    p.start()
    inbox.put(x)
    assert receiver.poll(TIMEOUT)
    assert receiver.recv() == 2048.0
    p.join(TIMEOUT)
    assert p.exitcode == -signal.SIGKILL
    assert_close(x.cpu(), torch.full((1024,), 2.0))  # the survivor's tensor is intact
    del x  # the kernel dropped the dead receiver's hold: the sender frees at once
    assert torch.neuron.memory_allocated() == baseline


def _hogwild_worker(model, data, target):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(data[step].to("neuron")),
                                     target[step].to("neuron")).backward()
        opt.step()


def test_hogwild_share_memory_training_matches_the_same_updates_on_cpu():
    torch.manual_seed(0)
    reference = torch.nn.Linear(4, 2)
    model = torch.nn.Linear(4, 2)
    model.load_state_dict(reference.state_dict())
    model.to("neuron").share_memory()
    batches = [(torch.randn(3, 8, 4), torch.randn(3, 8, 2)) for _ in range(2)]
    # The two workers run one after the other, so that their updates are the CPU's sequence.
    for data, target in batches:
        p = CTX.Process(target=_hogwild_worker, args=(model, data, target))
        p.start()
        p.join(TIMEOUT)
        assert p.exitcode == 0
    opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for data, target in batches:
        for step in range(3):
            opt.zero_grad()
            torch.nn.functional.mse_loss(reference(data[step]), target[step]).backward()
            opt.step()
    assert_close(model.weight.detach().cpu(), reference.weight.detach())
    assert_close(model.bias.detach().cpu(), reference.bias.detach())


class _NeuronDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.full((2,), float(i), device="neuron")


def test_spawn_dataloader_workers_return_neuron_tensors():
    loader = torch.utils.data.DataLoader(_NeuronDataset(), num_workers=1, batch_size=2,
                                         multiprocessing_context="spawn", timeout=TIMEOUT)
    batches = list(loader)
    assert [b.device.type for b in batches] == ["neuron", "neuron"]
    expected = [torch.tensor([[0.0, 0.0], [1.0, 1.0]]), torch.tensor([[2.0, 2.0], [3.0, 3.0]])]
    for got, want in zip(batches, expected):
        assert_close(got.cpu(), want)


def test_sharing_twice_moves_the_memory_once():
    x = torch.ones(8, device="neuron")
    y = x[2:]  # a view: one storage, one shared block
    first = torchneuron.device.ipc.share(x.untyped_storage())
    assert torchneuron.device.ipc.share(y.untyped_storage()) == first
    assert torchneuron.device.ipc.is_shared(y.untyped_storage())
    y.fill_(3)
    assert_close(x.cpu(), torch.tensor([1.0, 1.0] + [3.0] * 6))


def test_a_shared_storage_cannot_be_resized():
    # As PyTorch's docs say of storages in shared memory (its CPU version crashes on 2.13.0
    # instead of raising, so there is nothing to compare with).
    x = torch.ones(4, device="neuron")
    torchneuron.device.ipc.share(x.untyped_storage())
    with pytest.raises(RuntimeError, match="not resizable"):
        x.untyped_storage().resize_(64)
    assert_close(x.cpu(), torch.ones(4))


def _receive_two(inbox, conn):
    a, b = inbox.get(timeout=TIMEOUT), inbox.get(timeout=TIMEOUT)
    # Values as a list: a CPU tensor would travel by descriptor through this process's resource
    # sharer, gone once it exits.
    conn.send((a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr(),
               b.storage_offset(), b.cpu().tolist()))


def test_views_of_one_storage_arrive_over_one_storage():
    x = torch.arange(8.0, device="neuron")
    inbox = CTX.Queue()
    receiver, sender = CTX.Pipe(duplex=False)
    p = CTX.Process(target=_receive_two, args=(inbox, sender))
    p.start()
    inbox.put(x)
    inbox.put(x[3:])
    assert receiver.poll(TIMEOUT)
    same_storage, offset, values = receiver.recv()
    p.join(TIMEOUT)
    assert same_storage and offset == 3
    assert_close(torch.tensor(values), torch.arange(3.0, 8.0))


def _hold_until_told(inbox, outbox):
    t = inbox.get(timeout=TIMEOUT)
    outbox.put(t.sum().item())
    inbox.get(timeout=TIMEOUT)  # the producer has dropped its tensor by now
    outbox.put(t.sum().item())  # the memory is still there for this process
    del t
    outbox.put("released")
    inbox.get(timeout=TIMEOUT)


def test_memory_the_sender_dropped_stays_counted_there_until_the_receiver_lets_go():
    torch.neuron.empty_cache()
    baseline = torch.neuron.memory_allocated()
    x = torch.full((4096,), 3.0, device="neuron")
    nbytes = x.nbytes
    inbox, outbox = CTX.Queue(), CTX.Queue()
    p = CTX.Process(target=_hold_until_told, args=(inbox, outbox))
    p.start()
    inbox.put(x)
    assert outbox.get(timeout=TIMEOUT) == 3.0 * 4096
    del x
    torch.neuron.ipc_collect()
    # As CUDA keeps a sent block in the sender's allocator: the receiver still maps it.
    assert torch.neuron.memory_allocated() == baseline + nbytes
    inbox.put("dropped")
    assert outbox.get(timeout=TIMEOUT) == 3.0 * 4096
    assert outbox.get(timeout=TIMEOUT) == "released"
    torch.neuron.ipc_collect()
    assert torch.neuron.memory_allocated() == baseline
    inbox.put(None)
    p.join(TIMEOUT)
    assert p.exitcode == 0
