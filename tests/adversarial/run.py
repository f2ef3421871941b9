"""Runs the adversarial corpus against a real `kforge serve` and prints a table.

    python tests/adversarial/run.py [--device cpu|cuda:0] [--json OUT]

The last line is `caught X/Y must-catch, passed A/B controls`; the exit status is 0 only
when every case ran as expected. Cases for a GPU are skipped on the cpu device.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from adversarial.corpus import CASES, Case, verdict
from integration.kforge_server import KforgeServer


def run_case(server: KforgeServer, case: Case) -> dict:
    with server.client() as c:
        start = time.monotonic()
        r = c.post("/compare", json=case.body)
        elapsed = time.monotonic() - start
    if r.status_code != 200:
        return {"name": case.name, "ok": False, "why": f"HTTP {r.status_code}: {r.text[:300]}"}
    result = r.json()["kernel_exec_result"]
    ok, why = verdict(case, result)
    return {
        "name": case.name,
        "kind": case.kind,
        "ok": ok,
        "why": why,
        "seconds": elapsed,
        "speedup": r.json().get("speedup"),
        "result": result,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    gpu = args.device != "cpu"
    cases = [c for c in CASES if c.device == "any" or c.device == ("gpu" if gpu else "cpu")]
    server = KforgeServer(devices=args.device).start()
    rows = []
    try:
        server.wait_ready(args.device)
        for case in cases:
            rows.append(run_case(server, case))
    finally:
        server.stop()
    width = max(len(r["name"]) for r in rows)
    print(f"{'case':<{width}}  {'kind':<10}  {'ok':<4}  outcome")
    for row in rows:
        print(
            f"{row['name']:<{width}}  {row.get('kind', '?'):<10}  "
            f"{'yes' if row['ok'] else 'NO':<4}  {row['why']}"
        )
    catch = [r for r in rows if r.get("kind") == "must_catch"]
    passes = [r for r in rows if r.get("kind") == "must_pass"]
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1, default=str))
    print(
        f"caught {sum(r['ok'] for r in catch)}/{len(catch)} must-catch, "
        f"passed {sum(r['ok'] for r in passes)}/{len(passes)} controls"
    )
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
