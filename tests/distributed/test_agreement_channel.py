"""The agreement channel's words for a lost peer (torchneuron/distributed/agreement_channel.py):
a peer whose process ended reads as an end of stream or a reset, and writes as EPIPE, depending on
which the rank did first; all three are the same cause and must read the same, in gloo's words,
since forensics.breaks_group() and users' handlers match on them."""

import socket

import pytest

from torchneuron.distributed import forensics
from torchneuron.distributed.agreement_channel import Channel, ChannelError


def _channel_with_closed_peer(*, shut: bool) -> Channel:
    mine, theirs = socket.socketpair()
    if shut:
        theirs.shutdown(socket.SHUT_RDWR)
    theirs.close()
    mine.settimeout(5.0)
    return Channel("g", rank=0, world=2, timeout_s=5.0, peers={1: mine})


@pytest.mark.parametrize("shut", [False, True])
def test_a_closed_peer_reads_as_connection_closed_whatever_the_socket_said(shut):
    channel = _channel_with_closed_peer(shut=shut)
    try:
        with pytest.raises(ChannelError) as caught:
            channel.exchange(b"x" * 16, "all_reduce")
        message = str(caught.value)
        assert "Connection closed by peer (rank 1 of group 'g')" in message, message
        assert "Broken pipe" not in message
        assert caught.value.gone == [1] and caught.value.missing == []
        assert forensics.breaks_group(caught.value)
        # Broken for good: the next exchange says so at once, naming the first cause.
        with pytest.raises(ChannelError, match="failed earlier .Connection closed by peer"):
            channel.exchange(b"x" * 16, "all_reduce")
    finally:
        channel.close()


def test_a_write_to_a_closed_peer_is_epipe_underneath():
    """The case the wording covers: sending to a peer that is gone raises BrokenPipeError."""
    mine, theirs = socket.socketpair()
    theirs.close()
    with pytest.raises(BrokenPipeError):
        mine.sendall(b"x" * 16)
    mine.close()
