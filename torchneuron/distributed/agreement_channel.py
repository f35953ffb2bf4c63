"""Direct sockets between the ranks of a group, carrying the agreement check's fingerprints
(agreement.py); gloo still moves every byte of the collectives' data.

Why not gloo for the fingerprints too: a ~200-byte all_gather through ProcessGroupGloo costs
0.26-0.6 ms on the 2-core machine (the call hops from the caller to gloo's worker thread and its
I/O loop and back, on each rank), a quarter of a 1 MiB all_reduce; writing the fingerprint to each
peer and reading theirs costs one network round trip (~0.1 ms). The channel is set up once per
group, at its first checked collective, over gloo itself (addresses exchanged by one all_gather,
success agreed by another), so every rank of a group makes the same choice: where it cannot be
set up (an address that does not route, a refused connection), the group exchanges over gloo
(GlooExchange): the same exchange(), one small all_gather.
"""

from __future__ import annotations

import socket
import threading

import torch
import torch.distributed as dist

_CPU = torch.device("cpu")
_ADDRESS_BYTES = 64  # "host port" of a rank's listener, NUL-padded, in the set-up all_gather
_RANK_BYTES = 8
# A listener that does not answer within this is taken as unreachable (the check then uses gloo),
# rather than holding the first collective for the whole group timeout.
_CONNECT_TIMEOUT_S = 10.0
# A group whose backend torchneuron did not make (a gloo group used for neuron tensors): c10d's
# default timeout.
_DEFAULT_TIMEOUT_S = 30 * 60.0

# Per group name: the address this process listens on and the group's timeout (from backend.py,
# when gloo is created for the group), and the exchange once made. Recreating a group of the same
# name (destroy, init) replaces them.
_group_settings: dict[str, tuple[str, float]] = {}
_channels: dict[str, "Channel | GlooExchange"] = {}
_lock = threading.Lock()


def local_address_for(store) -> str:
    """The address of this host's interface that routes to the rendezvous store's host: peers
    reach the store there, so they reach us there too. A file:// store has no host: the hostname's
    address, as gloo's default device takes."""
    while hasattr(store, "underlying_store"):
        store = store.underlying_store
    host = getattr(store, "host", None)
    try:
        if host:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            with socket.socket(family, socket.SOCK_DGRAM) as probe:
                probe.connect((host, 9))  # UDP connect sends nothing; it only picks the route
                return probe.getsockname()[0]
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def group_created(group_name: str, store, timeout_s: float) -> None:
    """Called when the backend of a group is made: remembers where to listen, forgets (closes)
    the channel of an earlier group of the same name."""
    with _lock:
        old = _channels.pop(group_name, None)
        _group_settings[group_name] = local_address_for(store), timeout_s
    if old is not None:
        old.close()


class ChannelError(RuntimeError):
    """An exchange that could not complete: `missing` are the group ranks whose message did not
    come within the timeout, `gone` those whose connection closed (both empty when the channel
    had failed before)."""

    def __init__(self, message: str, missing: list[int] = (), gone: list[int] = ()) -> None:
        super().__init__(message)
        self.missing, self.gone = list(missing), list(gone)


class Channel:
    """One connected TCP socket per peer; exchange() sends this rank's message to every peer and
    reads every peer's. Messages have one fixed size per group, so no framing is needed, and a
    message that small never blocks in send, so sending to all before reading from any cannot
    deadlock."""

    def __init__(self, group_name: str, rank: int, world: int, timeout_s: float,
                 peers: dict[int, socket.socket]) -> None:
        self.group_name, self.rank, self.world = group_name, rank, world
        self.timeout_s = timeout_s
        self.peers = peers
        self.broken: str | None = None
        self._lock = threading.Lock()

    def exchange(self, message: bytes, what: str) -> bytearray:
        """Every rank's message, in rank order. Raises (and stays broken: the peers' streams are
        no longer in step) when a peer closes its end or does not answer within the group's
        timeout, in gloo's words for the same events."""
        n = len(message)
        out = bytearray(n * self.world)
        out[self.rank * n:(self.rank + 1) * n] = message
        with self._lock:
            if self.broken is not None:
                raise ChannelError(f"{what}: the group's agreement channel failed earlier "
                                   f"({self.broken}); make a new group")
            peer = -1
            order = list(self.peers)

            def unread(failed: int) -> list[int]:
                return order[order.index(failed):] if failed in order else order

            try:
                for peer, sock in self.peers.items():
                    sock.sendall(message)
                view = memoryview(out)
                for peer, sock in self.peers.items():
                    got, end = peer * n, (peer + 1) * n
                    while got < end:
                        read = sock.recv_into(view[got:end])
                        if read == 0:
                            raise ConnectionResetError("Connection closed by peer")
                        got += read
            except socket.timeout:
                missing, gone = self._sweep(unread(peer))
                self.broken = (f"Timed out waiting {int(self.timeout_s * 1000)}ms for rank "
                               f"{peer} of group '{self.group_name}'")
                raise ChannelError(f"{what}: {self.broken}", missing, gone) from None
            except OSError as e:
                # A peer's process that ended shows as a reset or end of stream when this rank
                # reads, and as EPIPE when it writes first: the same cause, in gloo's words.
                closed = isinstance(e, (ConnectionResetError, BrokenPipeError))
                reason = "Connection closed by peer" if closed else str(e)
                missing, gone = self._sweep(unread(peer))
                self.broken = f"{reason} (rank {peer} of group '{self.group_name}')"
                raise ChannelError(f"{what}: {self.broken}", missing, gone) from None
        return out

    def _sweep(self, unread: list[int]) -> tuple[list[int], list[int]]:
        """After a failed exchange: which of the peers not yet read sent nothing (looked at
        without waiting: their bytes would be in the socket by now), and which closed their
        end (their process ended)."""
        missing, gone = [], []
        for peer in unread:
            sock = self.peers[peer]
            try:
                sock.setblocking(False)
                if sock.recv(1, socket.MSG_PEEK) == b"":
                    gone.append(peer)
            except BlockingIOError:
                missing.append(peer)
            except OSError:
                gone.append(peer)
            finally:
                try:
                    sock.settimeout(self.timeout_s)
                except OSError:
                    pass
        return missing, gone

    def gone_peers(self) -> list[int]:
        """The peers whose connection closed, checked without waiting (for a collective that
        failed inside gloo)."""
        return self._sweep(list(self.peers))[1]

    def close(self) -> None:
        for sock in self.peers.values():
            sock.close()


# internal: see runtime/torch_internals.py "ProcessGroupGloo private collectives"
def _all_gather(backend, mine: bytes, world: int) -> bytes:
    """Every rank's bytes (all of one length), in rank order, over the group's gloo backend."""
    gathered = torch.empty(world * len(mine), dtype=torch.uint8)
    backend._allgather_base(gathered, torch.frombuffer(bytearray(mine), dtype=torch.uint8)).wait()
    return gathered.numpy().tobytes()


def _all_gather_bytes(backend, mine: bytes, world: int) -> list[bytes]:
    n, data = len(mine), _all_gather(backend, mine, world)
    return [data[r * n:(r + 1) * n] for r in range(world)]


class GlooExchange:
    """Channel's exchange() over gloo, for a group whose ranks could not all be connected."""

    def __init__(self, backend, world: int) -> None:
        self.backend, self.world = backend, world

    def exchange(self, message: bytes, what: str) -> bytes:
        return _all_gather(self.backend, message, self.world)

    def close(self) -> None:
        pass


def _all_agree(backend, ok: bool, world: int) -> bool:
    return all(b == b"\x01" for b in _all_gather_bytes(backend, b"\x01" if ok else b"\x00", world))


def _connect(group: dist.ProcessGroup, backend) -> Channel | GlooExchange:
    """Collective over the group (every rank calls it at the same collective): rank r connects
    to each lower rank's listener and accepts each higher rank's connection."""
    rank, world, name = group.rank(), group.size(), group.group_name
    peers: dict[int, socket.socket] = {}
    listener = None
    ok = True
    try:
        host, timeout_s = _group_settings.get(name, ("127.0.0.1", _DEFAULT_TIMEOUT_S))
        listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        listener.bind((host, 0))
        listener.listen(world)
        listener.settimeout(timeout_s)
        mine = f"{host} {listener.getsockname()[1]}".encode()
    except OSError:
        ok, mine = False, b""
    addresses = _all_gather_bytes(backend, mine.ljust(_ADDRESS_BYTES, b"\0"), world)
    ok = _all_agree(backend, ok, world)
    if ok:
        try:
            for peer in range(rank):
                peer_host, peer_port = addresses[peer].rstrip(b"\0").decode().split()
                sock = socket.create_connection((peer_host, int(peer_port)),
                                                timeout=min(timeout_s, _CONNECT_TIMEOUT_S))
                sock.sendall(rank.to_bytes(_RANK_BYTES, "little"))
                peers[peer] = sock
        except OSError:
            ok = False
    # Accept only once every rank connected: a failed connect would leave its peer waiting.
    if _all_agree(backend, ok, world):
        try:
            for _ in range(rank + 1, world):
                sock, _ = listener.accept()
                sock.settimeout(timeout_s)
                peer = int.from_bytes(sock.recv(_RANK_BYTES, socket.MSG_WAITALL), "little")
                peers[peer] = sock
        except OSError:
            ok = False
    else:
        ok = False
    if listener is not None:
        listener.close()
    if not _all_agree(backend, ok, world):
        for sock in peers.values():
            sock.close()
        return GlooExchange(backend, world)
    for sock in peers.values():
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(timeout_s)
    return Channel(name, rank, world, timeout_s, dict(sorted(peers.items())))


def channel_for(group: dist.ProcessGroup) -> Channel | GlooExchange:
    """The group's exchange, made at its first use (a collective call: all ranks arrive here
    together): sockets, or gloo where they could not be connected on every rank."""
    name = group.group_name
    try:
        return _channels[name]
    except KeyError:
        pass
    # internal: see runtime/torch_internals.py "ProcessGroup private backend table"
    channel = _connect(group, group._get_backend(_CPU))
    with _lock:
        _channels[name] = channel
    return channel
