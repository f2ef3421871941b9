"""GPU memory one process can hand another as a file descriptor (CUDA's virtual memory API).

Legacy CUDA IPC handles do not work across the jail's pid namespaces; an allocation made with
`cuMemCreate(..., CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)` can be exported as a descriptor,
passed over the socketpair with SCM_RIGHTS and mapped by the peer (research/sandbox.md). wire.py
uses it for the device arena: a device tensor then crosses the socket as one device-to-device
copy on each side instead of two copies through host memory.

`Block` is one such allocation mapped into this process, as a flat uint8 torch tensor (`view`)
that aliases it: the caller copies in or out of slices of it and never lets the view escape,
so nothing refers to the memory after `close()`.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import torch

_POSIX_FD = 0x1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
_PINNED = 0x1  # CU_MEM_ALLOCATION_TYPE_PINNED
_ON_DEVICE = 0x1  # CU_MEM_LOCATION_TYPE_DEVICE
_PROT_READ, _PROT_READWRITE = 0x1, 0x3
_ATTR_VMM, _ATTR_POSIX_FD = 102, 103  # CU_DEVICE_ATTRIBUTE_*_SUPPORTED


class _Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class _AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class _AllocProp(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", _Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", _AllocFlags),
    ]


class _AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", _Location), ("flags", ctypes.c_int)]


CUDA_ERROR_OUT_OF_MEMORY = 2


class DeviceMemoryError(RuntimeError):
    """The driver refused a step (its CUresult, `code`, and the step's name in the message)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


_LIB: list[ctypes.CDLL | None] = []


def _lib() -> ctypes.CDLL | None:
    """libcuda, loaded once (torch has it loaded already wherever CUDA works); None without."""
    if not _LIB:
        try:
            _LIB.append(ctypes.CDLL("libcuda.so.1"))
        except OSError:
            _LIB.append(None)
    return _LIB[0]


def _call(name: str, *args: Any) -> None:
    lib = _lib()
    if lib is None:
        raise DeviceMemoryError("libcuda.so.1 cannot be loaded")
    result = getattr(lib, name)(*args)
    if result != 0:
        raise DeviceMemoryError(f"{name} failed with CUresult {result}", result)


def _ordinal(device: torch.device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def _prepare(device: torch.device) -> int:
    """Makes `device`'s primary context (torch's) current on this thread; its ordinal."""
    ordinal = _ordinal(device)
    torch.cuda.set_device(ordinal)
    torch.empty(0, device=device)  # torch creates and binds the primary context lazily
    return ordinal


def supported(device: torch.device) -> bool:
    """Whether `device` can export memory as a descriptor (VMM and POSIX fd handles)."""
    if device.type != "cuda" or _lib() is None:
        return False
    try:
        ordinal = _prepare(device)
        for attr in (_ATTR_VMM, _ATTR_POSIX_FD):
            value = ctypes.c_int(0)
            _call("cuDeviceGetAttribute", ctypes.byref(value), attr, ordinal)
            if not value.value:
                return False
    except (DeviceMemoryError, RuntimeError):
        return False
    return True


def _granularity(ordinal: int) -> int:
    prop = _alloc_prop(ordinal)
    size = ctypes.c_size_t(0)
    _call("cuMemGetAllocationGranularity", ctypes.byref(size), ctypes.byref(prop), 0)
    return size.value


def _alloc_prop(ordinal: int) -> _AllocProp:
    prop = _AllocProp()
    prop.type = _PINNED
    prop.requestedHandleTypes = _POSIX_FD
    prop.location = _Location(_ON_DEVICE, ordinal)
    return prop


@dataclass
class Block:
    """One exportable allocation mapped here: `view` aliases its `size` bytes."""

    size: int
    view: torch.Tensor
    _handle: int
    _ptr: int
    _closed: bool = False

    @property
    def ptr(self) -> int:
        """The device address of its first byte in this process."""
        return self._ptr

    def export(self) -> int:
        """A new descriptor for the allocation (the caller passes it on and closes it)."""
        fd = ctypes.c_int(-1)
        _call("cuMemExportToShareableHandle", ctypes.byref(fd), ctypes.c_uint64(self._handle),
              _POSIX_FD, ctypes.c_ulonglong(0))  # fmt: skip
        return fd.value

    def close(self) -> None:
        """Unmaps and releases it here (the memory lives on while a peer still maps it)."""
        if self._closed:
            return
        self._closed = True
        torch.cuda.synchronize(self.view.device)  # nothing queued may still touch it
        ptr, size = ctypes.c_uint64(self._ptr), ctypes.c_size_t(self.size)
        _call("cuMemUnmap", ptr, size)
        _call("cuMemRelease", ctypes.c_uint64(self._handle))
        _call("cuMemAddressFree", ptr, size)


def allocate(device: torch.device, nbytes: int) -> Block:
    """A new exportable allocation of at least `nbytes` on `device`, mapped read-write here."""
    ordinal = _prepare(device)
    unit = _granularity(ordinal)
    size = max(unit, -(-nbytes // unit) * unit)  # whole units of the allocation granularity
    handle = ctypes.c_uint64(0)
    prop = _alloc_prop(ordinal)
    _call("cuMemCreate", ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop),
          ctypes.c_ulonglong(0))  # fmt: skip
    try:
        return _map(device, ordinal, handle.value, size, _PROT_READWRITE)
    except BaseException:
        _call("cuMemRelease", handle)
        raise


def import_fd(device: torch.device, fd: int, size: int, *, writable: bool = False) -> Block:
    """The peer's allocation behind `fd` mapped here (read-only unless `writable`). Mapping
    `size` bytes fails where the allocation is smaller, so a peer cannot make this side read
    past what it allocated. The caller keeps and closes `fd`."""
    ordinal = _prepare(device)
    handle = ctypes.c_uint64(0)
    _call("cuMemImportFromShareableHandle", ctypes.byref(handle), ctypes.c_void_p(fd), _POSIX_FD)
    try:
        return _map(
            device, ordinal, handle.value, size, _PROT_READWRITE if writable else _PROT_READ
        )
    except BaseException:
        _call("cuMemRelease", handle)
        raise


def _map(device: torch.device, ordinal: int, handle: int, size: int, prot: int) -> Block:
    ptr = ctypes.c_uint64(0)
    unit = _granularity(ordinal)
    if size <= 0 or size % unit:
        raise DeviceMemoryError(f"a mapping must be a positive multiple of {unit} bytes")
    _call("cuMemAddressReserve", ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
          ctypes.c_uint64(0), ctypes.c_ulonglong(0))  # fmt: skip
    try:
        _call("cuMemMap", ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_uint64(handle),
              ctypes.c_ulonglong(0))  # fmt: skip
        try:
            access = _AccessDesc(_Location(_ON_DEVICE, ordinal), prot)
            _call("cuMemSetAccess", ptr, ctypes.c_size_t(size), ctypes.byref(access),
                  ctypes.c_size_t(1))  # fmt: skip
        except BaseException:
            _call("cuMemUnmap", ptr, ctypes.c_size_t(size))
            raise
    except BaseException:
        _call("cuMemAddressFree", ptr, ctypes.c_size_t(size))
        raise
    view = torch.as_tensor(_Interface(ptr.value, size), device=device)
    return Block(size, view, handle, ptr.value)


class _Interface:
    """The __cuda_array_interface__ torch.as_tensor wraps without a copy."""

    def __init__(self, ptr: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (ptr, False),
            "version": 2,
            "strides": None,
        }


# -- stream memory operations on such memory ---------------------------------------------------
# A word of a Block two processes map can order their streams on the device, with no host in
# between: one stream writes it, another waits until it reaches a value (judged.py). The
# driver's 32-bit wait compares as (int32)(*addr - value) >= 0, so counters may wrap.
_WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ
_WRITE_DEFAULT = 0x0  # CU_STREAM_WRITE_VALUE_DEFAULT: a memory fence before the write


def _stream_op(name: str, stream: int, ptr: int, value: int, flags: int) -> None:
    lib = _lib()
    if lib is None:
        raise DeviceMemoryError("libcuda.so.1 cannot be loaded")
    fn = getattr(lib, name + "_v2", None) or getattr(lib, name)
    result = fn(ctypes.c_void_p(stream), ctypes.c_uint64(ptr), ctypes.c_uint32(value),
                ctypes.c_uint(flags))  # fmt: skip
    if result != 0:
        raise DeviceMemoryError(f"{name} failed with CUresult {result}", result)


def stream_write_u32(stream: int, ptr: int, value: int) -> None:
    """Enqueues, on `stream`, a write of `value` to the 32-bit word at `ptr` (after every
    earlier operation of the stream, with a memory fence)."""
    _stream_op("cuStreamWriteValue32", stream, ptr, value & 0xFFFFFFFF, _WRITE_DEFAULT)


def stream_wait_u32(stream: int, ptr: int, value: int) -> None:
    """Enqueues, on `stream`, a wait until the 32-bit word at `ptr` reaches `value`."""
    _stream_op("cuStreamWaitValue32", stream, ptr, value & 0xFFFFFFFF, _WAIT_GEQ)
