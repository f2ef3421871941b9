"""KernelEvalClient (blocking) and AsyncKernelEvalClient: the HTTP clients.

The methods of the kernel evaluation server's client keep their names, arguments and return
values (dicts, with `ref_runtime` and `runtime_stats` as RuntimeStats): compare, evaluate,
health_check, get_job_status, get_stats, cleanup_jobs, close. kforge adds typed results
(compare_result, evaluate_result, job), submission without waiting (submit_evaluate,
submit_compare, wait_for_job, cancel_job), job listings (list_jobs, iter_jobs), batches
(run_batch, submit_batch), the workbench's sessions (list_workbench_sessions,
workbench_session), the kept bench reports (list_bench_reports, bench_report) and openapi().

A submit that the server answers with 202 (the job is still queued after the server's wait
bound) is polled until it finishes, so evaluate/compare always return a finished job. The
logic is in _protocol.py, as I/O-free operations the two clients drive.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any
from urllib.parse import quote

import httpx

from kforge_client import _protocol as op
from kforge_client._protocol import (
    DEFAULT_URL,
    BatchItem,
    Call,
    CompareJob,
    EvaluateJob,
    KernelEvalError,
    KernelLike,
    Operation,
    T,
)
from kforge_client.results import EvaluationResult, JobStatus

__all__ = [
    "AsyncKernelEvalClient",
    "BatchItem",
    "CompareJob",
    "EvaluateJob",
    "KernelEvalClient",
    "KernelEvalError",
]


class KernelEvalClient:
    """Blocking client of a kforge (or kernel evaluation) server.

    Example:
        with KernelEvalClient("http://localhost:8000") as client:
            result = client.compare(ref_kernel, custom_kernel, num_trials=100)
            print(result["kernel_exec_result"]["runtime"], result["ref_runtime"]["mean"])
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        timeout: float = 120,
        token: str | None = None,
        poll_interval: float = 0.5,
        *,
        retries: int = 5,
        max_retry_wait: float = 60.0,
    ) -> None:
        """timeout: the default job timeout in seconds (sent as `timeout`); token: the
        server's API token (sent as a Bearer token); poll_interval: seconds between polls;
        retries: how many times a request the server answers 429 or 503 is sent again, after
        its Retry-After (at most max_retry_wait seconds) or a backoff from 0.5 s doubling."""
        self._config = op.Config(
            base_url, timeout, token, poll_interval, retries=retries, max_retry_wait=max_retry_wait
        )
        self.base_url = self._config.base_url
        self.timeout = self._config.timeout
        self.session = httpx.Client(base_url=self.base_url, headers=self._config.headers)

    def _run(self, operation: Operation[T]) -> T:
        """Drives an operation with blocking I/O."""
        try:
            action = next(operation)
            while True:
                if isinstance(action, Call):
                    response = self.session.request(
                        action.method,
                        action.path,
                        json=action.json,
                        params=action.params,
                        timeout=action.timeout,
                    )
                    action = operation.send(response)
                else:
                    time.sleep(action.seconds)
                    action = operation.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def _get(self, path: str, timeout: float = 30) -> Any:
        return self._run(op.request_json(self._config, Call("GET", path, timeout=timeout)))

    # -- the old client's API ------------------------------------------------------------

    def compare(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Checks custom_kernel against ref_kernel and times both; waits for the result.
        options: kforge's request fields (atol, rtol, device, num_correct_trials, timing,
        seed, measure_performance, enable_device_metrics, ...)."""
        t = self._config.job_timeout(timeout)
        body = op.compare_body(ref_kernel, custom_kernel, num_trials, t, options)
        return op.with_runtime_stats(
            self._run(op.submit_and_wait(self._config, "/compare", body, t))
        )

    def evaluate(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Evaluates one kernel (with options["reference_kernel"], against a reference)."""
        t = self._config.job_timeout(timeout)
        body = op.evaluate_body(kernel, num_trials, t, options)
        return op.with_runtime_stats(
            self._run(op.submit_and_wait(self._config, "/evaluate", body, t))
        )

    def health_check(self) -> dict[str, Any]:
        return self._get("/health", timeout=10)  # type: ignore[no-any-return]

    def get_job_status(self, job_id: str) -> dict[str, Any]:
        return self._get(f"/job/{job_id}", timeout=10)  # type: ignore[no-any-return]

    def get_stats(self) -> dict[str, Any]:
        return self._get("/stats")  # type: ignore[no-any-return]

    def cleanup_jobs(
        self, max_age_hours: float | None = None, older_than_seconds: int | None = None
    ) -> dict[str, Any]:
        """Deletes finished jobs older than an age (default: the server's, 300 s). On a server
        with tokens, only an admin token may (403 otherwise)."""
        return self._run(op.cleanup(self._config, max_age_hours, older_than_seconds))

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> KernelEvalClient:
        return self

    def __exit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        self.close()

    # -- kforge: typed results, jobs, batches --------------------------------------------

    def compare_result(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> EvaluationResult:
        """compare, as a typed EvaluationResult."""
        return EvaluationResult.from_dict(
            self.compare(ref_kernel, custom_kernel, num_trials, timeout, **options)
        )

    def evaluate_result(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> EvaluationResult:
        """evaluate, as a typed EvaluationResult."""
        return EvaluationResult.from_dict(self.evaluate(kernel, num_trials, timeout, **options))

    def submit_evaluate(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> str:
        """Queues an evaluate and returns its job id at once (wait=false)."""
        body = op.evaluate_body(kernel, num_trials, self._config.job_timeout(timeout), options)
        return self._run(op.submit(self._config, "/evaluate", body))

    def submit_compare(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> str:
        """Queues a compare and returns its job id at once (wait=false)."""
        t = self._config.job_timeout(timeout)
        return self._run(
            op.submit(
                self._config,
                "/compare",
                op.compare_body(ref_kernel, custom_kernel, num_trials, t, options),
            )
        )

    def job(self, job_id: str) -> JobStatus:
        """GET /job/{id}, typed."""
        return JobStatus.from_dict(self.get_job_status(job_id))

    def wait_for_job(self, job_id: str, timeout: float | None = None) -> EvaluationResult:
        """Polls a job until it finishes. TimeoutError after `timeout` seconds (default: the
        client's timeout plus the server's queueing allowance)."""
        return EvaluationResult.from_dict(self._run(op.poll(self._config, job_id, timeout)))

    def list_jobs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        kernel_type: str | None = None,
        device: str | None = None,
        submitter: str | None = None,
        since: float | str | None = None,
        until: float | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of jobs, newest first (GET /jobs): {"jobs": [summary, ...], "next_cursor",
        "limit"}. Filters: status (a state or several), kernel_type (the candidate's), device,
        submitter, since/until (created_at, epoch seconds); pass next_cursor as cursor for the
        next page. A user token lists only its own jobs."""
        params = op.job_list_params(
            status=status, kernel_type=kernel_type, device=device, submitter=submitter,
            since=since, until=until, limit=limit, cursor=cursor,
        )  # fmt: skip
        return self._run(op.list_jobs(self._config, params))

    def iter_jobs(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every job list_jobs(**filters) selects, newest first, page after page."""
        cursor = filters.pop("cursor", None)
        while True:
            page = self.list_jobs(**filters, cursor=cursor)
            yield from page["jobs"]
            cursor = page["next_cursor"]
            if cursor is None:
                return

    def cancel_job(self, job_id: str, reason: str | None = None) -> JobStatus:
        """Cancels a queued or running job; returns it once it has ended."""
        return JobStatus.from_dict(self._run(op.cancel(self._config, job_id, reason)))

    def submit_batch(self, items: Sequence[BatchItem]) -> list[str]:
        """Queues every item without waiting; returns their job ids in order."""
        return self._run(op.submit_batch(self._config, items))

    def run_batch(
        self, items: Sequence[BatchItem], timeout: float | None = None
    ) -> list[EvaluationResult]:
        """Queues every item, then waits for all of them; results in the items' order. The
        server runs them on its devices in parallel; `timeout` bounds the whole wait."""
        answers = self._run(op.run_batch(self._config, items, timeout))
        return [EvaluationResult.from_dict(a) for a in answers]

    def openapi(self) -> dict[str, Any]:
        """The server's OpenAPI document (GET /openapi.json)."""
        return self._get("/openapi.json", timeout=10)  # type: ignore[no-any-return]

    def list_workbench_sessions(
        self,
        *,
        state: str | Sequence[str] | None = None,
        kernel_name: str | None = None,
        owner: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        """One page of the Triton workbench's sessions, most recently updated first (GET
        /workbench/sessions): {"sessions": [summary, ...], "next_cursor", "limit"}. Filters:
        state (one or several of start, write, evaluation, end), kernel_name, owner. A user
        token lists only its own sessions."""
        params = op.listing_params(
            state=state, kernel_name=kernel_name, owner=owner, limit=limit, cursor=cursor
        )
        return self._run(op.get_resource(self._config, "/workbench/sessions", params))

    def workbench_session(self, session_id: str) -> dict[str, Any]:
        """A session: state, versions (source, results), history and its Markdown log."""
        path = f"/workbench/sessions/{quote(session_id, safe='')}"
        return self._run(op.get_resource(self._config, path))

    def list_bench_reports(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """One page of the bench reports the server kept, newest first (GET /bench/reports):
        {"reports": [summary, ...], "next_cursor", "limit"}."""
        params = op.listing_params(limit=limit, cursor=cursor)
        return self._run(op.get_resource(self._config, "/bench/reports", params))

    def bench_report(self, report_id: str) -> dict[str, Any]:
        """A kept bench report: its summary, `report` (bench.json) and `files`."""
        path = f"/bench/reports/{quote(report_id, safe='')}"
        return self._run(op.get_resource(self._config, path))


class AsyncKernelEvalClient:
    """The asyncio twin of KernelEvalClient: the same methods, awaited.

    Example:
        async with AsyncKernelEvalClient("http://localhost:8000") as client:
            results = await asyncio.gather(*(client.evaluate(k) for k in kernels))
    """

    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        timeout: float = 120,
        token: str | None = None,
        poll_interval: float = 0.5,
        *,
        retries: int = 5,
        max_retry_wait: float = 60.0,
    ) -> None:
        """The arguments of KernelEvalClient."""
        self._config = op.Config(
            base_url, timeout, token, poll_interval, retries=retries, max_retry_wait=max_retry_wait
        )
        self.base_url = self._config.base_url
        self.timeout = self._config.timeout
        self.session = httpx.AsyncClient(base_url=self.base_url, headers=self._config.headers)

    async def _run(self, operation: Operation[T]) -> T:
        """Drives an operation with asyncio."""
        try:
            action = next(operation)
            while True:
                if isinstance(action, Call):
                    response = await self.session.request(
                        action.method,
                        action.path,
                        json=action.json,
                        params=action.params,
                        timeout=action.timeout,
                    )
                    action = operation.send(response)
                else:
                    await asyncio.sleep(action.seconds)
                    action = operation.send(None)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def _get(self, path: str, timeout: float = 30) -> Any:
        return await self._run(op.request_json(self._config, Call("GET", path, timeout=timeout)))

    async def compare(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        t = self._config.job_timeout(timeout)
        body = op.compare_body(ref_kernel, custom_kernel, num_trials, t, options)
        return op.with_runtime_stats(
            await self._run(op.submit_and_wait(self._config, "/compare", body, t))
        )

    async def evaluate(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        t = self._config.job_timeout(timeout)
        body = op.evaluate_body(kernel, num_trials, t, options)
        return op.with_runtime_stats(
            await self._run(op.submit_and_wait(self._config, "/evaluate", body, t))
        )

    async def health_check(self) -> dict[str, Any]:
        return await self._get("/health", timeout=10)  # type: ignore[no-any-return]

    async def get_job_status(self, job_id: str) -> dict[str, Any]:
        return await self._get(f"/job/{job_id}", timeout=10)  # type: ignore[no-any-return]

    async def get_stats(self) -> dict[str, Any]:
        return await self._get("/stats")  # type: ignore[no-any-return]

    async def cleanup_jobs(
        self, max_age_hours: float | None = None, older_than_seconds: int | None = None
    ) -> dict[str, Any]:
        return await self._run(op.cleanup(self._config, max_age_hours, older_than_seconds))

    async def aclose(self) -> None:
        await self.session.aclose()

    async def close(self) -> None:
        await self.aclose()

    async def __aenter__(self) -> AsyncKernelEvalClient:
        return self

    async def __aexit__(self, exc_type: object, exc_val: object, exc_tb: object) -> None:
        await self.aclose()

    async def compare_result(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> EvaluationResult:
        return EvaluationResult.from_dict(
            await self.compare(ref_kernel, custom_kernel, num_trials, timeout, **options)
        )

    async def evaluate_result(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> EvaluationResult:
        return EvaluationResult.from_dict(
            await self.evaluate(kernel, num_trials, timeout, **options)
        )

    async def submit_evaluate(
        self,
        kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> str:
        body = op.evaluate_body(kernel, num_trials, self._config.job_timeout(timeout), options)
        return await self._run(op.submit(self._config, "/evaluate", body))

    async def submit_compare(
        self,
        ref_kernel: KernelLike,
        custom_kernel: KernelLike,
        num_trials: int = 100,
        timeout: float | None = None,
        **options: Any,
    ) -> str:
        t = self._config.job_timeout(timeout)
        return await self._run(
            op.submit(
                self._config,
                "/compare",
                op.compare_body(ref_kernel, custom_kernel, num_trials, t, options),
            )
        )

    async def job(self, job_id: str) -> JobStatus:
        return JobStatus.from_dict(await self.get_job_status(job_id))

    async def wait_for_job(self, job_id: str, timeout: float | None = None) -> EvaluationResult:
        return EvaluationResult.from_dict(await self._run(op.poll(self._config, job_id, timeout)))

    async def list_jobs(
        self,
        *,
        status: str | Sequence[str] | None = None,
        kernel_type: str | None = None,
        device: str | None = None,
        submitter: str | None = None,
        since: float | str | None = None,
        until: float | str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params = op.job_list_params(
            status=status, kernel_type=kernel_type, device=device, submitter=submitter,
            since=since, until=until, limit=limit, cursor=cursor,
        )  # fmt: skip
        return await self._run(op.list_jobs(self._config, params))

    async def iter_jobs(self, **filters: Any) -> AsyncIterator[dict[str, Any]]:
        cursor = filters.pop("cursor", None)
        while True:
            page = await self.list_jobs(**filters, cursor=cursor)
            for job in page["jobs"]:
                yield job
            cursor = page["next_cursor"]
            if cursor is None:
                return

    async def cancel_job(self, job_id: str, reason: str | None = None) -> JobStatus:
        return JobStatus.from_dict(await self._run(op.cancel(self._config, job_id, reason)))

    async def submit_batch(self, items: Sequence[BatchItem]) -> list[str]:
        return await self._run(op.submit_batch(self._config, items))

    async def run_batch(
        self, items: Sequence[BatchItem], timeout: float | None = None
    ) -> list[EvaluationResult]:
        answers = await self._run(op.run_batch(self._config, items, timeout))
        return [EvaluationResult.from_dict(a) for a in answers]

    async def openapi(self) -> dict[str, Any]:
        return await self._get("/openapi.json", timeout=10)  # type: ignore[no-any-return]

    async def list_workbench_sessions(
        self,
        *,
        state: str | Sequence[str] | None = None,
        kernel_name: str | None = None,
        owner: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> dict[str, Any]:
        params = op.listing_params(
            state=state, kernel_name=kernel_name, owner=owner, limit=limit, cursor=cursor
        )
        return await self._run(op.get_resource(self._config, "/workbench/sessions", params))

    async def workbench_session(self, session_id: str) -> dict[str, Any]:
        path = f"/workbench/sessions/{quote(session_id, safe='')}"
        return await self._run(op.get_resource(self._config, path))

    async def list_bench_reports(
        self, *, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        params = op.listing_params(limit=limit, cursor=cursor)
        return await self._run(op.get_resource(self._config, "/bench/reports", params))

    async def bench_report(self, report_id: str) -> dict[str, Any]:
        path = f"/bench/reports/{quote(report_id, safe='')}"
        return await self._run(op.get_resource(self._config, path))
