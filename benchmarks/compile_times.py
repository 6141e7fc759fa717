"""Compile time per workload: the first forward and gradient calls' excess over the steady
state, in a fresh process with an empty kernel cache (cold), then in a second fresh process
that finds the first one's binaries on disk (warm from disk).

    python benchmarks/compile_times.py [--backend cpu|vulkan] [--scale tiny|quick|full]
                                       [--only W1,W3] [--markdown FILE]

Each workload's first case runs dloop's own impl of benchmarks/w*.py. A call's excess is its
first time minus the median of 3 later calls. Kernels are the backend's compile_count (built,
not found in a cache); disk loads are artifacts made from cached bytes. The excess is split
into phases by timing the compile stage's functions in the child (schedule, lower, legalize,
render, build: LLVM O3 and object emission on the cpu, load: JIT linking, disk: reading and
verifying a cache entry, drivers: the cpu's collective step drivers, compiled in every
process and never cached; trace: its first call's excess over later ones, mostly modules
imported at first use), each as its first-call time less its median in the later calls;
"other" is the rest: AD transforms, graph checks, the backend's first-use setup, and on
Vulkan the driver's own compile (lavapipe compiles a pipeline at its first dispatch).
Per kernel is the cold excess over the kernels and drivers built; the target is 0.3 s."""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
from run import WORKLOADS, machine  # noqa: E402

TARGET_S = 0.3
REPEATS = 3
PHASES = ("trace", "schedule", "lower", "legalize", "render", "build", "load", "disk", "drivers")


# -- the child: one workload, one cache directory, one fresh process --

def _instrument(backend, times, counts):
    """Wrap the compile stage's functions so that each call adds its time to times[phase]."""
    import dloop.api as api
    import dloop.runtime.cache as cache
    import dloop.runtime.program as program

    def timed(phase, fn, on_call=None):
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            finally:
                times[phase] = times.get(phase, 0.0) + time.perf_counter() - start
            if on_call:
                on_call(out, *args)
            return out
        return wrapper

    def loaded(out, binary, source, kernel):
        if source is None:          # made from a disk-cache entry's bytes
            counts["disk_loads"] += 1

    def driven(out, *args):
        counts["drivers"] += out is not None     # None: the loop stays host-driven

    api._trace = timed("trace", api._trace)
    api.schedule = timed("schedule", api.schedule)
    program.schedule = timed("schedule", program.schedule)
    program.lower_group = timed("lower", program.lower_group)
    cache.load = timed("disk", cache.load)
    for method in ("legalize", "render", "build"):
        setattr(backend, method, timed(method, getattr(backend, method)))
    backend.load = timed("load", backend.load, loaded)

    find = backend.from_disk_cache

    def host_code(tag, *args):
        # The cpu backend's own host code (adstack/native.py's loops) is cached beside its
        # kernels and counted in its compile_count, but loaded without backend.load.
        found = find(tag, *args)
        counts["disk_loads"] += tag != backend.name and found[1] is not None
        return found
    backend.from_disk_cache = host_code
    if hasattr(backend, "step_driver"):
        backend.step_driver = timed("drivers", backend.step_driver, driven)


def child(key, scale, backend_name, cache_dir):
    import dloop as dl
    from dloop.backends.base import get_backend
    dl.config.update("cache_dir", cache_dir)
    harness.SETTINGS = harness.Settings("cpu", backend_name)
    backend = get_backend(backend_name)
    times, counts = {}, {"disk_loads": 0, "drivers": 0}
    _instrument(backend, times, counts)
    module = WORKLOADS[key]
    label, *params = module.cases(scale)[0]
    data, _ = harness.prepare(module.make_data(*params, np.random.default_rng(0)), "float64")
    impl = module.dloop(data)
    out = {"case": label}
    for name, call in (("forward", impl.forward), ("gradient", impl.gradient)):
        times.clear()
        before = dict(counts, kernels=backend.compile_count)
        start = time.perf_counter()
        harness.to_numpy(call())
        first = time.perf_counter() - start
        first_times, later, later_times = dict(times), [], []
        for _ in range(REPEATS):
            times.clear()
            start = time.perf_counter()
            harness.to_numpy(call())
            later.append(time.perf_counter() - start)
            later_times.append(dict(times))
        steady = statistics.median(later)
        # Tracing runs at every call: only its first-call excess is compile time.
        out[name] = {"excess": max(first - steady, 0.0), "steady": steady,
                     "kernels": backend.compile_count - before["kernels"],
                     "disk_loads": counts["disk_loads"] - before["disk_loads"],
                     "drivers": counts["drivers"] - before["drivers"],
                     "phases": {p: s - statistics.median(t.get(p, 0.0) for t in later_times)
                                for p, s in first_times.items()}}
    print(json.dumps(out))


# -- the parent: two fresh processes per workload, and the table --

def run_child(key, args, cache_dir):
    """The child's result, or the reason it gave none (a crash is a row, not the end)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", key, "--scale", args.scale,
           "--backend", args.backend, "--cache-dir", cache_dir]
    # Mesa's own shader cache would make a Vulkan driver's compile warm in the cold process.
    env = dict(os.environ, MESA_SHADER_CACHE_DIR=os.path.join(cache_dir, "mesa"))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    except subprocess.TimeoutExpired:
        return "no result in 900 s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or [""])[-1][:100]
        code = done.returncode
        return f"exit {code}" + (f" ({signal.Signals(-code).name})" if code < 0 else "") + \
            (f": {last}" if last else "")
    return json.loads(done.stdout.strip().splitlines()[-1])


def total(result, field):
    return sum(result[call][field] for call in ("forward", "gradient"))


def phases(result):
    merged = {}
    for call in ("forward", "gradient"):
        for phase, seconds in result[call]["phases"].items():
            merged[phase] = merged.get(phase, 0.0) + seconds
    merged["other"] = max(total(result, "excess") - sum(merged.values()), 0.0)
    return merged


def table(results):
    head = (f"{'workload':22} {'case':22} {'kernels':>7} {'drivers':>7} {'cold s':>7} "
            f"{'cold/k s':>8} {'disk loads':>10} {'warm s':>7} {'warm/k s':>8}  "
            f"cold/k <= {TARGET_S} s")
    lines = [head, "-" * len(head)]
    for key, (cold, warm) in results.items():
        if isinstance(cold, str) or isinstance(warm, str):
            why = cold if isinstance(cold, str) else f"warm: {warm}"
            lines.append(f"{WORKLOADS[key].NAME:22} failed: {why}")
            continue
        built = total(cold, "kernels") + total(cold, "drivers")
        per = lambda r: total(r, "excess") / built if built else None  # noqa: E731
        lines.append(
            f"{WORKLOADS[key].NAME:22} {cold['case']:22} {total(cold, 'kernels'):>7} "
            f"{total(cold, 'drivers'):>7} {total(cold, 'excess'):>7.2f} "
            f"{harness.fmt(per(cold), 1, 3):>8} {total(warm, 'disk_loads'):>10} "
            f"{total(warm, 'excess'):>7.2f} {harness.fmt(per(warm), 1, 3):>8}  "
            f"{'yes' if built and per(cold) <= TARGET_S else 'no'}")
    return "\n".join(lines)


def breakdown(results):
    names = PHASES + ("other",)
    head = f"{'workload':22} {'run':5} " + " ".join(f"{p:>8}" for p in names)
    lines = ["excess by phase, seconds (forward + gradient)", head, "-" * len(head)]
    for key, pair in results.items():
        for run_name, result in zip(("cold", "warm"), pair):
            if isinstance(result, str):
                continue
            split = phases(result)
            lines.append(f"{WORKLOADS[key].NAME:22} {run_name:5} " +
                         " ".join(f"{split.get(p, 0.0):>8.3f}" for p in names))
    return "\n".join(lines)


def check(results):
    """The warm process must build nothing the cold one cached: only drivers are rebuilt."""
    failed = [key for key, pair in results.items() if any(isinstance(r, str) for r in pair)]
    bad = [key for key, (cold, warm) in results.items() if key not in failed and
           (total(warm, "kernels") or total(warm, "disk_loads") != total(cold, "kernels"))]
    return "; ".join(([f"workloads that failed: {failed}"] if failed else []) +
                     ([f"warm processes that compiled kernels instead of loading them: {bad}"]
                      if bad else []))


def parse():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--scale", default="quick", choices=["tiny", "quick", "full"])
    parser.add_argument("--only", default="", help="comma-separated workloads, e.g. W1,W3")
    parser.add_argument("--markdown", default=None, help="also write the report to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    return parser.parse_args()


def main():
    args = parse()
    if args.child:
        return child(args.child, args.scale, args.backend, args.cache_dir)
    results = {}
    for key in WORKLOADS:
        if args.only and key not in args.only.split(","):
            continue
        with tempfile.TemporaryDirectory(prefix="dloop-compile-") as cache_dir:
            cold = run_child(key, args, cache_dir)
            warm = run_child(key, args, cache_dir)
        results[key] = (cold, warm)
        print(f"  {key}: " + ", ".join(
            f"{name} {r if isinstance(r, str) else format(total(r, 'excess'), '.2f') + ' s'}"
            for name, r in (("cold", cold), ("warm", warm))), flush=True)
    head = (f"machine: {machine()}; dloop backend {args.backend}; scale {args.scale}; "
            f"excess of the first call over the median of {REPEATS} later ones")
    problem = check(results)
    report = "\n".join([head, "", table(results), "", breakdown(results)] +
                       ([problem] if problem else []))
    print("\n" + report)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("```\n" + report + "\n```\n")
    if problem:
        sys.exit(1)


if __name__ == "__main__":
    main()
