"""kernel_eval_client against the client package of the kernel evaluation server it replaces.

old_client_signatures.json holds the old package's public signatures, extracted from its source
by extract_old_client_signatures.py (names, parameter kinds and defaults only). Every one of
them must be accepted by ours: the same parameter names in the same positions, no new required
parameter, the same defaults, the same instance attributes and enum members. The keyword forms
the old server's docs show (which its own builder refused) must build what the old positional
forms build, the client must send the request the old client sent, and bad values must raise
naming the field. No server is needed.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest

import kernel_eval_client
from kernel_eval_client import (
    ArgSpec,
    IOContract,
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelType,
    LaunchConfig,
    LaunchDim,
    TensorSpec,
    create_arange_spec,
    create_full_spec,
    create_ones_spec,
    create_randn_spec,
    create_tensor_spec,
    create_uniform_spec,
)
from kernel_eval_client.models import (
    BaseKernelMetadata,
    CudaKernelMetadata,
    MultiKernelMetadata,
    RuntimeStats,
    TorchKernelMetadata,
    TritonKernelMetadata,
)

SIGNATURES = json.loads(Path(__file__).with_name("old_client_signatures.json").read_text())
CLASSES: dict[str, dict[str, Any]] = SIGNATURES["classes"]
FUNCTIONS: dict[str, dict[str, Any]] = SIGNATURES["functions"]

# A value of each annotation the old models' required fields have, to construct them.
SAMPLES: dict[str, Any] = {"str": "x", "float": 1.5, "KernelType": "torch", "List[ArgSpec]": []}
# The old models are pydantic models: their constructors take every field by keyword only.
FIELD_KIND = {"pydantic": "keyword_only", "dataclass": "positional_or_keyword"}


def our_module(defined_in: str) -> ModuleType:
    """Where ours has an old name: the old package's own module; the old server's shared models
    (the old package re-exported them from kernel_eval_client.models) and its metadata classes
    (returned by KernelCode.get_typed_metadata) are in kernel_eval_client.models."""
    if defined_in.startswith("kernel_eval_client"):
        return importlib.import_module(defined_in)
    return importlib.import_module("kernel_eval_client.models")


def our_class(name: str) -> type:
    cls = getattr(our_module(CLASSES[name]["defined_in"]), name, None)
    assert isinstance(cls, type), f"kernel_eval_client has no class {name}"
    return cls


def old_default(param: dict[str, Any]) -> Any:
    """The old default as a value: {"factory": "list"} is a new empty list."""
    default = param["default"]
    if isinstance(default, dict) and "factory" in default:
        return {"list": list, "dict": dict}[default["factory"]]()
    assert not (isinstance(default, dict) and "expr" in default), f"not a literal: {default}"
    return default


def our_default(owner: object, param: inspect.Parameter) -> Any:
    """Our parameter's default; a dataclass field's default_factory made into its value."""
    if isinstance(owner, type) and dataclasses.is_dataclass(owner):
        for f in dataclasses.fields(owner):
            if f.name == param.name and f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return param.default


def same_value(a: Any, b: Any) -> bool:
    """Equal as JSON writes them: 120 is not 120.0 and False is not 0."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- the cases: every old constructor, method and function ----------------------------------


@dataclasses.dataclass
class Case:
    name: str
    resolve: Callable[[], tuple[Callable[..., Any], object]]  # (our callable, its owner)
    old: dict[str, Any]  # {"kind", "async", "params"}


def constructor_params(spec: dict[str, Any]) -> list[dict[str, Any]]:
    kind = FIELD_KIND[spec["kind"]]
    return [
        {"name": f["name"], "kind": kind, **({"default": f["default"]} if "default" in f else {})}
        for f in spec["fields"]
    ]


def constructor(name: str) -> Callable[[], tuple[Callable[..., Any], object]]:
    def resolve() -> tuple[Callable[..., Any], object]:
        cls = our_class(name)
        return cls, cls

    return resolve


def method(cls_name: str, name: str) -> Callable[[], tuple[Callable[..., Any], object]]:
    def resolve() -> tuple[Callable[..., Any], object]:
        cls = our_class(cls_name)
        assert hasattr(cls, name), f"{cls_name} has no method {name}"
        return getattr(cls, name), cls

    return resolve


def function(name: str) -> Callable[[], tuple[Callable[..., Any], object]]:
    def resolve() -> tuple[Callable[..., Any], object]:
        module = our_module(FUNCTIONS[name]["defined_in"])
        assert hasattr(module, name), f"{module.__name__} has no function {name}"
        return getattr(module, name), module

    return resolve


def cases() -> Iterator[Case]:
    for cls_name, spec in CLASSES.items():
        if spec["kind"] in FIELD_KIND:
            old = {"kind": "method", "async": False, "params": constructor_params(spec)}
            yield Case(f"{cls_name}()", constructor(cls_name), old)
        for name, old in spec.get("methods", {}).items():
            if name == "__init__":
                yield Case(f"{cls_name}()", constructor(cls_name), old)
            else:
                yield Case(f"{cls_name}.{name}", method(cls_name, name), old)
    for name, old in FUNCTIONS.items():
        yield Case(f"{name}()", function(name), {"kind": "function", "async": False, **old})


CASES = list(cases())


def our_signature(case: Case) -> tuple[inspect.Signature, object]:
    """Our signature as a caller sees it (without self), and what owns the callable."""
    fn, owner = case.resolve()
    if case.old["kind"] in ("classmethod", "staticmethod"):
        name = case.name.split(".")[-1]
        wrapper = inspect.getattr_static(owner, name)
        assert type(wrapper).__name__ == case.old["kind"], (
            f"{case.name} is not a {case.old['kind']}"
        )
    assert inspect.iscoroutinefunction(fn) == case.old["async"], case.name
    sig = inspect.signature(fn)
    if inspect.isfunction(fn) and isinstance(owner, type):  # a method read off its class
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])
    return sig, owner


def test_every_old_public_name_has_its_signatures() -> None:
    # Each name the old package exported is described in the data file (a class with its
    # fields or methods, or a function), so the cases below cover all of it.
    for name in SIGNATURES["exports"]["kernel_eval_client"]:
        assert name in CLASSES or name in FUNCTIONS, name
        spec = CLASSES.get(name, {})
        assert spec.get("kind") != "plain" or "__init__" in spec["methods"], name
    names = {c.name for c in CASES}
    assert {"IOContractBuilder.add_input_tensor", "KernelEvalClient.compare"} <= names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_old_call_binds_to_the_same_parameters(case: Case) -> None:
    sig, owner = our_signature(case)
    params = case.old["params"]
    named = [p for p in params if not p["kind"].startswith("var_")]
    positional = [p for p in named if p["kind"] != "keyword_only"]
    keyword = [p for p in named if p["kind"] == "keyword_only"]
    values = {p["name"]: object() for p in named}

    # Every argument, positionally where the old one was positional: each value lands on the
    # parameter of the old name.
    bound = sig.bind(*(values[p["name"]] for p in positional), **{
        p["name"]: values[p["name"]] for p in keyword
    })  # fmt: skip
    assert dict(bound.arguments) == values, case.name
    # Every argument by keyword.
    if not any(p["kind"] == "positional_only" for p in named):
        assert dict(sig.bind(**values).arguments) == values, case.name
    # Only what the old one required: ours requires nothing more.
    required = [p for p in named if "default" not in p]
    sig.bind(
        *(values[p["name"]] for p in required if p["kind"] != "keyword_only"),
        **{p["name"]: values[p["name"]] for p in required if p["kind"] == "keyword_only"},
    )
    # *args and **kwargs are still taken.
    kinds = {p.kind for p in sig.parameters.values()}
    for p in params:
        if p["kind"] == "var_positional":
            assert inspect.Parameter.VAR_POSITIONAL in kinds, (case.name, p["name"])
        if p["kind"] == "var_keyword":
            assert inspect.Parameter.VAR_KEYWORD in kinds, (case.name, p["name"])
    # The same defaults.
    for p in named:
        if "default" in p:
            ours = our_default(owner, sig.parameters[p["name"]])
            assert ours is not inspect.Parameter.empty, f"{case.name}: {p['name']} is required"
            assert same_value(ours, old_default(p)), (case.name, p["name"], ours, p["default"])


OBJECTS = [n for n, c in CLASSES.items() if c["kind"] in FIELD_KIND or c.get("attributes")]


def construct(name: str) -> Any:
    """Ours, built with the old class's required arguments only."""
    spec = CLASSES[name]
    if spec["kind"] not in FIELD_KIND:
        return our_class(name)()  # the plain classes' __init__ took no required argument
    required = {f["name"]: SAMPLES[f["annotation"]] for f in spec["fields"] if "default" not in f}
    return our_class(name)(**required)


@pytest.mark.parametrize("name", OBJECTS)
def test_instances_have_the_old_fields_and_attributes(name: str) -> None:
    obj = construct(name)
    try:
        for f in CLASSES[name].get("fields", []):
            expected = old_default(f) if "default" in f else SAMPLES[f["annotation"]]
            assert same_value(getattr(obj, f["name"]), expected), (name, f["name"])
        for attribute in CLASSES[name].get("attributes", []):
            assert hasattr(obj, attribute), (name, attribute)
    finally:
        if isinstance(obj, KernelEvalClient):
            obj.close()


def test_kernel_type_has_the_old_members() -> None:
    old = CLASSES["KernelType"]["members"]
    assert {m.name: m.value for m in KernelType} == old


@pytest.mark.parametrize("module", sorted(SIGNATURES["exports"]))
def test_every_old_name_imports_from_the_old_module(module: str) -> None:
    ours = importlib.import_module(module)
    for name in SIGNATURES["exports"][module]:
        assert hasattr(ours, name), f"from {module} import {name}"
        if hasattr(kernel_eval_client, name):
            assert getattr(ours, name) is getattr(kernel_eval_client, name), (module, name)
    assert kernel_eval_client.__version__ == SIGNATURES["version"]


# --- the builder's keyword forms --------------------------------------------------------------

Step = Callable[[IOContractBuilder], IOContractBuilder]

# (the keyword form, the old client's form of the same thing)
SAME: dict[str, tuple[Step, Step]] = {
    "input by parts": (
        lambda b: b.add_input_tensor("x", shape=[1024], dtype="float32", init_kind="randn"),
        lambda b: b.add_input_tensor("x", create_tensor_spec([1024], "float32", "randn")),
    ),
    "input shape only": (
        lambda b: b.add_input_tensor("x", shape=[8]),
        lambda b: b.add_input_tensor("x", create_tensor_spec([8])),
    ),
    "input with init parameters": (
        lambda b: b.add_input_tensor(
            "x", shape=[8], dtype="float16", init_kind="uniform", seed=3, low=-1.0, high=1.0
        ),
        lambda b: b.add_input_tensor("x", create_uniform_spec([8], "float16", 3, -1.0, 1.0)),
    ),
    "input full, shape a tuple": (
        lambda b: b.add_input_tensor("x", shape=(2, 3), init_kind="full", fill_value=2.0),
        lambda b: b.add_input_tensor("x", create_full_spec([2, 3], 2.0)),
    ),
    "input spec as a dict": (
        lambda b: b.add_input_tensor("x", {"shape": [8], "init": {"kind": "ones"}}),
        lambda b: b.add_input_tensor("x", create_ones_spec([8])),
    ),
    "input spec by keyword": (
        lambda b: b.add_input_tensor(name="x", tensor_spec=create_randn_spec([4], seed=1)),
        lambda b: b.add_input_tensor("x", create_randn_spec([4], seed=1)),
    ),
    "inout by parts": (
        lambda b: b.add_inout_tensor("x", shape=[8], init_kind="arange", start=1.0, step=2.0),
        lambda b: b.add_inout_tensor("x", create_arange_spec([8], start=1.0, step=2.0)),
    ),
    "output by keyword": (
        lambda b: b.add_output_tensor("y", shape=[1024], dtype="float32"),
        lambda b: b.add_output_tensor("y", [1024], "float32"),
    ),
    "scalar with the docs' type=": (
        lambda b: b.add_scalar("alpha", type="float", value=2.0),
        lambda b: b.add_scalar("alpha", "float", 2.0),
    ),
    "meta param value=": (
        lambda b: b.add_meta_param("BLOCK_SIZE", value=256),
        lambda b: b.add_meta_param("BLOCK_SIZE", 256),
    ),
    "launch by keyword": (
        lambda b: b.set_launch_config(grid=(4, 1, 1), num_warps=4),
        lambda b: b.set_launch_config(LaunchConfig(grid=LaunchDim(x=4, y=1, z=1), num_warps=4)),
    ),
    "launch dims as int, list, dict": (
        lambda b: b.set_launch_config(grid=4, block=[128, 2], shared_mem_bytes=1024),
        lambda b: b.set_grid(4).set_block(128, 2).set_shared_mem(1024),
    ),
    "launch grid as a dict": (
        lambda b: b.set_launch_config(grid={"x": 2, "y": 3}, num_stages=2),
        lambda b: b.set_grid(2, 3).set_num_stages(2),
    ),
    "launch config as a dict": (
        lambda b: b.set_launch_config({"grid": {"x": 8}, "num_warps": 2}),
        lambda b: b.set_grid(8).set_num_warps(2),
    ),
    "launch config by keyword": (
        lambda b: b.set_launch_config(launch_config=LaunchConfig(grid=(16,))),
        lambda b: b.set_launch_config(LaunchConfig(grid=LaunchDim(x=16))),
    ),
}


@pytest.mark.parametrize("forms", SAME.values(), ids=SAME.keys())
def test_a_keyword_form_builds_what_the_old_form_builds(forms: tuple[Step, Step]) -> None:
    keyword_form, old_form = forms
    new, old = keyword_form(IOContractBuilder()).build(), old_form(IOContractBuilder()).build()
    assert new == old
    assert json.dumps(new.to_dict()) == json.dumps(old.to_dict())


# The old server's CLAUDE.md example, and the JSON the old models' to_dict() (pydantic's
# model_dump(exclude_none=True)) gave for its old-form twin: what goes on the wire.
DOCS_EXAMPLE_JSON = {
    "args": [
        {
            "name": "x",
            "type": "tensor",
            "tensor_spec": {"shape": [1024], "dtype": "float32", "init": {"kind": "randn"}},
            "role": "input",
            "is_meta": False,
        },
        {
            "name": "y",
            "type": "tensor",
            "tensor_spec": {"shape": [1024], "dtype": "float32"},
            "role": "output",
            "is_meta": False,
        },
        {"name": "BLOCK_SIZE", "type": "int", "value": 256, "role": "input", "is_meta": True},
    ],
    "launch": {"grid": {"x": 4, "y": 1, "z": 1}, "num_warps": 4},
}


def docs_example() -> IOContract:
    return (
        IOContractBuilder()
        .add_input_tensor("x", shape=[1024], dtype="float32", init_kind="randn")
        .add_output_tensor("y", shape=[1024], dtype="float32")
        .add_meta_param("BLOCK_SIZE", value=256)
        .set_launch_config(grid=(4, 1, 1), num_warps=4)
        .build()
    )


def old_form_example() -> IOContract:
    return (
        IOContractBuilder()
        .add_input_tensor("x", create_tensor_spec([1024], "float32", "randn"))
        .add_output_tensor("y", [1024], "float32")
        .add_meta_param("BLOCK_SIZE", 256)
        .set_launch_config(LaunchConfig(grid=LaunchDim(x=4, y=1, z=1), num_warps=4))
        .build()
    )


EXAMPLES = {"keyword form": docs_example, "old form": old_form_example}


def test_the_docs_example_builds_the_old_forms_json() -> None:
    assert docs_example() == old_form_example()
    assert json.dumps(docs_example().to_dict()) == json.dumps(DOCS_EXAMPLE_JSON)
    assert IOContract.from_dict(DOCS_EXAMPLE_JSON) == old_form_example()


# --- bad values: a clear error naming the field and why -------------------------------------

BAD: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "no spec": (
        lambda: IOContractBuilder().add_input_tensor("x"),
        TypeError,
        r"add_input_tensor\('x'\): needs a tensor_spec, or shape=",
    ),
    "a shape where the spec goes": (
        lambda: IOContractBuilder().add_input_tensor("x", [4]),
        TypeError,
        r"tensor_spec must be a TensorSpec or a dict, got list \[4\] \(to give a shape, write",
    ),
    "spec and parts": (
        lambda: IOContractBuilder().add_inout_tensor("x", create_ones_spec([4]), dtype="int32"),
        ValueError,
        r"add_inout_tensor\('x'\): give a tensor_spec or its parts \(dtype\), not both",
    ),
    "init parameter without a kind": (
        lambda: IOContractBuilder().add_input_tensor("x", shape=[4], seed=1, mean=2.0),
        ValueError,
        r"seed, mean are init parameters: give init_kind= too",
    ),
    "unknown init parameter": (
        lambda: IOContractBuilder().add_input_tensor("x", shape=[4], init_kind="randn", sd=1.0),
        TypeError,
        r"unknown init parameter 'sd'; an init takes mean, std, low, high",
    ),
    "shape a string": (
        lambda: IOContractBuilder().add_input_tensor("x", shape="1024"),
        TypeError,
        r"add_input_tensor\('x'\): TensorSpec.shape must be a list of ints, got str '1024'",
    ),
    "negative dimension": (
        lambda: IOContractBuilder().add_output_tensor("y", [4, -1]),
        ValueError,
        r"add_output_tensor\('y'\): TensorSpec.shape\[1\] must be >= 0, got -1",
    ),
    "fractional dimension": (
        lambda: create_randn_spec([4, 2.5]),
        TypeError,
        r"TensorSpec.shape\[1\] must be an int, got float 2.5",
    ),
    "grid of four": (
        lambda: IOContractBuilder().set_launch_config(grid=(1, 2, 3, 4)),
        ValueError,
        r"set_launch_config: LaunchConfig.grid takes 1 to 3 dimensions \(x, y, z\), got",
    ),
    "grid a string": (
        lambda: IOContractBuilder().set_launch_config(grid="4"),
        TypeError,
        r"LaunchConfig.grid must be a LaunchDim, a dict \{x, y, z\}, an int or 1 to 3 ints, got",
    ),
    "block of zero": (
        lambda: IOContractBuilder().set_block(128, 0),
        ValueError,
        r"set_block: LaunchConfig.block: LaunchDim.y must be >= 1, got 0",
    ),
    "config and fields": (
        lambda: IOContractBuilder().set_launch_config(LaunchConfig(), num_warps=4),
        ValueError,
        r"set_launch_config: give a launch_config or its fields \(num_warps\), not both",
    ),
    "num_warps a string": (
        lambda: IOContractBuilder().set_launch_config(num_warps="4"),
        TypeError,
        r"LaunchConfig.num_warps must be an int, got str '4'",
    ),
    "config an int": (
        lambda: IOContractBuilder().set_launch_config(4),
        TypeError,
        r"launch_config must be a LaunchConfig or a dict, got int 4",
    ),
    "unknown launch keyword": (
        lambda: IOContractBuilder().set_launch_config(warps=4),  # type: ignore[call-arg]
        TypeError,
        r"unexpected keyword argument 'warps'",
    ),
    "scalar without a value": (
        lambda: IOContractBuilder().add_scalar("n", "int"),
        TypeError,
        r"add_scalar\('n'\): needs a value",
    ),
    "scalar of a tensor type": (
        lambda: IOContractBuilder().add_scalar("n", type="tensor", value=1),
        ValueError,
        r"scalar_type must be one of \('int', 'float', 'str', 'bool'\), got 'tensor'",
    ),
    "nested model a list": (
        lambda: ArgSpec(name="x", tensor_spec=[4]),  # type: ignore[arg-type]
        TypeError,
        r"ArgSpec\('x'\).tensor_spec must be a TensorSpec or a dict, got list",
    ),
    "an argument None": (
        lambda: IOContract(args=[None]),  # type: ignore[list-item]
        TypeError,
        r"IOContract.args\[0\] must be an ArgSpec or a dict, got None",
    ),
    "metadata a list": (
        lambda: KernelCode(source_code="k", kernel_type="cuda", metadata=["k"]),  # type: ignore[arg-type]
        TypeError,
        r"KernelCode.metadata must be a dict or a \*KernelMetadata, got list",
    ),
    "multi_kernel without entry_point": (
        lambda: KernelCode(source_code="k", kernel_type="multi_kernel", metadata={})
        .get_typed_metadata(),
        ValueError,
        r"MultiKernelMetadata needs metadata.entry_point",
    ),
}  # fmt: skip


@pytest.mark.parametrize("bad", BAD.values(), ids=BAD.keys())
def test_bad_values_raise_naming_the_field(
    bad: tuple[Callable[[], object], type[Exception], str],
) -> None:
    call, error, message = bad
    with pytest.raises(error, match=message):
        call()


def test_shapes_and_dims_take_int_likes() -> None:
    # Whole floats (pydantic took them) and tuples become the JSON's ints and lists.
    spec = TensorSpec(shape=(2.0, 3), dtype="float32")
    assert spec.shape == [2, 3] and json.dumps(spec.shape) == "[2, 3]"
    assert LaunchConfig(grid=8, block=(32.0, 4)).to_dict() == {
        "grid": {"x": 8, "y": 1, "z": 1},
        "block": {"x": 32, "y": 4, "z": 1},
    }


# --- models: the old pydantic methods and typed metadata -------------------------------------


def test_models_dump_as_pydantic_did() -> None:
    kernel = KernelCode(source_code="k", kernel_type="triton", io=docs_example())
    dumped = kernel.model_dump()
    assert dumped["metadata"] is None and dumped["io"]["launch"]["block"] is None
    assert kernel.dict() == dumped  # pydantic v1's name, which the old manual used
    assert kernel.model_dump(exclude_none=True) == kernel.to_dict()
    assert KernelCode.model_validate(kernel.to_dict()) == kernel
    assert KernelCode.model_validate(kernel) is kernel
    assert TensorSpec.from_dict(d={"shape": [2]}) == TensorSpec(shape=[2])  # the old name, d


def test_typed_metadata_is_the_kernel_types_class() -> None:
    def typed(kind: str, metadata: Any) -> BaseKernelMetadata | None:
        return KernelCode(source_code="k", kernel_type=kind, metadata=metadata).get_typed_metadata()

    cuda = typed("cuda", {"kernel_name": "add", "compile_options": ["-O3"]})
    assert isinstance(cuda, CudaKernelMetadata)
    assert (cuda.kernel_name, cuda.backend, cuda.jitify) == ("add", "nvrtc", False)
    assert cuda.compile_options == ["-O3"]  # type: ignore[attr-defined]  # extra keys are kept
    assert typed("torch", {"function_name": "f"}) == TorchKernelMetadata(function_name="f")
    assert typed("triton", {}) == TritonKernelMetadata()
    assert typed("multi_kernel", {"entry_point": "run"}) == MultiKernelMetadata(entry_point="run")
    assert typed("torch_cuda", {"x": 1}) is None and typed("cuda", None) is None
    # A generic BaseKernelMetadata becomes the kernel type's class; a typed one is kept.
    assert typed("triton", BaseKernelMetadata(kernel_name="k")) == TritonKernelMetadata(
        kernel_name="k"
    )
    assert typed("torch", cuda) is cuda
    # Typed metadata goes on the wire as its dict.
    kernel = KernelCode(source_code="k", kernel_type="cuda", metadata=cuda)
    assert kernel.to_dict()["metadata"] == {
        "kernel_name": "add",
        "backend": "nvrtc",
        "jitify": False,
        "compile_options": ["-O3"],
    }


# --- the client: the old client's requests ---------------------------------------------------

STATS = {"mean": 1.0, "std": 0.1, "min": 0.9, "max": 1.2, "median": 1.0}
ANSWER = {
    "job_id": "j1",
    "status": "success",
    "kernel_exec_result": {"compiled": True, "correctness": True, "runtime_stats": STATS},
    "ref_runtime": STATS,
}
REF = KernelCode(source_code="class Model: ...", kernel_type=KernelType.TORCH)
TRITON_SOURCE = "@triton.jit\ndef k(x, y, BLOCK_SIZE: tl.constexpr): ..."
TRITON_JSON = {
    "source_code": TRITON_SOURCE,
    "kernel_type": "triton",
    "io": DOCS_EXAMPLE_JSON,
    "metadata": {"kernel_name": "k"},
}


def triton_kernel(form: str) -> KernelCode:
    """The docs example's kernel, its IOContract built in the keyword or the old form."""
    io = EXAMPLES[form]()
    return KernelCode(TRITON_SOURCE, KernelType.TRITON, io=io, metadata={"kernel_name": "k"})


def recording_client(**kwargs: Any) -> tuple[KernelEvalClient, list[httpx.Request]]:
    """A client whose requests are recorded and answered with ANSWER, sent nowhere."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=ANSWER)

    client = KernelEvalClient("http://old-server:8000/", **kwargs)
    client.session.close()
    client.session = httpx.Client(base_url=client.base_url, transport=httpx.MockTransport(answer))
    return client, sent


Call = Callable[[KernelEvalClient, KernelCode], object]

# (the old client's call with the kernel, method, path, the JSON body the old client sent)
CALLS: dict[str, tuple[Call, str, str, Any]] = {
    "compare": (
        lambda c, k: c.compare(REF, k),
        "POST", "/compare",
        {"ref_kernel": {"source_code": REF.source_code, "kernel_type": "torch"},
         "custom_kernel": TRITON_JSON, "num_trials": 100, "timeout": 120},
    ),
    "compare, dicts and keywords": (
        lambda c, k: c.compare(ref_kernel=REF.to_dict(), custom_kernel=k.to_dict(), num_trials=7,
                               timeout=30),
        "POST", "/compare",
        {"ref_kernel": {"source_code": REF.source_code, "kernel_type": "torch"},
         "custom_kernel": TRITON_JSON, "num_trials": 7, "timeout": 30},
    ),
    "evaluate": (
        lambda c, k: c.evaluate(k, 50),
        "POST", "/evaluate", {"kernel": TRITON_JSON, "num_trials": 50, "timeout": 120},
    ),
    "health_check": (lambda c, k: c.health_check(), "GET", "/health", None),
    "get_job_status": (lambda c, k: c.get_job_status("j1"), "GET", "/job/j1", None),
    "get_stats": (lambda c, k: c.get_stats(), "GET", "/stats", None),
    "cleanup_jobs": (lambda c, k: c.cleanup_jobs(), "POST", "/admin/cleanup-jobs", None),
}  # fmt: skip


@pytest.mark.parametrize("form", EXAMPLES)
@pytest.mark.parametrize("call", CALLS.values(), ids=CALLS.keys())
def test_the_client_sends_the_old_clients_request(
    call: tuple[Call, str, str, Any], form: str
) -> None:
    do, method_, path, body = call
    client, sent = recording_client()
    with client:
        do(client, triton_kernel(form))
    assert len(sent) == 1
    request = sent[0]
    assert (request.method, request.url.path, request.url.query) == (method_, path, b"")
    if body is None:
        assert request.content == b""
    else:
        assert json.loads(request.content) == body
        # The numbers as the old client wrote them: "timeout": 120, not 120.0.
        timeout = re.search(rb'"timeout": ?([0-9.]+)', request.content)
        assert timeout is not None and timeout[1] == str(body["timeout"]).encode()


def test_the_client_returns_what_the_old_client_returned() -> None:
    client, _ = recording_client(timeout=60)
    with client as entered:
        assert entered is client
        assert (client.base_url, client.timeout) == ("http://old-server:8000", 60)
        out = client.compare(REF, triton_kernel("old form"))
    assert isinstance(out["ref_runtime"], RuntimeStats) and out["ref_runtime"].mean == 1.0
    stats = out["kernel_exec_result"]["runtime_stats"]
    assert isinstance(stats, RuntimeStats) and stats.percentile_95 == 0.0
