"""kforge's additions to the client: typed results, a batch of evaluations submitted at once,
the asyncio client, and jobs submitted without waiting (polled by id, as the old server's
GET /job/{id} allowed).

Run against a kforge server: python batch_and_async.py [http://host:8000]
"""

import asyncio
import os
import sys

from kforge_client import (
    AsyncKernelEvalClient,
    CompareJob,
    EvaluateJob,
    IOContractBuilder,
    KernelCode,
    KernelEvalClient,
    KernelType,
    create_randn_spec,
)

SERVER_URL = (sys.argv[1:] or [os.environ.get("KERNEL_EVAL_URL", "http://localhost:8000")])[0]

REFERENCE = KernelCode(
    source_code="import torch\nclass Model(torch.nn.Module):\n"
    "    def forward(self, x):\n        return torch.tanh(x)\n",
    kernel_type=KernelType.TORCH,
)


def candidate(expression: str, size: int) -> KernelCode:
    """A torch candidate computing `expression` of x, with a (size,) float32 input."""
    return KernelCode(
        source_code=f"import torch\ndef candidate(x):\n    return {expression}\n",
        kernel_type=KernelType.TORCH,
        io=IOContractBuilder().add_input_tensor("x", create_randn_spec([size])).build(),
        metadata={"function_name": "candidate"},
    )


def batch(client: KernelEvalClient) -> bool:
    """Several candidates at once: the server queues them and runs them on its devices."""
    print("A batch of candidates for tanh:")
    expressions = [
        "torch.tanh(x)",
        "2 * torch.sigmoid(2 * x) - 1",
        "(torch.exp(2 * x) - 1) / (torch.exp(2 * x) + 1)",
        "x",  # wrong
    ]
    items = [CompareJob(REFERENCE, candidate(e, 4096), num_trials=10) for e in expressions]
    results = client.run_batch(items)
    for expression, result in zip(expressions, results):
        r = result.kernel_exec_result
        verdict = f"{r.runtime:.4f} ms" if result.ok else f"wrong ({r.reason[:60]}...)"
        print(f"  {expression:48s} {verdict}")
    return [r.ok for r in results] == [True, True, True, False]


def submit_and_poll(client: KernelEvalClient) -> bool:
    print("Submit without waiting, then poll:")
    job_id = client.submit_evaluate(candidate("torch.tanh(x)", 1024), num_trials=10)
    status = client.get_job_status(job_id)
    print(f"  job {job_id}: {status['status']}")
    result = client.wait_for_job(job_id)
    print(f"  finished: {result.status}, runtime {result.kernel_exec_result.runtime:.4f} ms")
    return result.ok and client.job(job_id).status == "completed"


async def concurrently() -> bool:
    print("The asyncio client, several evaluations at once:")
    async with AsyncKernelEvalClient(SERVER_URL) as client:
        sizes = [256, 1024, 4096]
        results = await asyncio.gather(
            *(client.evaluate_result(candidate("torch.tanh(x)", n), num_trials=10) for n in sizes)
        )
        for n, result in zip(sizes, results):
            print(f"  n={n}: {result.kernel_exec_result.runtime:.4f} ms")
        batch_results = await client.run_batch([EvaluateJob(candidate("x * 2", 512))])
        health = await client.health_check()
    return all(r.ok for r in results) and batch_results[0].ok and health["status"] == "healthy"


def main() -> int:
    with KernelEvalClient(SERVER_URL) as client:
        checks = [batch(client), submit_and_poll(client)]
    checks.append(asyncio.run(concurrently()))
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
