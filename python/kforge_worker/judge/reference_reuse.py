"""The reference's results, computed once per batch and reused by every candidate's judge.

The jobs of a batch (`POST /batch`) share one seed, so their references see the same inputs.
The first judge computes the reference's expected outputs (each correctness trial) and
its timing and kernel activity, and saves them in `dir/key.pt`; the server gives
the file's SHA-256 (which that judge reported in `result.reference_reuse`) to the next judge of
the batch, which uses the file only when its bytes have that digest. `dir` is in the judge's
own directory: the supervisor stages the batch's file there and takes back what the judge
writes (docs/security.md), so no other process sees it, and a file changed by anyone else
fails the digest, so the judge then computes everything itself. The
candidate gets what it always gets: copies of the inputs, poisoned output buffers.

The reference's outputs depend on where its model's weights were drawn (kernels.py: on the
device, or on the cpu after a fallback), so the file records it; a judge whose reference was
built elsewhere computes the outputs again and keeps only the file's timing.

A judge that computed a part the file lacked (the previous candidate failed before the timing,
say) writes a fuller file and reports its digest. Files beyond MAX_BYTES of tensors are not
written (the reason is reported); the job is then judged as any compare.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import torch

from kforge_worker.core.spec import ReferenceReuseSpec

FORMAT = 2
MAX_BYTES = 1 << 30
# Reused outputs cost their bytes twice (written and hashed by one judge, read and hashed by
# each next one, about 0.5 GB/s end to end), while a reference on a GPU recomputes them at
# device speed: on the H200 batch bench of 2026-11-27, reusing a vector add's 64 MB outputs
# made every candidate ~0.9 s slower than computing them again (0.1 ms). A set of outputs (one
# correctness trial's) larger than this is recomputed by each judge
# instead of kept; the reference's timing, the costly part, is always kept.
KEEP_OUTPUT_BYTES = 4 << 20
# The reference's activity fields of a result (results.JobResult), reused as they are.
ACTIVITY_FIELDS = (
    "ref_kernel_time",
    "ref_kernels",
    "ref_idle_gap_ms",
    "ref_timing_flags",
    "ref_kernel_activity",
)

Outputs = list[tuple[str, torch.Tensor]]


@dataclass
class ReferenceTiming:
    """The reference's timing as measured (before the window overhead comes off, which each
    job measures itself), its loop's notes, and its kernel activity fields."""

    stats: dict[str, Any]
    warnings: list[str]
    activity: dict[str, Any]
    samples: list[float] = field(default_factory=list)  # each trial's time (ms), as measured


@dataclass
class ReferenceCache:
    """What this judge knows of the batch's reference, loaded from the file (when its digest
    is the server's) and extended by what this job computes."""

    spec: ReferenceReuseSpec | None
    correctness: dict[int, Outputs] = field(default_factory=dict)
    timing: ReferenceTiming | None = None
    note: str = ""  # why the file was not used, if it was not
    reused: dict[str, Any] = field(default_factory=dict)
    dirty: bool = False
    recomputed: int = 0  # output sets not kept: above KEEP_OUTPUT_BYTES
    # Where the outputs' reference model was built (True: on the device), as the file says
    # and then as this judge built it.
    model_on_device: bool | None = None

    @classmethod
    def open(cls, spec: ReferenceReuseSpec | None) -> ReferenceCache:
        cache = cls(spec)
        if spec is None:
            return cache
        if spec.sha256 is None:
            cache.note = "first job of the batch for these inputs: the reference runs here"
            return cache
        try:
            data = _read(spec)
        except OSError as e:
            cache.note = f"the batch's reference file cannot be read ({e.strerror})"
            return cache
        if hashlib.sha256(data).hexdigest() != spec.sha256:
            cache.note = "the batch's reference file does not have the digest the server kept"
            return cache
        try:
            saved = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            cache._adopt(saved)
        except Exception as e:
            return cls(spec, note=f"the batch's reference file is unreadable: {type(e).__name__}")
        return cache

    def _adopt(self, saved: Any) -> None:
        if not isinstance(saved, dict) or saved.get("format") != FORMAT:
            raise ValueError("unknown format")
        if self.spec is None or saved.get("key") != self.spec.key:
            raise ValueError("another key")
        self.correctness = {
            int(k): [(str(n), t) for n, t in v] for k, v in saved["correctness"].items()
        }
        self.model_on_device = saved.get("model_on_device")
        timing = saved.get("timing")
        self.timing = None if timing is None else ReferenceTiming(**timing)

    def bind_model_place(self, on_device: bool) -> None:
        """This judge built its reference's model on the device (True) or the cpu: outputs
        the file holds from a model built elsewhere are dropped (recomputed, then kept)."""
        if self.spec is not None and self.model_on_device not in (None, on_device):
            if self.correctness:
                self.note = (
                    "the batch's reference outputs came from a model built "
                    f"{'on the device' if self.model_on_device else 'on the cpu'}: computed "
                    "again here (the reference's timing is reused)"
                )
            self.correctness = {}
            self.dirty = True  # the file is written again with this judge's place
        self.model_on_device = on_device

    # --- correctness -----------------------------------------------------------------

    def expected(self, trial: int, device: torch.device) -> Outputs | None:
        """The reference's outputs of a correctness trial, on `device`, if known."""
        if self.spec is None or trial not in self.correctness:
            return None
        self.reused["correctness_trials"] = self.reused.get("correctness_trials", 0) + 1
        return [(n, t.to(device)) for n, t in self.correctness[trial]]

    def keep_expected(self, trial: int, outputs: Outputs) -> None:
        """Keeps a correctness trial's outputs for the batch, unless they are larger than
        KEEP_OUTPUT_BYTES (recomputing them is then cheaper than reusing them)."""
        if self.spec is None or trial in self.correctness:
            return
        if not self._worth_keeping([t for _, t in outputs]):
            return
        self.correctness[trial] = [(n, t.detach().to("cpu", copy=True)) for n, t in outputs]
        self.dirty = True

    # --- timing ----------------------------------------------------------------------

    def reference_timing(self) -> ReferenceTiming | None:
        if self.spec is None or self.timing is None:
            return None
        self.reused["reference_timing"] = True
        return self.timing

    def keep_timing(self, timing: ReferenceTiming) -> None:
        if self.spec is None or self.timing is not None:
            return
        self.timing = timing
        self.dirty = True

    # --- the end of the job ----------------------------------------------------------

    def close(self) -> dict[str, Any] | None:
        """Writes the file when this job added to it; the result's `reference_reuse`."""
        spec = self.spec
        if spec is None:
            return None
        out: dict[str, Any] = {
            "key": spec.key,
            "reused": self.reused,
            "stored": False,
            "sha256": spec.sha256 if not self.note else None,
        }
        if self.note:
            out["note"] = self.note
        if self.recomputed:
            out["not_kept"] = (
                f"{self.recomputed} output set(s) above {KEEP_OUTPUT_BYTES} bytes: each "
                "judge computes them again (cheaper than reusing them)"
            )
        if not self.dirty:
            return out
        size = self._tensor_bytes()
        if size > MAX_BYTES:
            out["note"] = (
                f"the reference's outputs take {size} bytes, above {MAX_BYTES}: not kept for "
                "the batch's next candidates"
            )
            return out
        buffer = io.BytesIO()
        saved = {
            "format": FORMAT,
            "key": spec.key,
            "correctness": {str(k): v for k, v in self.correctness.items()},
            "timing": None if self.timing is None else dataclasses.asdict(self.timing),
            "model_on_device": self.model_on_device,
        }
        torch.save(saved, buffer)
        data = buffer.getvalue()
        try:
            _write(spec, data)
        except OSError as e:
            out["note"] = f"the reference file could not be written ({e.strerror})"
            return out
        out["stored"] = True
        out["sha256"] = hashlib.sha256(data).hexdigest()
        return out

    def _worth_keeping(self, tensors: list[torch.Tensor]) -> bool:
        if _nbytes(tensors) <= KEEP_OUTPUT_BYTES:
            return True
        self.recomputed += 1
        return False

    def _tensor_bytes(self) -> int:
        return _nbytes([t for v in self.correctness.values() for _, t in v])


def _nbytes(tensors: list[torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def _path(spec: ReferenceReuseSpec) -> str:
    return os.path.join(spec.dir, spec.key + ".pt")


def _read(spec: ReferenceReuseSpec) -> bytes:
    with open(_path(spec), "rb") as f:
        data = f.read(MAX_BYTES * 2 + 1)
    return data


def _write(spec: ReferenceReuseSpec, data: bytes) -> None:
    """Atomically (a reader sees the old file or the new one, never a part)."""
    os.makedirs(spec.dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=spec.dir, prefix=".tmp-", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # The batch's next judges run as other uids of the judges' group (mkstemp made it 0600).
        os.chmod(tmp, 0o640)
        os.replace(tmp, _path(spec))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
