"""Message framing for the supervisor <-> worker sockets (docs/worker-protocol.md).

Protocol socket (SOCK_STREAM): a 4-byte big-endian length n (1 <= n <= 256 MiB), then n
bytes of UTF-8 JSON holding one object. Control socket (SOCK_SEQPACKET): one JSON object
per datagram (at most 64 KiB), file descriptors as SCM_RIGHTS ancillary data.

JSON has no NaN or infinity: non-finite floats are sent as the strings "NaN",
"Infinity" and "-Infinity".
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import struct
from collections.abc import Sequence
from typing import Any

MAX_FRAME_BYTES = 256 << 20
MAX_CONTROL_BYTES = 64 << 10
MAX_CONTROL_FDS = 8
_HEADER = struct.Struct(">I")


class ProtocolError(Exception):
    """The peer sent something that is not a valid message; the connection is unusable."""


def json_safe(value: Any) -> Any:
    """Returns `value` with non-finite floats replaced by their string names."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def encode_json(message: dict[str, Any]) -> bytes:
    return json.dumps(json_safe(message), allow_nan=False, separators=(",", ":")).encode()


def decode_json(data: bytes) -> dict[str, Any]:
    try:
        message = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ProtocolError(f"bad JSON: {e}") from e
    if not isinstance(message, dict):
        raise ProtocolError(f"a message must be a JSON object, got {type(message).__name__}")
    return message


def encode_frame(message: dict[str, Any]) -> bytes:
    """One length-prefixed frame for the stream socket."""
    body = encode_json(message)
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"message of {len(body)} bytes exceeds {MAX_FRAME_BYTES}")
    return _HEADER.pack(len(body)) + body


class StreamChannel:
    """Length-prefixed JSON messages over a connected SOCK_STREAM socket (blocking)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    @property
    def socket(self) -> socket.socket:
        """The underlying socket (raw tensor bytes follow some frames, see wire.py)."""
        return self._sock

    def send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(encode_frame(message))

    def recv(self) -> dict[str, Any] | None:
        """The next message, or None on a clean EOF between messages."""
        header = self._read_exact(_HEADER.size, eof_ok=True)
        if header is None:
            return None
        (length,) = _HEADER.unpack(header)
        if length < 1 or length > MAX_FRAME_BYTES:
            raise ProtocolError(f"bad frame length {length}")
        body = self._read_exact(length, eof_ok=False)
        assert body is not None
        return decode_json(body)

    def close(self) -> None:
        self._sock.close()

    def _read_exact(self, n: int, *, eof_ok: bool) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                if eof_ok and not buf:
                    return None
                raise ProtocolError(f"connection closed inside a frame ({len(buf)} of {n} bytes)")
            buf += chunk
        return bytes(buf)


def send_control(sock: socket.socket, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
    """Sends one datagram on the SOCK_SEQPACKET control socket."""
    data = encode_json(message)
    if len(data) > MAX_CONTROL_BYTES:
        raise ProtocolError(f"control message of {len(data)} bytes exceeds {MAX_CONTROL_BYTES}")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def recv_control(sock: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """Receives one datagram: (message, received fds); (None, []) at EOF.

    Received descriptors belong to the caller, even when the message is bad.
    """
    data, fds, flags, _ = socket.recv_fds(sock, MAX_CONTROL_BYTES, MAX_CONTROL_FDS)
    if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
        for fd in fds:
            _close_quietly(fd)
        raise ProtocolError("control message truncated (too large or too many descriptors)")
    if not data and not fds:
        return None, []
    try:
        return decode_json(data), list(fds)
    except ProtocolError:
        for fd in fds:
            _close_quietly(fd)
        raise


def _close_quietly(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)
