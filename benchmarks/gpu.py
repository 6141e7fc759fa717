"""The GPU run's extras: the device's name and memory bandwidth, the bandwidth bound on W1's
tape, and the issue's targets checked against this run's rows."""

import importlib
import time

import numpy as np

import peers
from harness import Row

COPY_BYTES = 1 << 30


def info():
    """{"name", "peak" (bytes/s, from the memory clock and bus width, or None), "copy"
    (bytes/s, a measured device-to-device copy: read once plus written once)}."""
    xp = peers.array_module()
    if xp is np:
        name, peak = "no GPU (dry run): host memory", None
    else:
        rt = xp.cuda.runtime
        props = rt.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        # CUDA 13 dropped these from the properties; the attributes remain.
        clock_khz = props.get("memoryClockRate") or rt.deviceGetAttribute(
            rt.cudaDevAttrMemoryClockRate, 0)
        bus_bits = props.get("memoryBusWidth") or rt.deviceGetAttribute(
            rt.cudaDevAttrGlobalMemoryBusWidth, 0)
        peak = 2 * clock_khz * 1e3 * bus_bits / 8         # double data rate
    size = COPY_BYTES // 8 if xp is not np else COPY_BYTES // 64
    src, dst = xp.ones(size), xp.empty(size)
    times = []
    for _ in range(6):
        start = time.perf_counter()
        dst[...] = src
        peers.synchronize()
        times.append(time.perf_counter() - start)
    copy = 2 * src.nbytes / float(np.median(times[1:]))
    del src, dst
    if xp is not np:
        xp.get_default_memory_pool().free_all_blocks()     # 2 GiB the peers may need
    return {"name": name, "peak": peak, "copy": copy}


# The names only the GPU run reaches: the dry run checks that each exists, to catch a misspelt
# one before the GPU machine does. A library that is not installed here is reported too.
GPU_ONLY_NAMES = [("cupy", "RawModule"), ("cupy", "get_default_memory_pool"),
                  ("cupy.cuda.runtime", "getDeviceProperties"),
                  ("cupy.cuda.runtime", "deviceGetAttribute"),
                  ("cupy.cuda.runtime", "cudaDevAttrMemoryClockRate"),
                  ("cupy.cuda.runtime", "cudaDevAttrGlobalMemoryBusWidth"),
                  ("drjit.cuda.ad", "Float64"), ("drjit.cuda.ad", "Float32"),
                  ("drjit.cuda.ad", "Int32"), ("drjit", "has_backend"), ("quadrants", "cuda"),
                  ("torch.cuda", "synchronize"), ("torch.cuda", "is_available")]


def missing_gpu_names():
    missing = []
    for module, name in GPU_ONLY_NAMES:
        try:
            getattr(importlib.import_module(module), name)
        except Exception:
            missing.append(f"{module}.{name}")
    return missing


def describe(gpu):
    peak = "-" if gpu["peak"] is None else f"{gpu['peak'] / 1e9:.0f} GB/s"
    return (f"{gpu['name']}; memory bandwidth {peak} peak (memory clock x bus width), "
            f"{gpu['copy'] / 1e9:.0f} GB/s measured (device-to-device copy)")


def bandwidth_row(workload, case, precision, tape_bytes, gpu):
    """The time to write the tape once and read it once, at the peak bandwidth (the measured
    copy bandwidth where the device reports no peak)."""
    at_copy = f"{2 * tape_bytes / gpu['copy'] * 1e3:.2f} ms"
    if gpu["peak"]:
        seconds = 2 * tape_bytes / gpu["peak"]
        note = f"tape written + read once at the peak bandwidth ({at_copy} at the copy's)"
    else:
        seconds, note = 2 * tape_bytes / gpu["copy"], "at the copy bandwidth: no peak known"
    return Row(workload, case, "bandwidth-bound", gradient_s=seconds, memory_bytes=tape_bytes,
               precision=precision, note=note)


def _best(rows, keep):
    found = [r for r in rows if keep(r) and r.gradient_s and r.correct()]
    return min(found, key=lambda r: r.gradient_s, default=None)


def targets(rows):
    """The issue's targets, one line per dloop row they apply to."""
    lines = []
    for r in rows:
        if not r.system.startswith("dloop"):
            continue
        same = [p for p in rows if (p.workload, p.case) == (r.workload, r.case)]
        if r.workload.startswith("W1"):
            checks = [("hand-written bound", 1.5,
                       _best(same, lambda p: p.system.startswith("cupy-bound"))),
                      ("bandwidth bound", 2.0,
                       next((p for p in same if p.system == "bandwidth-bound"), None))]
        else:
            checks = [("best correct peer", 0.5, _best(same, lambda p: not (
                p.system.startswith("dloop") or p.system in ("numpy-adjoint",
                                                             "bandwidth-bound"))))]
        for what, target, p in checks:
            if not r.gradient_s or p is None:
                lines.append(f"{r.workload} / {r.case}: {r.system} vs {what}: not measured")
                continue
            ratio = r.gradient_s / p.gradient_s
            verdict = "met" if ratio <= target and r.correct() else "NOT met"
            lines.append(f"{r.workload} / {r.case}: {r.system} / {what} ({p.system}) = "
                         f"{ratio:.2f}"
                         f" (target <= {target}): {verdict}")
    return "\n".join(lines)
