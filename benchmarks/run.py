"""Benchmarks against the tools a user would pick instead, measured side by side in one run.

    python benchmarks/run.py [--quick] [--backend cpu|cuda] [--dtype float32|float64|both]
                             [--only W1,W3] [--systems dloop,jax-masked] [--markdown FILE]
    python benchmarks/run.py --backend cuda --dry-run     # the GPU run's code, on the CPU

Prints one table (forward and gradient times, gradient/forward, compile time, the gradient's
tape memory where the system accounts for it, and the gradient's relative difference from
NumPy's hand-written adjoint), then dloop's gradient time over each peer's, for the `dloop`
row (tracing at every call) and the `dloop-once` row (retrace=False: traced at the first
call only, docs/guide.md section 7).

With --backend cuda every system runs on the GPU in its own spawned process (CUDA cannot be
used in a child forked from a process that used it), beside the hand-written CuPy bound for
W1 and the bandwidth bound on W1's tape; peers get 60 s per case. --dry-run runs the same
code on tiny cases with every peer on the CPU (JAX CPU, torch CPU, Dr.Jit LLVM, Quadrants
CPU), the bound's kernels emulated in NumPy and dloop on the CPU when it has no cuda backend."""

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu  # noqa: E402
import gpu_bound  # noqa: E402
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


def systems(module, cuda):
    """The module's systems; on the GPU without the NumPy adjoint (a CPU figure; it stays the
    reference) and Warp (not among the GPU peers), with the hand-written bound for W1."""
    chosen = dict(module.SYSTEMS)
    if cuda:
        chosen.pop("numpy-adjoint")
        chosen.pop("warp", None)
        if module is w1_fori:
            chosen.update(gpu_bound.SYSTEMS)
    return chosen


def choose_backend(args):
    """dloop's backend for the run, and a note when the dry run had to fall back to cpu."""
    import dloop as dl
    try:
        dl.config.update("backend", args.backend)
        return args.backend, ""
    except dl.DloopError as e:
        if not args.dry_run:
            sys.exit(f"backend {args.backend!r} is not available in this version: {e}")
        dl.config.update("backend", "cpu")
        return "cpu", f"dloop on cpu: no {args.backend} backend here; "


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (under 2 minutes)")
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda", "vulkan"])
    parser.add_argument("--dtype", default=None, choices=["float32", "float64", "both"],
                        help="the data's precision (default: float64 on cpu, both on cuda)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --backend cuda: the GPU run's code on tiny cases, on the CPU")
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W3")
    parser.add_argument("--systems", default="", help="comma-separated systems to run")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--markdown", default=None, help="also write the report to this file")
    args = parser.parse_args()
    if args.dry_run and args.backend != "cuda":
        parser.error("--dry-run is for --backend cuda")
    return args


def main():
    args = parse()
    cuda = args.backend == "cuda"
    backend, fallback = choose_backend(args)
    harness.SETTINGS = harness.Settings("cuda" if cuda and not args.dry_run else "cpu", backend)
    scale = "tiny" if args.dry_run else "quick" if args.quick else "gpu" if cuda else "full"
    repeats = args.repeats or (3 if args.quick or args.dry_run else 5 if cuda else 7)
    dtype = args.dtype or ("both" if cuda else "float64")
    precisions = ["float64", "float32"] if dtype == "both" else [dtype]
    chosen = [w for w in WORKLOADS if not args.only or w in args.only.split(",")]
    device = gpu.info() if cuda else None
    start = time.perf_counter()
    rows = []
    for key in chosen:
        module = WORKLOADS[key]
        for label, *params in module.cases(scale):
            raw = module.make_data(*params, np.random.default_rng(0))
            for precision in precisions:
                case = label if precisions == ["float64"] and not cuda else \
                    f"{label}, {precision[:1]}{precision[-2:]}"
                rows += run_case(module, case, raw, precision, args, repeats, device)
    head = (f"GPU: {gpu.describe(device)}\n" if cuda else "") + \
        (f"machine: {machine()}; dloop backend {backend}; {fallback}"
         f"{'--quick; ' if args.quick else ''}{'--dry-run; ' if args.dry_run else ''}"
         f"median of at least {repeats} runs and {harness.MIN_TIMED_S} s of them")
    missing = gpu.missing_gpu_names() if args.dry_run else []
    if args.dry_run:
        head += "\nnames only the GPU run uses: " + \
            (f"MISSING {', '.join(missing)}" if missing else "all found")
    parts = [head, "", harness.table(rows), "", harness.ratios(rows)]
    if cuda:
        parts += ["", "targets (the issue's: W1 float64 at N = 10^6 against the hand-written "
                  "bound, at N = 10^7 against the bandwidth bound)", gpu.targets(rows)]
    report = "\n".join(parts + ["", f"total wall time {time.perf_counter() - start:.0f} s"])
    print("\n" + report)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("```\n" + report + "\n```\n")
    bad = [r for r in rows if r.system.startswith("dloop") and not r.correct()]
    if bad:
        print("dloop gradients that differ from NumPy's adjoint by more than the gate "
              f"{harness.GATE}:", [(r.workload, r.case, r.rel_diff, r.note) for r in bad])
        sys.exit(1)
    if missing:
        sys.exit(1)


def run_case(module, case, raw, precision, args, repeats, device):
    """Every chosen system's row on one case in one precision; on the GPU, W1's bandwidth
    bound after them."""
    cuda = args.backend == "cuda"
    data, reference_data = harness.prepare(raw, precision)
    reference = module.numpy_adjoint(reference_data).gradient()
    rows = [measure(module, case, system, make, data, reference, repeats, cuda)
            for system, make in systems(module, cuda).items()
            if not args.systems or system in args.systems.split(",")]
    if cuda and hasattr(module, "tape_bytes"):
        rows.append(gpu.bandwidth_row(module.NAME, case, precision, module.tape_bytes(data),
                                      device))
    return rows


def measure(module, case, system, make, data, reference, repeats, cuda):
    """In this process on the CPU for dloop and NumPy, as before; everything else, and
    everything on the GPU, in a child, peers limited to 60 s per case on the GPU (dloop and
    the bound to 180 s: one stuck case must not take the whole run's time)."""
    args = (module.NAME, case, system, make, data, reference, repeats)
    if not cuda and (system.startswith("dloop") or system == "numpy-adjoint"):
        row = harness.measure(*args)
    elif cuda:
        ours = system.startswith("dloop") or system.startswith("cupy-bound")
        row = harness.measure_isolated(*args, timeout=180 if ours else 60, method="spawn")
    else:
        row = harness.measure_isolated(*args)
    print(f"  {module.NAME} / {case} / {system}: "
          f"{row.note or harness.fmt(row.gradient_s, 1e3) + ' ms'}", flush=True)
    return row


if __name__ == "__main__":
    main()
