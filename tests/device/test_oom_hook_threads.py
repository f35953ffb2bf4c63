"""The out-of-memory hook against other threads: the hook runs Python (the memory advisor) and
takes the GIL, so the allocator calls it only after releasing its lock, and the bindings that
take that lock release the GIL first. A thread that reads the allocator's blocks, or frees a
tensor from Python (which holds the GIL), while another runs out of memory must never
deadlock; the script runs in its own interpreter with a timeout, so a deadlock fails the test
instead of hanging the suite."""

import subprocess
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import threading, torch
    stop = threading.Event()
    reads = []
    def reader():
        while not stop.is_set():
            blocks = torch.neuron.memory_snapshot()    # takes the allocator's lock
            x = torch.ones(256, device="neuron")
            del x                                      # a free with the GIL held: the lock too
            reads.append(len(blocks))
    thread = threading.Thread(target=reader)
    thread.start()
    messages = []
    try:
        for _ in range(20):
            try:
                torch.empty(64 << 20, dtype=torch.uint8, device="neuron")
            except torch.OutOfMemoryError as e:
                messages.append(str(e))
    finally:
        stop.set()
        thread.join()
    assert len(messages) == 20 and all("In use when it failed" in m for m in messages)
    assert torch.equal(torch.ones(3, device="neuron").cpu(), torch.ones(3))
    print("reads", len(reads))
""")


def test_an_out_of_memory_beside_a_thread_using_the_allocator_never_deadlocks(python):
    try:
        out = python(SCRIPT, env={"NEURON_HBM_BYTES": "32MiB"}, timeout=90)
    except subprocess.TimeoutExpired:
        pytest.fail("deadlock: an out-of-memory beside a thread reading memory_snapshot hung")
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) > 0, out.stdout
