"""What single host operations cost on this machine (microseconds, the minimum of 20 blocks of
20,000): the clock reads, system calls and interpreter calls that jaxlint trace's hooks make per
dispatch. On the TPU machine a system call cost about 22 us (docs/trace-on-tpu.md), so an
operation that is cheap elsewhere may not be there. Imports nothing of jax.

    python bench/host_ops.py
"""
import os
import sys
import threading
import time

N, REPS = 20000, 20


def per_call(f, n: int = N, reps: int = REPS) -> float:
    """Microseconds per call of ``f``: the minimum over ``reps`` blocks of ``n`` calls (what the code
    costs, not what a loaded machine added to it). bench/trace_call_cost.py uses it too."""
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, time.perf_counter() - t)
    return best / n * 1e6


def main() -> None:
    tls = threading.local()
    tls.x = 1
    ops = {
        "empty lambda": lambda: None,
        "time.perf_counter()": time.perf_counter,
        "time.monotonic()": time.monotonic,
        "time.time()": time.time,
        "time.perf_counter_ns()": time.perf_counter_ns,
        "time.thread_time()": time.thread_time,
        "os.getpid()": os.getpid,
        "threading.get_ident()": threading.get_ident,
        "sys._getframe()": sys._getframe,
        "getattr(threading.local)": lambda: getattr(tls, "x", None),
        "sys.getswitchinterval()": sys.getswitchinterval,
    }
    for name, f in ops.items():
        print(f"  {name:28s} {per_call(f):8.3f} us")


if __name__ == "__main__":
    main()
