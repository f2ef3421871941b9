"""Output buffers described by a `fill` instead of sent (binding.uniform_fill,
binding.invocation_from_plan)."""

from __future__ import annotations

import math

import pytest
import torch

from kforge_worker.candidate import wire
from kforge_worker.candidate.binding import (
    Invocation,
    invocation_from_plan,
    plan_invocation,
    uniform_fill,
)
from kforge_worker.check.compare import same_bits
from kforge_worker.core.inputs import BoundArg

CPU = torch.device("cpu")
BIG = wire.FD_MIN_BYTES // 4  # float32 elements in FD_MIN_BYTES


@pytest.mark.parametrize(
    "value",
    [torch.finfo(torch.float32).max, -1e30, math.nan, 0.0, -0.0],
)
def test_a_large_buffer_of_one_value_becomes_a_fill_that_rebuilds_its_bits(value) -> None:
    buf = torch.full((BIG,), value)
    fill = uniform_fill(buf)
    assert fill is not None and fill["shape"] == [BIG] and fill["dtype"] == "float32"
    rebuilt = invocation_from_plan(
        {
            "slots": [{"name": "out", "role": "output", "is_meta": False, "fill": fill}],
            "args": [{"slot": 0}],
            "kwargs": {},
            "outputs": [0],
            "read_only": [],
        },
        [None],
        CPU,
    ).args[0]
    assert same_bits(rebuilt, buf)


def test_buffers_that_are_not_one_value_or_small_are_sent() -> None:
    mixed = torch.zeros(BIG)
    mixed[7] = -0.0  # equal as floats, not as bits
    assert uniform_fill(mixed) is None
    assert uniform_fill(torch.randn(BIG)) is None
    assert uniform_fill(torch.zeros(16)) is None  # under FD_MIN_BYTES: cheap to send
    assert uniform_fill(torch.randint(0, 2, (BIG * 4,)).bool()) is None  # random bits
    payload = torch.full((BIG,), math.nan).view(torch.int32)
    payload.fill_(0x7FC00001)  # a NaN torch.full would not rebuild bit for bit
    assert uniform_fill(payload.view(torch.float32)) is None


def test_only_output_only_slots_are_filled_and_their_values_not_sent() -> None:
    x = torch.full((BIG,), 1.0)  # an input of one value is still sent
    out = torch.full((BIG,), 3.0)
    inv = Invocation(
        [x, out],
        {},
        outputs=[BoundArg("out", out, "output")],
        read_only=[BoundArg("x", x, "input")],
    )
    plan, values = plan_invocation(inv, fills=True)
    assert values[0] is x and values[1] is None and "fill" in plan["slots"][1]
    assert "fill" not in plan["slots"][0]
    plain, sent = plan_invocation(inv)
    assert all("fill" not in slot for slot in plain["slots"]) and sent[1] is out
    rebuilt = invocation_from_plan(plan, values, CPU)
    assert torch.equal(rebuilt.args[1], out) and rebuilt.outputs[0].value is rebuilt.args[1]


@pytest.mark.parametrize(
    ("fill", "error"),
    [
        ({"dtype": "float99", "shape": [4], "value": {"$v": 1.0}}, "malformed fill"),
        ({"dtype": "float32", "shape": [-1], "value": {"$v": 1.0}}, "malformed fill shape"),
        ({"dtype": "float32", "shape": [4], "value": {"$v": "x"}}, "malformed fill value"),
    ],
)
def test_a_malformed_fill_is_refused(fill, error) -> None:
    plan = {
        "slots": [{"name": "out", "role": "output", "fill": fill}],
        "args": [{"slot": 0}],
        "kwargs": {},
        "outputs": [0],
        "read_only": [],
    }
    with pytest.raises(ValueError, match=error):
        invocation_from_plan(plan, [None], CPU)
    with pytest.raises(ValueError, match="needs a device"):
        invocation_from_plan({**plan, "slots": [{**plan["slots"][0], "fill": {}}]}, [None])
