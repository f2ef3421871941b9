"""What the clients say to the server, without doing I/O.

Every client call is an operation: a generator that yields what it needs done — a `Call` (an
HTTP request; the driver sends back the httpx.Response) or a `Sleep` — and returns the call's
value. KernelEvalClient drives operations with blocking I/O and AsyncKernelEvalClient with
asyncio, so the logic (request bodies, answers, polling, batches) exists once.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import httpx

from kforge_client.models import KernelCode, RuntimeStats, as_kernel_dict
from kforge_client.results import JobStatus

__all__ = ["BatchItem", "CompareJob", "EvaluateJob", "KernelEvalError"]

DEFAULT_URL = "http://localhost:8000"
# The server waits up to the job's timeout plus this allowance for queueing before it
# answers 202 (docs/rest-api.md "Waiting and polling").
SERVER_QUEUE_ALLOWANCE_S = 600.0
# The most candidates one POST /batch takes (the server's RequestLimits::max_batch_candidates).
MAX_BATCH_CANDIDATES = 64

KernelLike = Union[KernelCode, dict[str, Any]]
T = TypeVar("T")


@dataclass(frozen=True)
class Call:
    """An HTTP request to make; the driver answers with the httpx.Response."""

    method: str
    path: str
    json: Any = None
    params: dict[str, str] | None = None
    timeout: httpx.Timeout | float = 30.0


@dataclass(frozen=True)
class Sleep:
    seconds: float


Operation = Generator[Union[Call, Sleep], Any, T]


class KernelEvalError(httpx.HTTPStatusError):
    """The server refused a request (4xx) or failed (5xx). `field` names the offending
    request field when the server said which one; `body` is the server's error answer."""

    def __init__(self, response: httpx.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            body = {"error": response.text}
        if not isinstance(body, dict):
            body = {"error": str(body)}
        self.body: dict[str, Any] = body
        self.status_code = response.status_code
        self.field: str | None = body.get("field")
        message = body.get("error") or body.get("detail") or response.reason_phrase
        super().__init__(
            f"HTTP {response.status_code}: {message}", request=response.request, response=response
        )


@dataclass
class EvaluateJob:
    """One evaluate of a batch (the arguments of KernelEvalClient.evaluate)."""

    kernel: KernelLike
    num_trials: int = 100
    timeout: float | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class CompareJob:
    """One compare of a batch (the arguments of KernelEvalClient.compare)."""

    ref_kernel: KernelLike
    custom_kernel: KernelLike
    num_trials: int = 100
    timeout: float | None = None
    options: dict[str, Any] = field(default_factory=dict)


BatchItem = Union[EvaluateJob, CompareJob]


# Statuses that mean "not now" without accepting the request (rate limited; overloaded,
# draining or starting): sent again after the server's Retry-After, else with backoff.
RETRY_STATUSES = (429, 503)
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0


class Config:
    """A client's settings."""

    def __init__(
        self,
        base_url: str,
        timeout: float,
        token: str | None,
        poll_interval: float,
        *,
        retries: int = 5,
        max_retry_wait: float = 60.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        if poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, got {poll_interval}")
        if retries < 0:
            raise ValueError(f"retries must be 0 or more, got {retries}")
        if max_retry_wait <= 0:
            raise ValueError(f"max_retry_wait must be positive, got {max_retry_wait}")
        self.base_url = base_url.rstrip("/")
        # Kept as given (an int stays an int), so the request's "timeout" is written as the
        # old client wrote it: 120, not 120.0.
        self.timeout = timeout
        self.poll_interval = float(poll_interval)
        self.retries = int(retries)
        self.max_retry_wait = float(max_retry_wait)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}

    def job_timeout(self, timeout: float | None) -> float:
        """The job's timeout: the call's, else the client's (a timeout of 0 too, as the old
        client's `timeout or self.timeout`)."""
        return timeout if timeout else self.timeout

    def wait_bound(self, timeout: float | None = None) -> float:
        """How long a client waits for a job: its timeout, the server's queueing allowance
        and a margin."""
        return self.job_timeout(timeout) + SERVER_QUEUE_ALLOWANCE_S + 30.0


def evaluate_body(
    kernel: KernelLike, num_trials: int, timeout: float, options: dict[str, Any]
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kernel": as_kernel_dict(kernel),
        "num_trials": num_trials,
        "timeout": timeout,
    }
    if options.get("reference_kernel") is not None:
        options = {**options, "reference_kernel": as_kernel_dict(options["reference_kernel"])}
    body.update({k: v for k, v in options.items() if v is not None})
    return body


def compare_body(
    ref_kernel: KernelLike,
    custom_kernel: KernelLike,
    num_trials: int,
    timeout: float,
    options: dict[str, Any],
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "ref_kernel": as_kernel_dict(ref_kernel),
        "custom_kernel": as_kernel_dict(custom_kernel),
        "num_trials": num_trials,
        "timeout": timeout,
    }
    body.update({k: v for k, v in options.items() if v is not None})
    return body


def batch_request(item: BatchItem, config: Config) -> tuple[str, dict[str, Any], float]:
    """(path, body, job timeout) of a batch item."""
    timeout = config.job_timeout(item.timeout)
    if isinstance(item, EvaluateJob):
        return (
            "/evaluate",
            evaluate_body(item.kernel, item.num_trials, timeout, item.options),
            timeout,
        )
    if isinstance(item, CompareJob):
        body = compare_body(
            item.ref_kernel, item.custom_kernel, item.num_trials, timeout, item.options
        )
        return "/compare", body, timeout
    raise TypeError(f"a batch item is an EvaluateJob or a CompareJob, got {type(item).__name__}")


def with_runtime_stats(result: dict[str, Any]) -> dict[str, Any]:
    """The old client's return value: ref_runtime and runtime_stats as RuntimeStats."""
    if isinstance(result.get("ref_runtime"), dict):
        result["ref_runtime"] = RuntimeStats.from_dict(result["ref_runtime"])
    exec_result = result.get("kernel_exec_result")
    if isinstance(exec_result, dict) and isinstance(exec_result.get("runtime_stats"), dict):
        exec_result["runtime_stats"] = RuntimeStats.from_dict(exec_result["runtime_stats"])
    return result


def finished_answer(view: dict[str, Any]) -> dict[str, Any]:
    """A finished job read from GET /job/{id} in the shape of a submit's answer (status
    "success" when the evaluation reached a verdict, else "error")."""
    answer = dict(view)
    answer["status"] = "success" if view.get("state") == "success" else "error"
    answer.pop("message", None)
    return answer


def check(response: httpx.Response) -> Any:
    """The answer's JSON; KernelEvalError for an error status."""
    if response.status_code >= 400:
        raise KernelEvalError(response)
    return response.json()


# -- operations ---------------------------------------------------------------------------


def retry_after_s(response: httpx.Response, attempt: int) -> float:
    """How long to wait before sending again: the server's Retry-After (seconds, or an HTTP
    date), else FIRST_BACKOFF_S doubled per attempt, at most MAX_BACKOFF_S."""
    header = response.headers.get("Retry-After", "").strip()
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(header).timestamp() - time.time())
    except (TypeError, ValueError):  # absent, or neither seconds nor an HTTP date
        return min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2.0**attempt)


def send(config: Config, call: Call) -> Operation[httpx.Response]:
    """The response to `call`, sent again (at most config.retries times) while the server
    answers 429 or 503, after its Retry-After (at most config.max_retry_wait) or backoff. The
    last answer is returned as it is (an error status raises in `check`)."""
    attempt = 0
    while True:
        response = yield call
        if response.status_code not in RETRY_STATUSES or attempt >= config.retries:
            return response  # type: ignore[no-any-return]
        yield Sleep(min(retry_after_s(response, attempt), config.max_retry_wait))
        attempt += 1


def request_json(config: Config, call: Call) -> Operation[Any]:
    return check((yield from send(config, call)))


def submit(config: Config, path: str, body: dict[str, Any]) -> Operation[str]:
    """Queues a job without waiting; its id."""
    answer = yield from request_json(config, Call("POST", path, body, params={"wait": "false"}))
    return str(answer["job_id"])


def poll(config: Config, job_id: str, timeout: float | None) -> Operation[dict[str, Any]]:
    """GET /job/{id} until the job finishes; the finished job as a submit's answer."""
    deadline = time.monotonic() + (timeout or config.wait_bound())
    while True:
        view = yield from request_json(config, Call("GET", f"/job/{job_id}", timeout=10))
        if JobStatus.from_dict(view).done:
            return finished_answer(view)
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} is still {view.get('status')}")
        yield Sleep(config.poll_interval)


def submit_and_wait(
    config: Config, path: str, body: dict[str, Any], timeout: float
) -> Operation[dict[str, Any]]:
    """Submits and waits for the answer; a 202 (still queued after the server's wait bound)
    is polled to the end."""
    http_timeout = httpx.Timeout(10.0, read=config.wait_bound(timeout))
    response = yield from send(config, Call("POST", path, body, timeout=http_timeout))
    answer = check(response)
    if response.status_code == 202:
        return (yield from poll(config, str(answer["job_id"]), None))
    return answer  # type: ignore[no-any-return]


def one_problem_body(config: Config, items: Sequence[BatchItem]) -> dict[str, Any] | None:
    """The POST /batch body when `items` are compares of one reference with the same settings
    (one problem's candidates: the server computes the reference once for all); else None."""
    if not items or not all(isinstance(i, CompareJob) for i in items):
        return None
    first = items[0]
    assert isinstance(first, CompareJob)
    bodies = [batch_request(i, config)[1] for i in items]
    shared = {k: v for k, v in bodies[0].items() if k != "custom_kernel"}
    if any({k: v for k, v in b.items() if k != "custom_kernel"} != shared for b in bodies):
        return None
    if len(items) > MAX_BATCH_CANDIDATES:
        return None
    return {**shared, "candidates": [b["custom_kernel"] for b in bodies]}


def submit_batch(config: Config, items: Sequence[BatchItem]) -> Operation[list[str]]:
    """Queues every item without waiting; their job ids in order. One problem's compares go
    in one POST /batch; anything else as one request per item."""
    body = one_problem_body(config, items)
    if body is not None:
        answer = yield from request_json(
            config, Call("POST", "/batch", body, params={"wait": "false"})
        )
        return [str(j) for j in answer["jobs"]]
    ids = []
    for item in items:
        path, body, _ = batch_request(item, config)
        ids.append((yield from submit(config, path, body)))
    return ids


def run_batch(
    config: Config, items: Sequence[BatchItem], timeout: float | None
) -> Operation[list[dict[str, Any]]]:
    """Queues every item, then polls them all until each has finished; answers in order."""
    ids = yield from submit_batch(config, items)
    deadline = time.monotonic() + (timeout or config.wait_bound())
    done: dict[str, dict[str, Any]] = {}
    while True:
        for job_id in ids:
            if job_id not in done:
                view = yield from request_json(config, Call("GET", f"/job/{job_id}", timeout=10))
                if JobStatus.from_dict(view).done:
                    done[job_id] = finished_answer(view)
        if len(done) == len(ids):
            return [done[job_id] for job_id in ids]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(ids) - len(done)} batch job(s) did not finish")
        yield Sleep(config.poll_interval)


def cleanup(
    config: Config, max_age_hours: float | None, older_than_seconds: int | None
) -> Operation[Any]:
    body = {"max_age_hours": max_age_hours, "older_than_seconds": older_than_seconds}
    body = {k: v for k, v in body.items() if v is not None}
    return (yield from request_json(config, Call("POST", "/admin/cleanup-jobs", body or None)))


def job_list_params(
    *,
    status: str | Sequence[str] | None,
    kernel_type: str | None,
    device: str | None,
    submitter: str | None,
    since: float | str | None,
    until: float | str | None,
    limit: int | None,
    cursor: str | None,
) -> dict[str, str]:
    """GET /jobs' query parameters; `status` a state or several, times as epoch seconds (or
    ISO 8601 text). None leaves a filter out."""
    if status is not None and not isinstance(status, str):
        status = ",".join(status)
    given = {"status": status, "kernel_type": kernel_type, "device": device,
             "submitter": submitter, "since": since, "until": until, "limit": limit,
             "cursor": cursor}  # fmt: skip
    return {k: str(v) for k, v in given.items() if v is not None}


def list_jobs(config: Config, params: dict[str, str]) -> Operation[Any]:
    """One page of GET /jobs: {"jobs": [...], "next_cursor": str | None, "limit": int}."""
    return (yield from request_json(config, Call("GET", "/jobs", params=params)))


def listing_params(**given: str | Sequence[str] | int | None) -> dict[str, str]:
    """A listing's query parameters (GET /workbench/sessions, /bench/reports): None leaves
    one out, a sequence is joined with commas."""
    out = {}
    for key, value in given.items():
        if value is None:
            continue
        out[key] = value if isinstance(value, str) else (
            ",".join(value) if isinstance(value, Sequence) else str(value)
        )  # fmt: skip
    return out


def get_resource(config: Config, path: str, params: dict[str, str] | None = None) -> Operation[Any]:
    """GET one of the read-only resources (a listing page, a session, a bench report)."""
    return (yield from request_json(config, Call("GET", path, params=params)))


def cancel(config: Config, job_id: str, reason: str | None) -> Operation[Any]:
    body = {"reason": reason} if reason else None
    call = Call("POST", f"/job/{job_id}/cancel", body, timeout=60)
    return (yield from request_json(config, call))
