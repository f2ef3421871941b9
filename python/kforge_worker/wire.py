"""Values across the judge <-> candidate socket (docs/worker-protocol.md "Candidate protocol").

A message is one JSON frame (protocol.StreamChannel) whose `values` use the encoding below,
followed by the raw bytes of every tensor it references, in order, with no framing of their
own: the header says how many bytes each one has.

    tensor           {"$t": i}             i indexes header["tensors"]: {"dtype","shape","nbytes"}
    list / tuple     {"$list": [...]} / {"$tuple": [...]}
    dict (str keys)  {"$dict": {...}}
    finite float, int, bool, str, None      {"$v": value}
    non-finite float {"$f": "nan" | "inf" | "-inf"}
    anything else    {"$other": "<type name>"} (decodes to an Unsupported marker)

Tensors travel as the contiguous little-endian bytes of a host copy; the receiver checks that
the declared size matches dtype x shape and stays under its byte budget before it reads a
single byte, so a peer cannot make it allocate what it did not agree to.
"""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass
from typing import Any

import torch

from kforge_worker.protocol import ProtocolError, StreamChannel

DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bool": torch.bool,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
_NAMES = {v: k for k, v in DTYPES.items()}
_CHUNK = 1 << 24


@dataclass(frozen=True)
class Unsupported:
    """A value the peer could not encode (its type name)."""

    type_name: str


def dtype_name(dtype: torch.dtype) -> str:
    return _NAMES.get(dtype, str(dtype).removeprefix("torch."))


def encode(value: Any, tensors: list[torch.Tensor]) -> Any:
    """The JSON form of `value`; tensors are appended to `tensors` and referenced by index."""
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"$t": len(tensors) - 1}
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return {"$v": value}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"$v": value}
        return {"$f": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return {"$list": [encode(v, tensors) for v in value]}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v, tensors) for v in value]}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"$dict": {k: encode(v, tensors) for k, v in value.items()}}
    return {"$other": type(value).__qualname__}


def decode(obj: Any, tensors: list[torch.Tensor], depth: int = 0) -> Any:
    """Inverse of encode(). Raises ProtocolError on a malformed value."""
    if depth > 64 or not isinstance(obj, dict) or len(obj) != 1:
        raise ProtocolError("malformed encoded value")
    ((tag, body),) = obj.items()
    if tag == "$t":
        if not isinstance(body, int) or not 0 <= body < len(tensors):
            raise ProtocolError(f"tensor reference {body!r} out of range")
        return tensors[body]
    if tag == "$v":
        return body
    if tag == "$f":
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}.get(body, math.nan)
    if tag in ("$list", "$tuple"):
        if not isinstance(body, list):
            raise ProtocolError("malformed list")
        items = [decode(v, tensors, depth + 1) for v in body]
        return items if tag == "$list" else tuple(items)
    if tag == "$dict":
        if not isinstance(body, dict):
            raise ProtocolError("malformed dict")
        return {str(k): decode(v, tensors, depth + 1) for k, v in body.items()}
    if tag == "$other":
        return Unsupported(str(body))
    raise ProtocolError(f"unknown value tag {tag!r}")


def _host_bytes(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1)
    if flat.device.type != "cpu":
        flat = flat.cpu()
    return flat.contiguous().view(torch.uint8)


def send(channel: StreamChannel, header: dict[str, Any], values: Any = None) -> None:
    """Sends `header` with `values` encoded under header["values"], then the tensor bytes."""
    tensors: list[torch.Tensor] = []
    message = dict(header)
    message["values"] = encode(values, tensors)
    host = [_host_bytes(t) for t in tensors]
    message["tensors"] = [
        {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "nbytes": int(h.numel())}
        for t, h in zip(tensors, host, strict=True)
    ]
    channel.send(message)
    sock = channel.socket
    for h in host:
        if h.numel():
            sock.sendall(memoryview(h.numpy()))


def receive(
    channel: StreamChannel, device: torch.device, budget_bytes: int
) -> tuple[dict[str, Any], Any]:
    """The next message and its decoded values (tensors placed on `device`). Raises
    ProtocolError when the peer hung up, declared a tensor inconsistently or over budget."""
    message = channel.recv()
    if message is None:
        raise ProtocolError("the peer closed the connection")
    specs = message.get("tensors") or []
    if not isinstance(specs, list):
        raise ProtocolError("'tensors' must be a list")
    total = 0
    parsed: list[tuple[torch.dtype, list[int], int]] = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise ProtocolError(f"tensors[{i}] must be an object")
        dtype = DTYPES.get(str(spec.get("dtype")))
        shape = spec.get("shape")
        nbytes = spec.get("nbytes")
        if dtype is None or not isinstance(shape, list) or not isinstance(nbytes, int):
            raise ProtocolError(f"tensors[{i}] is malformed")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolError(f"tensors[{i}].shape is malformed")
        if nbytes != math.prod(shape) * torch.empty((), dtype=dtype).element_size():
            raise ProtocolError(f"tensors[{i}] declares {nbytes} bytes for its shape and dtype")
        total += nbytes
        if total > budget_bytes:
            raise ProtocolError(f"the peer sent more than {budget_bytes} bytes of tensors")
        parsed.append((dtype, shape, nbytes))
    sock = channel.socket
    tensors = []
    for dtype, shape, nbytes in parsed:
        raw = torch.empty(nbytes, dtype=torch.uint8)
        if nbytes:
            _recv_exact(sock, memoryview(raw.numpy()))
        value = raw.view(dtype).reshape(shape)
        tensors.append(value.to(device) if device.type != "cpu" else value)
    return message, decode(message.get("values", {"$v": None}), tensors)


def _recv_exact(sock: socket.socket, view: memoryview) -> None:
    got = 0
    while got < len(view):
        n = sock.recv_into(view[got : got + _CHUNK])
        if n == 0:
            raise ProtocolError("the peer closed the connection inside a tensor")
        got += n
