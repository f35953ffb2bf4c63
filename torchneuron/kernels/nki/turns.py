"""Turn-taking between the threads of a multi-program run: the cores of one `kernel[n]` launch
(cores.py) and the ranks of nki.multi_rank_simulate (ranks.py). Each program runs on its own
thread, but only one runs at a time and the order is fixed: program 0 until it returns or waits
(at a barrier, a collective), then the next ready one. So results never depend on the host's
scheduling, and a wait that can never end is found and refused instead of hanging."""

from __future__ import annotations

import threading


class Aborted(BaseException):
    """Ends a program whose sibling failed (never seen by the caller)."""


class TurnTaking:
    thread_name = "nki-program"

    def __init__(self, count: int):
        self.count = count
        self.cond = threading.Condition()
        self.turn = 0
        self.state = ["ready"] * count  # ready, waiting or done
        self.error: BaseException | None = None
        self.failed: int | None = None  # the program whose error is kept

    def run(self, bodies) -> None:
        """Runs bodies[i]() as program i, in turns; re-raises the first failure."""
        threads = [threading.Thread(target=self._program, args=(i, body), daemon=True,
                                    name=f"{self.thread_name}-{i}")
                   for i, body in enumerate(bodies)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if self.error is not None:
            raise self.error

    def _program(self, me: int, body) -> None:
        try:
            self._wait_turn(me)
            body()
            self._finish(me)
        except Aborted:
            pass
        except BaseException as error:  # noqa: BLE001 - handed to the launching thread
            self._fail(me, error)

    def _fail(self, me: int, error: BaseException) -> None:
        with self.cond:
            if self.error is None:
                self.error, self.failed = error, me
            self.cond.notify_all()

    def _wait_turn(self, me: int) -> None:
        with self.cond:
            while (self.turn != me or self.state[me] == "waiting") and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise Aborted

    def _pass_turn(self, me: int) -> bool:
        """Hands the turn to the next ready program (under self.cond); False when none is."""
        for step in range(1, self.count + 1):
            other = (me + step) % self.count
            if self.state[other] == "ready":
                self.turn = other
                self.cond.notify_all()
                return True
        return False

    def _finish(self, me: int) -> None:
        """Program `me` returned: check what waits on it, then pass the turn (under self.cond)."""
        raise NotImplementedError
