"""The issue #12 targets, checked on a `kforge bench` report (bench.json) from a GPU host.

Prints one line per target and the benchmark table of every op; exit status 0 always (the
targets are reported, never asserted: performance is measured here, not tested).

  python3 bench/kernel_targets.py gpu-check-out/bench/bench.json [--tsv targets.tsv]

With --tsv, the target lines are also written as `target<TAB>measured<TAB>verdict`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# op -> minimum % of the measured copy bandwidth for v4 at the large size
BANDWIDTH_TARGETS = {"add": 90.0, "gelu": 90.0, "softmax": 85.0, "layer_norm": 85.0}
MHA_MAX_RATIO = 1.3  # v4 time / SDPA time, float16, large


def rows(op: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["kernel"]: row for row in op["rows"]}


def large_ms(row: dict[str, Any]) -> float | None:
    cell = row.get("sizes", {}).get("large", {})
    return cell.get("mean_ms")


def check(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) per target."""
    out = []
    copy = (report.get("peaks", {}).get("copy") or {}).get("gbs")
    out.append(("measured copy bandwidth (GB/s)", f"{copy:.0f}" if copy else "n/a", ""))
    for op in report["ops"]:
        r = rows(op)
        v4, torch = r.get("v4_optimized", {}), r.get("torch", {})
        name = op["op"]
        if not v4.get("correct"):
            out.append((f"{name} v4 correct at every size", "no", "MISSED: " + v4.get("error", "")))
            continue
        t4, tt = large_ms(v4), large_ms(torch)
        if t4 and tt:
            verdict = "ok" if t4 <= tt else f"MISSED by {100 * (t4 / tt - 1):.1f} %"
            out.append((f"{name} v4 >= torch eager (large)", f"{tt / t4:.2f}x", verdict))
        if name in BANDWIDTH_TARGETS:
            gbs = v4.get("sizes", {}).get("large", {}).get("gbs")
            if gbs and copy:
                pct = 100 * gbs / copy
                goal = BANDWIDTH_TARGETS[name]
                verdict = "ok" if pct >= goal else f"MISSED by {goal - pct:.1f} points"
                target = f"{name} v4 >= {goal:.0f} % of copy bandwidth"
                out.append((target, f"{pct:.1f} %", verdict))
        if name == "mha" and t4 and tt:
            ratio = t4 / tt
            verdict = "ok" if ratio <= MHA_MAX_RATIO else f"MISSED ({ratio:.2f}x)"
            target = f"mha v4 ({op['dtype']}) within {MHA_MAX_RATIO}x of SDPA"
            out.append((target, f"{ratio:.2f}x", verdict))
    return out


def table(op: dict[str, Any]) -> str:
    lines = [f"{op['op']} ({op['dtype']}): mean ms per size, Final, speedup vs torch; large GB/s"]
    for row in op["rows"]:
        cells = [row["sizes"].get(s, {}).get("mean_ms") for s in ("small", "medium", "large")]
        gbs = row["sizes"].get("large", {}).get("gbs")
        text = " ".join(f"{c:10.4g}" if c else "         -" for c in cells)
        final = row.get("final_ms")
        speedup = row.get("speedup")
        mark = "" if row.get("correct", True) else "  FAILED: " + str(row.get("error", ""))[:60]
        lines.append(
            f"  {row['kernel']:14} {text} {final or 0:10.4g} {speedup or 0:6.2f}x "
            f"{gbs or 0:8.0f}{mark}"
        )
    return "\n".join(lines)


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    print(f"device {report['device']} ({report['device_name']}), {report['runs']} runs per size")
    for op in report["ops"]:
        print(table(op))
    print()
    targets = check(report)
    for target, measured, verdict in targets:
        print(f"{target:48} {measured:>10}  {verdict}")
    if len(sys.argv) > 3 and sys.argv[2] == "--tsv":
        lines = ["\t".join(row) + "\n" for row in targets]
        Path(sys.argv[3]).write_text("".join(lines))


if __name__ == "__main__":
    main()
