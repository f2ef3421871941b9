"""Framing of the protocol (stream) and control (seqpacket) sockets."""

from __future__ import annotations

import math
import os
import socket
import struct
import threading

import pytest

from kforge_worker.core.protocol import (
    MAX_FRAME_BYTES,
    ProtocolError,
    StreamChannel,
    encode_frame,
    json_safe,
    recv_control,
    send_control,
)


def test_frame_is_big_endian_length_then_json():
    frame = encode_frame({"type": "ready", "pid": 7})
    (length,) = struct.unpack(">I", frame[:4])
    assert length == len(frame) - 4
    assert frame[4:] == b'{"type":"ready","pid":7}'


def test_stream_round_trip_including_large_and_split_messages():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = StreamChannel(a), StreamChannel(b)
    big = {"type": "progress", "blob": "x" * (3 << 20)}
    thread = threading.Thread(target=lambda: [sender.send(big), sender.send({"type": "n"})])
    thread.start()
    assert receiver.recv() == big
    assert receiver.recv() == {"type": "n"}
    thread.join()
    a.close()
    assert receiver.recv() is None  # clean EOF between frames


def test_eof_inside_a_frame_is_an_error():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(struct.pack(">I", 100) + b'{"type"')
    a.close()
    with pytest.raises(ProtocolError, match="inside a frame"):
        StreamChannel(b).recv()


@pytest.mark.parametrize("length", [0, MAX_FRAME_BYTES + 1])
def test_bad_length_is_rejected(length):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(struct.pack(">I", length))
    with pytest.raises(ProtocolError, match="bad frame length"):
        StreamChannel(b).recv()


@pytest.mark.parametrize("body", [b"not json", b"[1, 2]", b"\xff\xfe"])
def test_bad_json_is_rejected(body):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError):
        StreamChannel(b).recv()


def test_non_finite_floats_become_strings():
    value = {"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": (2,)}
    assert json_safe(value) == {"a": "NaN", "b": ["Infinity", "-Infinity", 1.5], "c": [2]}
    frame = encode_frame({"type": "result", "x": math.inf})
    assert b'"Infinity"' in frame


def test_control_datagrams_carry_descriptors():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    send_control(a, {"type": "fork", "child_id": 4}, [w])
    os.close(w)
    message, fds = recv_control(b)
    assert message == {"type": "fork", "child_id": 4}
    assert len(fds) == 1
    os.write(fds[0], b"hi")  # the received descriptor is the pipe's write end
    os.close(fds[0])
    assert os.read(r, 2) == b"hi"
    os.close(r)
    send_control(a, {"type": "shutdown"})
    assert recv_control(b) == ({"type": "shutdown"}, [])
    a.close()
    assert recv_control(b) == (None, [])


def test_oversized_control_message_is_refused():
    a, _ = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with pytest.raises(ProtocolError, match="exceeds"):
        send_control(a, {"type": "x", "blob": "y" * (70 << 10)})


def test_a_candidate_that_fails_tells_the_judge_why(monkeypatch):
    import socket

    import torch

    from kforge_worker.candidate import server as candidate
    from kforge_worker.core.devinfo import parse_device
    from kforge_worker.core.protocol import StreamChannel
    from kforge_worker.judge import link

    def fail(self):
        raise torch.OutOfMemoryError("out of device memory receiving tensors[0] (8 bytes)")

    monkeypatch.setattr(candidate.Candidate, "serve", fail)
    monkeypatch.setattr(candidate, "install_launch_counter", lambda: None)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        assert candidate.serve(StreamChannel(theirs), parse_device("cpu"), 1 << 20) == 70
        reply = StreamChannel(ours).recv()
    assert reply["type"] == "fatal" and reply["error"].startswith("OutOfMemoryError: out of")
    # The judge's error names it instead of "expected 'called', got 'fatal'".
    assert str(link._unexpected(reply, "called")).startswith("it failed: OutOfMemoryError")
    assert str(link._unexpected({"type": "x"}, "called")) == "expected 'called', got 'x'"
