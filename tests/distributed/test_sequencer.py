"""The per-group sequencing thread (torchneuron/distributed/sequencer.py) in one process: call
order, errors handed to the right caller, and a thread that survives every error."""

import threading

import pytest
import torch
import torch.distributed as dist

from torchneuron.distributed.sequencer import Sequencer, deferred


def test_jobs_start_in_submission_order_and_sync_calls_wait_their_turn():
    seq = Sequencer("order")
    gate, order = threading.Event(), []
    seq.start_later(lambda: (gate.wait(5), order.append("first")), lambda r: None,
                    lambda e: None)
    seq.start_later(lambda: order.append("second"), lambda r: None, lambda e: None)
    assert seq.busy()
    threading.Timer(0.05, gate.set).start()
    assert seq.start_in_turn(lambda: order.append("third") or 42) == 42
    assert order == ["first", "second", "third"]
    assert not seq.busy()


def test_an_error_reaches_its_caller_and_the_thread_goes_on():
    seq = Sequencer("errors")
    with pytest.raises(ValueError, match="ranks disagree"):
        seq.start_in_turn(lambda: (_ for _ in ()).throw(ValueError("ranks disagree")))
    failures = []
    finished = threading.Event()
    # A done() that raises is reported through failed(); the next job still runs.
    seq.start_later(lambda: 1, lambda r: 1 / 0, lambda e: failures.append(type(e)))
    seq.start_later(lambda: 2, lambda r: finished.set(), lambda e: None)
    assert finished.wait(5)
    assert failures == [ZeroDivisionError]
    assert seq.start_in_turn(lambda: "alive") == "alive"


def test_deferred_work_completes_with_the_started_work_or_fails_with_the_error():
    seq = Sequencer("works")
    started = torch.futures.Future()
    ok = dist.Work.unbox(deferred(seq, lambda: torch._C._distributed_c10d._create_work_from_future(
        started).boxed()))
    started.set_result([torch.ones(2)])
    ok.wait()
    torch.testing.assert_close(ok.get_future().value()[0], torch.ones(2))

    def disagree():
        raise RuntimeError("neuron backend: mismatched collective c10d::allreduce_")
    bad = dist.Work.unbox(deferred(seq, disagree))
    with pytest.raises(RuntimeError, match="mismatched collective c10d::allreduce_"):
        bad.wait()
    assert bad.is_completed()
