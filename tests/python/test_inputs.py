"""Input construction: init kinds, seeds, literal data, KernelBench get_inputs."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest
import torch
from worker_kernels import tensor_arg

from kforge_worker.core.inputs import (
    BoundArg,
    InputError,
    InputSet,
    ProblemCalls,
    derive_seed,
    make_io_inputs,
    make_kernelbench_inputs,
    make_tensor,
)
from kforge_worker.core.spec import (
    SpecError,
    TensorData,
    TensorSpec,
    parse_io,
    parse_tensor_spec,
    tensor_bytes,
)

CPU = torch.device("cpu")


def spec(shape, dtype="float32", **init):
    body = {"shape": shape, "dtype": dtype}
    if init:
        body["init"] = init
    return parse_tensor_spec(body, "t")


def test_init_kinds():
    assert torch.equal(make_tensor(spec([3], kind="zeros"), CPU, 1), torch.zeros(3))
    assert torch.equal(make_tensor(spec([2, 2], kind="ones"), CPU, 1), torch.ones(2, 2))
    full = make_tensor(spec([4], "int32", kind="full", fill_value=7), CPU, 1)
    assert full.dtype == torch.int32 and full.tolist() == [7, 7, 7, 7]
    ar = make_tensor(spec([2, 3], kind="arange", start=1.0, step=0.5), CPU, 1)
    assert ar.tolist() == [[1.0, 1.5, 2.0], [2.5, 3.0, 3.5]]
    uni = make_tensor(spec([10000], kind="uniform", low=-2.0, high=3.0), CPU, 1)
    assert uni.min() >= -2.0 and uni.max() < 3.0 and uni.std() > 1.0
    rn = make_tensor(spec([20000], "float64", kind="randn", mean=5.0, std=2.0), CPU, 1)
    assert rn.dtype == torch.float64
    assert abs(rn.mean().item() - 5.0) < 0.1 and abs(rn.std().item() - 2.0) < 0.1


def test_integer_and_bool_tensors():
    ints = make_tensor(spec([5000], "int64", kind="uniform", low=-3, high=3), CPU, 2)
    assert set(ints.unique().tolist()) == {-3, -2, -1, 0, 1, 2, 3}  # both ends included
    default_ints = make_tensor(spec([5000], "int8"), CPU, 2)
    assert default_ints.min() == 0 and default_ints.max() == 9
    flags = make_tensor(spec([1000], "bool"), CPU, 2)
    assert flags.dtype == torch.bool and 300 < int(flags.sum()) < 700
    with pytest.raises(InputError, match="floating"):
        make_tensor(spec([3], "int32", kind="randn"), CPU, 2)
    with pytest.raises(InputError, match="no integer"):
        make_tensor(spec([3], "int32", kind="uniform", low=0.2, high=0.8), CPU, 2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_default_floats_are_randn_in_dtype(dtype):
    t = make_tensor(spec([4096], dtype), CPU, 3)
    assert str(t.dtype) == f"torch.{dtype}"
    assert abs(t.float().mean().item()) < 0.1 and abs(t.float().std().item() - 1.0) < 0.1


def test_same_seed_same_tensor_other_seed_other_tensor():
    s = spec([256], kind="randn")
    assert torch.equal(make_tensor(s, CPU, 11), make_tensor(s, CPU, 11))
    assert not torch.equal(make_tensor(s, CPU, 11), make_tensor(s, CPU, 12))


def test_seeds_mix_server_seed_trial_name_and_init_seed():
    base = derive_seed(42, "trial", 0, "arg", "x", "init", None)
    assert base == derive_seed(42, "trial", 0, "arg", "x", "init", None)
    others = {
        derive_seed(43, "trial", 0, "arg", "x", "init", None),
        derive_seed(42, "trial", 1, "arg", "x", "init", None),
        derive_seed(42, "trial", 0, "arg", "y", "init", None),
        derive_seed(42, "trial", 0, "arg", "x", "init", 5),
    }
    assert base not in others and len(others) == 4
    assert 0 <= base < 2**63


def test_io_inputs_are_deterministic_per_seed_and_differ_across_trials():
    io = parse_io(
        {
            "args": [
                tensor_arg("x", [64]),
                tensor_arg("y", [64]),
                tensor_arg("o", [64], role="output"),
            ]
        },
        "io",
    )
    first = make_io_inputs(io, 7, 0, CPU)
    again = make_io_inputs(io, 7, 0, CPU)
    trial1 = make_io_inputs(io, 7, 1, CPU)
    other_seed = make_io_inputs(io, 8, 0, CPU)
    x0, y0 = first.args[0].value, first.args[1].value
    assert torch.equal(x0, again.args[0].value)
    assert not torch.equal(x0, y0)  # names are mixed in
    assert not torch.equal(x0, trial1.args[0].value)
    assert not torch.equal(x0, other_seed.args[0].value)
    assert first.args[2].role == "output" and first.args[2].value.shape == (64,)


def test_explicit_init_seed_changes_values():
    def io(seed):
        init = {"kind": "randn", "seed": seed}
        return parse_io({"args": [tensor_arg("x", [32], init=init)]}, "io")

    a = make_io_inputs(io(1), 7, 0, CPU).args[0].value
    b = make_io_inputs(io(2), 7, 0, CPU).args[0].value
    assert not torch.equal(a, b)


def test_literal_data_base64_and_zlib():
    values = np.arange(12, dtype="<f4").reshape(3, 4) * 0.5
    raw = values.tobytes()
    for compress, payload in (("none", raw), ("zlib", zlib.compress(raw))):
        data = {
            "data_b64": base64.b64encode(payload).decode(),
            "dtype": "float32",
            "shape": [3, 4],
            "compress": compress,
        }
        t = make_tensor(parse_tensor_spec({"shape": [3, 4], "data": data}, "t"), CPU, 0)
        assert t.tolist() == values.tolist()
    bf16 = torch.tensor([1.0, -2.5, 3.0], dtype=torch.bfloat16)
    data = {
        "data_b64": base64.b64encode(bf16.view(torch.int16).numpy().tobytes()).decode(),
        "dtype": "bfloat16",
        "shape": [3],
    }
    t = make_tensor(
        parse_tensor_spec({"shape": [3], "dtype": "bfloat16", "data": data}, "t"), CPU, 0
    )
    assert torch.equal(t, bf16)


def test_literal_data_of_wrong_size_is_an_error():
    data = {"data_b64": base64.b64encode(b"\0" * 8).decode(), "dtype": "float32", "shape": [3]}
    # The parser decodes the data once and checks its size, naming the field, as the server does.
    with pytest.raises(SpecError, match=r"^t\.data\.data_b64: holds 8 bytes .* needs 12"):
        parse_tensor_spec({"shape": [3], "data": data}, "t")
    # A spec built without the parser meets the same check where the tensor is made.
    spec = TensorSpec(
        shape=(3,), dtype="float32", data=TensorData(data["data_b64"], "float32", (3,))
    )
    with pytest.raises(InputError, match="needs 12"):
        make_tensor(spec, CPU, 0)


def test_literal_data_is_decoded_once():
    values = torch.arange(6, dtype=torch.float32)
    b64 = base64.b64encode(zlib.compress(values.numpy().tobytes())).decode()
    data = {"data_b64": b64, "dtype": "float32", "shape": [6], "compress": "zlib"}
    tensor_bytes.cache_clear()
    spec = parse_tensor_spec({"shape": [6], "data": data}, "t")
    for seed in range(3):  # every trial builds the tensor again
        assert torch.equal(make_tensor(spec, CPU, seed), values)
    info = tensor_bytes.cache_info()
    assert (info.misses, info.hits) == (1, 3)


def test_kernelbench_inputs_are_seeded():
    def get_inputs():
        return [torch.randn(16), 3]

    a = make_kernelbench_inputs(get_inputs, 5, 0, CPU)
    b = make_kernelbench_inputs(get_inputs, 5, 0, CPU)
    c = make_kernelbench_inputs(get_inputs, 5, 1, CPU)
    assert torch.equal(a.args[0].value, b.args[0].value)
    assert not torch.equal(a.args[0].value, c.args[0].value)
    assert a.args[1].value == 3 and not a.from_io
    with pytest.raises(InputError, match="must return a list"):
        make_kernelbench_inputs(lambda: torch.ones(2), 5, 0, CPU)


def test_clone_is_deep():
    io = parse_io({"args": [tensor_arg("x", [8])]}, "io")
    inputs = make_io_inputs(io, 1, 0, CPU)
    copy = inputs.clone()
    copy.args[0].value.zero_()
    assert inputs.args[0].value.abs().sum() > 0


# KernelBench problems on the job's device (ProblemCalls). The "meta" device stands in for a
# GPU here: a factory call that ignores the default device would make a cpu tensor.
META = torch.device("meta")


def test_problem_calls_make_tensors_on_the_device():
    calls = ProblemCalls(META)
    values = calls.call(lambda: [torch.randn(4, 3), 5], 7, "get_inputs()")
    assert values[0].device.type == "meta" and values[1] == 5
    assert calls.fallback is None and calls.generated_on == "meta"
    inputs = make_kernelbench_inputs(lambda: [torch.randn(4)], 1, 0, META, calls)
    assert inputs.args[0].value.device.type == "meta"


def test_problem_calls_fall_back_to_the_cpu_once_for_the_whole_problem():
    seen: list[str] = []

    def get_inputs():
        x = torch.randn(6)
        seen.append(x.device.type)
        return [torch.from_numpy(x.numpy())]  # numpy() fails off the cpu

    calls = ProblemCalls(META)
    first = make_kernelbench_inputs(get_inputs, 1, 0, CPU, calls)
    assert seen == ["meta", "cpu"]
    assert calls.fallback is not None and "get_inputs()" in calls.fallback
    assert "cpu" in calls.fallback and calls.generated_on == "cpu"
    second = make_kernelbench_inputs(get_inputs, 1, 1, CPU, calls)
    assert seen == ["meta", "cpu", "cpu"]  # the device path is not tried again
    assert first.args[0].value.device.type == "cpu"
    assert not torch.equal(first.args[0].value, second.args[0].value)  # other trial, other seed


def test_problem_calls_on_the_device_are_seeded_like_the_cpu_path():
    calls = ProblemCalls(CPU)
    a = calls.call(lambda: torch.randn(5), 42, "get_inputs()")
    b = calls.call(lambda: torch.randn(5), 42, "get_inputs()")
    assert torch.equal(a, b) and calls.fallback is None


def test_problem_calls_raise_when_the_cpu_path_fails_too():
    def broken():
        raise RuntimeError("no inputs today")

    calls = ProblemCalls(META)
    with pytest.raises(RuntimeError, match="no inputs today"):
        calls.call(broken, 1, "get_inputs()")
    assert calls.fallback is not None and "RuntimeError" in calls.fallback


def test_shared_input_sets_are_new_objects_on_the_same_memory():
    x, y = torch.randn(4), torch.randn(2)
    one = InputSet((BoundArg("x", x), BoundArg("pair", [y, 3]), BoundArg("n", 4)), from_io=True)
    shared = one.shared()
    got_x, got_pair = shared.args[0].value, shared.args[1].value
    assert got_x is not x and got_x.data_ptr() == x.data_ptr()  # no copy: a view
    assert isinstance(got_pair, list) and got_pair[0] is not y
    assert got_pair[0].data_ptr() == y.data_ptr() and got_pair[1] == 3
    assert shared.args[2].value == 4 and shared.from_io
    cloned = one.clone().args[0].value
    assert cloned.data_ptr() != x.data_ptr()
