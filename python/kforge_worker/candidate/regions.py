"""Trial regions: the memory the candidate's calls read and write, owned by the judge.

Every tensor argument of the candidate's call lives in one of two regions the judge
allocates once per job and the candidate process maps (docs/worker-protocol.md "Candidate
protocol", the `regions` message):

    INPUTS   the input tensors; mapped READ-ONLY in the candidate process
    OUTPUTS  the output and inout buffers, and room for returned outputs; mapped read-write

On a GPU a region is an exportable device allocation (devmem.py; the candidate maps it with
read-only access for INPUTS), on the cpu a memfd (the candidate maps INPUTS with PROT_READ).
So the judge writes each trial's inputs in place (no copy travels over the socket, none is
made by the candidate), reads the outputs in place, and an input the candidate writes to is
refused by the memory system itself: a GPU kernel's write faults (an illegal address), a CPU
write is a SIGSEGV. Nothing the candidate process does to its own harness changes that.

A tensor's place is (region, offset, dtype, shape): contiguous bytes at an ALIGN-aligned
offset. A slot that holds a list or tuple keeps its structure: its tensors have places, its
other elements travel as values. The candidate checks every place it is sent against the
sizes of the regions it mapped, so a malformed plan cannot make it read outside them.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import warnings
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch

from kforge_worker.core import devmem
from kforge_worker.core.inputs import DTYPES as INPUT_DTYPES

INPUTS, OUTPUTS = 0, 1
ALIGN = 512  # every place starts at a multiple of this (Triton specialises 16-byte pointers)
# The largest region a candidate maps (a request's limits are the server's; this only keeps a
# malformed message from reserving absurd address space).
MAX_REGION_BYTES = 1 << 40
DTYPES: dict[str, torch.dtype] = {
    **INPUT_DTYPES,
    "uint8": torch.uint8,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
NAMES = {v: k for k, v in DTYPES.items()}


class RegionError(ValueError):
    """A layout or a place that does not fit the regions (the message names what)."""


@dataclass(frozen=True)
class Place:
    region: int
    offset: int
    dtype: str
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        count = 1
        for d in self.shape:
            count *= d
        return count * torch.empty((), dtype=DTYPES[self.dtype]).element_size()

    def to_wire(self) -> dict[str, Any]:
        return {"r": self.region, "o": self.offset, "d": self.dtype, "s": list(self.shape)}

    def in_set(self, index: int, strides: list[int], sizes: list[int]) -> Place:
        """The same tensor in set `index` of a layout of several sets (`strides`: one set's
        bytes per region), checked against the mapped `sizes`."""
        offset = self.offset + index * strides[self.region]
        if index < 0 or offset + self.nbytes > sizes[self.region]:
            raise RegionError(f"set {index} of a place ends past its region")
        return Place(self.region, offset, self.dtype, self.shape)

    @staticmethod
    def from_wire(raw: Any, sizes: list[int]) -> Place:
        """A place the peer sent, checked against the mapped regions' `sizes`."""
        if not isinstance(raw, dict):
            raise RegionError("a place must be an object")
        region, offset, dtype, shape = raw.get("r"), raw.get("o"), raw.get("d"), raw.get("s")
        if region not in (INPUTS, OUTPUTS) or region >= len(sizes):
            raise RegionError(f"unknown region {region!r}")
        if not _count(offset) or offset % ALIGN:
            raise RegionError(f"bad offset {offset!r}")
        if dtype not in DTYPES:
            raise RegionError(f"unknown dtype {dtype!r}")
        if not isinstance(shape, list) or not all(_count(d) for d in shape) or len(shape) > 16:
            raise RegionError(f"bad shape {shape!r}")
        place = Place(region, offset, dtype, tuple(shape))
        if offset + place.nbytes > sizes[region]:
            raise RegionError(f"place {raw} ends past its region ({sizes[region]} bytes)")
        return place


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < (1 << 50)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def region_of(role: str) -> int:
    """INPUTS for a slot the call must leave unchanged; OUTPUTS for one it writes."""
    return OUTPUTS if role in ("output", "inout") else INPUTS


class Layout:
    """Where each slot's tensors go: `places[i]` is a Place (a tensor slot), a list of
    Place-or-None (a list/tuple slot: None for its non-tensor elements), or None (no
    tensor), and `sizes` the two regions' bytes for one set. `returned` holds places in
    OUTPUTS for outputs the candidate returns instead of writing (added with `add_returned`).
    With `sets` > 1 the regions hold that many such sets one after another (`strides` apart):
    on the cpu a judged trial calls the kernel once per set (judged.py)."""

    def __init__(self) -> None:
        self.places: list[Any] = []
        self.returned: list[Place] = []
        self.sizes = [0, 0]
        self.sets = 1

    @property
    def strides(self) -> list[int]:
        return list(self.sizes)

    @property
    def total_sizes(self) -> list[int]:
        return [s * self.sets for s in self.sizes]

    def _place(self, region: int, t: torch.Tensor) -> Place:
        if t.dtype not in NAMES:
            raise RegionError(f"dtype {t.dtype} cannot be shared with the candidate")
        place = Place(region, self.sizes[region], NAMES[t.dtype], tuple(t.shape))
        self.sizes[region] += _aligned(max(place.nbytes, 1))
        return place

    @staticmethod
    def of(slots: list[dict[str, Any]], values: list[Any]) -> Layout:
        layout = Layout()
        for slot, value in zip(slots, values, strict=True):
            region = region_of(str(slot.get("role", "input")))
            if isinstance(value, torch.Tensor):
                layout.places.append(layout._place(region, value))
            elif isinstance(value, list | tuple) and any(
                isinstance(v, torch.Tensor) for v in value
            ):
                layout.places.append(
                    [
                        layout._place(region, v) if isinstance(v, torch.Tensor) else None
                        for v in value
                    ]
                )
            else:
                layout.places.append(None)
        return layout

    def add_returned(self, outputs: list[torch.Tensor]) -> None:
        self.returned = [self._place(OUTPUTS, t) for t in outputs]

    def key(self) -> tuple[Any, ...]:
        """Equal for layouts that place the same tensors the same way."""
        return (repr(self.places), repr(self.returned), tuple(self.sizes), self.sets)

    def to_wire(self) -> list[Any]:
        return [_places_to_wire(p) for p in self.places]


def _places_to_wire(p: Any) -> Any:
    if isinstance(p, Place):
        return p.to_wire()
    if isinstance(p, list):
        return [None if q is None else q.to_wire() for q in p]
    return None


def places_from_wire(raw: Any, sizes: list[int]) -> list[Any]:
    """The candidate's reading of `Layout.to_wire` (every place checked)."""
    if not isinstance(raw, list):
        raise RegionError("places must be a list")
    out: list[Any] = []
    for p in raw:
        if p is None:
            out.append(None)
        elif isinstance(p, list):
            out.append([None if q is None else Place.from_wire(q, sizes) for q in p])
        else:
            out.append(Place.from_wire(p, sizes))
    return out


def places_in_set(places: list[Any], index: int, strides: list[int], sizes: list[int]) -> list[Any]:
    """`places` of set 0 moved to set `index` (Place.in_set)."""
    out: list[Any] = []
    for p in places:
        if isinstance(p, Place):
            out.append(p.in_set(index, strides, sizes))
        elif isinstance(p, list):
            out.append([None if q is None else q.in_set(index, strides, sizes) for q in p])
        else:
            out.append(None)
    return out


def input_spans(places: list[Any]) -> list[tuple[int, int]]:
    """(offset, bytes) of every INPUTS place in `places`."""
    flat = [q for p in places for q in (p if isinstance(p, list) else [p])]
    return [(q.offset, q.nbytes) for q in flat if isinstance(q, Place) and q.region == INPUTS]


def strip_tensors(places: list[Any], values: list[Any]) -> list[Any]:
    """The slot values as they travel with placed tensors left out (None in their stead)."""
    out: list[Any] = []
    for p, v in zip(places, values, strict=True):
        if isinstance(p, Place):
            out.append(None)
        elif isinstance(p, list):
            out.append([None if q is not None else e for q, e in zip(p, v, strict=True)])
        else:
            out.append(v)
    return out


class _Mapped:
    """The regions mapped into this process: flat uint8 tensors and what keeps them alive."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.flat: list[torch.Tensor] = []
        self.sizes: list[int] = []
        self._blocks: list[devmem.Block] = []
        self._maps: list[mmap.mmap] = []
        self._fds: list[int] = []

    def view(self, place: Place) -> torch.Tensor:
        flat = self.flat[place.region][place.offset : place.offset + place.nbytes]
        return flat.view(DTYPES[place.dtype]).reshape(place.shape)

    def touch(self, spans: list[tuple[int, int]]) -> None:
        """Reads the INPUTS bytes of `spans` ((offset, bytes) pairs) once: the cpu's caches
        of this process's core then hold a trial's inputs, which another process wrote."""
        flat = self.flat[INPUTS]
        for offset, nbytes in spans:
            if nbytes:
                _read(flat[offset : offset + nbytes])

    def bind(self, places: list[Any], sent: list[Any]) -> list[Any]:
        """The slot values: views where there are places, the sent values elsewhere."""
        out: list[Any] = []
        for p, v in zip(places, sent, strict=True):
            if isinstance(p, Place):
                out.append(self.view(p))
            elif isinstance(p, list):
                if not isinstance(v, list | tuple) or len(v) != len(p):
                    raise RegionError("a list slot's values do not match its places")
                items = [self.view(q) if q is not None else e for q, e in zip(p, v, strict=True)]
                out.append(tuple(items) if isinstance(v, tuple) else items)
            else:
                out.append(v)
        return out

    def close(self) -> None:
        self.flat = []
        for block in self._blocks:
            with contextlib.suppress(devmem.DeviceMemoryError, RuntimeError):
                block.close()
        self._blocks = []
        for m in self._maps:
            with contextlib.suppress(BufferError, ValueError):
                m.close()
        self._maps = []
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []


class JudgeRegions(_Mapped):
    """The judge's regions for one layout: allocated, mapped read-write, exportable."""

    def __init__(self, device: torch.device, layout: Layout) -> None:
        super().__init__(device)
        self.layout = layout
        try:
            for size in layout.total_sizes:
                self._allocate(max(size, ALIGN))
        except BaseException:
            self.close()
            raise

    def _allocate(self, size: int) -> None:
        if self.device.type == "cuda":
            block = devmem.allocate(self.device, size)
            self._blocks.append(block)
            self.flat.append(block.view)
            self.sizes.append(block.size)
            return
        fd = os.memfd_create("kforge-region", os.MFD_CLOEXEC)
        self._fds.append(fd)
        os.ftruncate(fd, size)
        m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        self._maps.append(m)
        self.flat.append(torch.frombuffer(m, dtype=torch.uint8))
        self.sizes.append(size)

    def descriptors(self) -> list[int]:
        """New descriptors of the regions, in order (the caller sends and closes them)."""
        if self.device.type == "cuda":
            return [block.export() for block in self._blocks]
        return [os.dup(fd) for fd in self._fds]

    def places(self, index: int = 0) -> list[Any]:
        """The layout's places in set `index`."""
        if index == 0:
            return self.layout.places
        return places_in_set(self.layout.places, index, self.layout.strides, self.sizes)

    def load(self, values: list[Any], *, outputs: bool = False, index: int = 0) -> None:
        """Copies the slot values' tensors into their places of set `index`: the INPUTS ones,
        and with `outputs` the OUTPUTS ones too (an inout tensor's starting values)."""
        with torch.no_grad():
            for p, v in zip(self.places(index), values, strict=True):
                pairs = (
                    [(p, v)] if isinstance(p, Place) else list(zip(p or [], v or [], strict=True))
                )
                for q, t in pairs:
                    if q is not None and (outputs or q.region == INPUTS):
                        self.view(q).copy_(t)

    def bound(self, values: list[Any], index: int = 0) -> list[Any]:
        """The slot values with the judge's own views (of set `index`) in place of placed
        tensors."""
        return self.bind(self.places(index), strip_tensors(self.layout.places, values))

    def returned_views(self, index: int = 0) -> list[torch.Tensor]:
        strides = self.layout.strides
        return [self.view(p.in_set(index, strides, self.sizes)) for p in self.layout.returned]


class CandidateRegions(_Mapped):
    """The candidate's mapping of the judge's regions: INPUTS read-only, OUTPUTS writable."""

    def __init__(self, device: torch.device, fds: list[int], sizes: list[int]) -> None:
        super().__init__(device)
        if len(fds) != 2 or len(sizes) != 2:
            raise RegionError("two regions are expected")
        try:
            for region, (fd, size) in enumerate(zip(fds, sizes, strict=True)):
                if not _count(size) or size == 0 or size > MAX_REGION_BYTES:
                    raise RegionError(f"bad region size {size!r}")
                self._map(region, fd, size)
        except BaseException:
            self.close()
            raise
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _map(self, region: int, fd: int, size: int) -> None:
        writable = region == OUTPUTS
        if self.device.type == "cuda":
            block = devmem.import_fd(self.device, fd, size, writable=writable)
            self._blocks.append(block)
            self.flat.append(block.view)
            self.sizes.append(size)
            return
        if os.fstat(fd).st_size < size:
            raise RegionError(f"region {region} is smaller than {size} bytes")
        prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
        m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=prot)
        self._maps.append(m)
        with warnings.catch_warnings():
            # A read-only mapping is the point: torch warns that it is not writable.
            warnings.simplefilter("ignore", UserWarning)
            self.flat.append(torch.frombuffer(m, dtype=torch.uint8))
        self.sizes.append(size)


def _read(data: torch.Tensor) -> None:
    """Reads every byte of `data` (uint8, 1-d) at about the memory's speed: the 8-byte words
    summed as int64 (a uint8 sum widens every byte and ran ~25x slower than the call it came
    before: a 256 KiB input took 118 us to touch, a float add of it 6 us), the ends as bytes."""
    head = (-data.data_ptr()) % 8
    words = (data.numel() - head) // 8
    if words <= 0:
        data.sum()
        return
    if head:
        data[:head].sum()
    data[head : head + 8 * words].view(torch.int64).sum()
    tail = head + 8 * words
    if tail < data.numel():
        data[tail:].sum()
