"""Benchmarks against the tools a user would pick instead, measured side by side in one run.

    python benchmarks/run.py [--quick] [--backend cpu] [--only W1,W3] [--markdown FILE]

Prints one table (forward and gradient times, gradient/forward, compile time, the gradient's
tape memory where the system accounts for it, and the gradient's relative difference from
NumPy's hand-written adjoint), then dloop's gradient time over each peer's."""

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import w1_fori  # noqa: E402
import w2_newton  # noqa: E402
import w3_heat  # noqa: E402
import w4_raymarch  # noqa: E402

WORKLOADS = {"W1": w1_fori, "W2": w2_newton, "W3": w3_heat, "W4": w4_raymarch}


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes)")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "vulkan"])
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W3")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--markdown", default=None, help="also write the report to this file")
    args = parser.parse_args()
    import dloop as dl
    try:
        dl.config.update("backend", args.backend)
    except dl.DloopError as e:
        sys.exit(f"backend {args.backend!r} is not available in this version: {e}")
    repeats = args.repeats or (3 if args.quick else 7)
    chosen = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    start = time.perf_counter()
    rows = []
    for key in chosen:
        module = WORKLOADS[key]
        for label, *params in module.cases(args.quick):
            data = module.make_data(*params, np.random.default_rng(0))
            reference = module.numpy_adjoint(data).gradient()
            for system, make in module.SYSTEMS.items():
                in_process = system in ("dloop", "numpy-adjoint")
                measure = harness.measure if in_process else harness.measure_isolated
                row = measure(module.NAME, label, system, make, data, reference, repeats)
                rows.append(row)
                print(f"  {module.NAME} / {label} / {system}: "
                      f"{row.note or harness.fmt(row.gradient_s, 1e3) + ' ms'}", flush=True)
    report = "\n".join([f"machine: {machine()}; dloop backend {args.backend}; "
                        f"{'--quick; ' if args.quick else ''}median of {repeats} runs",
                        "", harness.table(rows), "", harness.ratios(rows), "",
                        f"total wall time {time.perf_counter() - start:.0f} s"])
    print("\n" + report)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("```\n" + report + "\n```\n")
    bad = [r for r in rows if r.system == "dloop" and (r.rel_diff is None or r.rel_diff > 1e-8)]
    if bad:
        print("dloop gradients that differ from NumPy's adjoint by more than 1e-8:",
              [(r.workload, r.case, r.rel_diff, r.note) for r in bad])
        sys.exit(1)


if __name__ == "__main__":
    main()
