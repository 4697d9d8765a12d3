#!/usr/bin/env bash
# Everything issue 38 measures on a TPU machine, in one command (bench/trace_*.py; see
# docs/trace-on-tpu.md). Run from the repository root on the device machine:
#     bash bench/tpu_session.sh STAGE ...
# stages: facts callcost parts donation hostbound overhead inproc children:NODEIDS_FILE tests[:FILES]
# Results go to $OUT (default ./tpu-out): session.log, and all.tgz re-packed after each stage, so
# a call stopped at its time limit still returns what the finished stages wrote.
set -u
OUT=${OUT:-$PWD/tpu-out}
R=$OUT/r
mkdir -p "$R"
export PYTHONPATH="${PYTHONPATH:-}:$PWD" PYTHONUNBUFFERED=1
LOG=$OUT/session.log
pack() { tar -czf "$OUT/all.tgz" -C "$OUT" r 2>/dev/null; }
say() { echo "== $(date +%T) $*" | tee -a "$LOG"; }
for stage in "$@"; do
  say "stage $stage"
  case "$stage" in
    facts)
      python3 - >"$R/facts.txt" 2>&1 <<'PY'
import platform, subprocess, sys, time
t = time.perf_counter()
import jax
print("python", sys.version.split()[0], "jax", jax.__version__, platform.libc_ver())
print("devices", jax.devices(), "in %.1f s" % (time.perf_counter() - t))
d = jax.local_devices()[0]
print("memory_stats", d.memory_stats())
print("switch interval", sys.getswitchinterval())
PY
      cat > /tmp/trivial.py <<'PY'
import sys
import jax, jax.numpy as jnp
print(jax.jit(lambda x: x * 2)(jnp.ones(3)))
print("err", file=sys.stderr)
PY
      { echo "--- plain stderr:"; python3 /tmp/trivial.py; } >>"$R/facts.txt" 2>&1
      { echo "--- sitecustomize:"; python3 -c "import sitecustomize; print(sitecustomize.__file__)"; } >>"$R/facts.txt" 2>&1
      cat "$R/facts.txt" | tee -a "$LOG" ;;
    donation)
      timeout 240 python3 bench/trace_donation.py --json "$R/donation.json" 2>&1 | tee -a "$LOG" ;;
    hostbound)
      timeout 240 python3 bench/trace_hostbound.py --runs ${HOSTBOUND_RUNS:-2} --json "$R/hostbound.json" 2>&1 | tee -a "$LOG"
      timeout 120 env JAX_PLATFORMS=cpu python3 bench/trace_hostbound.py --json "$R/hostbound_cpu.json" 2>&1 | tee -a "$LOG" ;;
    callcost)  # per-call cost of each part of the hooks, on the chip and on its host's CPU
      timeout 150 python3 bench/trace_call_cost.py --json "$R/callcost.json" 2>&1 | tee -a "$LOG"
      timeout 120 env JAX_PLATFORMS=cpu python3 bench/trace_call_cost.py --json "$R/callcost_cpu.json" 2>&1 | tee -a "$LOG" ;;
    parts)  # the loop overhead with one part of the instrumentation off at a time
      timeout 240 python3 bench/trace_overhead_parts.py --runs ${PARTS_RUNS:-2} --steps 2000 \
        --variants ${PARTS:-full,nowatch,noeager,noupload} 2>&1 | tee -a "$LOG" ;;
    overhead)
      timeout 200 python3 bench/trace_overhead.py --runs ${OVERHEAD_RUNS:-3} --steps 4000 2>&1 | tee -a "$LOG"
      timeout 120 env JAX_PLATFORMS=cpu python3 bench/trace_overhead.py --runs 3 --steps 2000 2>&1 | tee -a "$LOG" ;;
    inproc)  # the tests that start no program, in one pytest process on the chip
      TESTS_PASS1=skip TESTS_INPROCESS=bench/trace_tpu_inprocess.txt TESTS_SECONDS=${TESTS_SECONDS:-300} \
        python3 bench/trace_tpu_tests.py "$R/inproc" 2>&1 | tee -a "$LOG"
      tail -3 "$R/inproc/pass2.log" | tee -a "$LOG" ;;
    children:*)  # the tests (node ids, one a line, in the file named) whose programs take the chip
      TESTS_PASS1="$(cat "${stage#children:}")" TESTS_INPROCESS=/dev/null TESTS_SECONDS=${TESTS_SECONDS:-300} \
        python3 bench/trace_tpu_tests.py "$R/children" 2>&1 | tee -a "$LOG"
      tail -3 "$R/children/pass1.log" | tee -a "$LOG" ;;
    tests*)
      files=${stage#tests}; files=${files#:}
      TESTS_SECONDS=${TESTS_SECONDS:-400} python3 bench/trace_tpu_tests.py "$R/tests" ${files//,/ } 2>&1 | tee -a "$LOG"
      tail -5 "$R/tests/pass1.log" "$R/tests/pass2.log" 2>/dev/null | tee -a "$LOG" ;;
    *) say "unknown stage $stage" ;;
  esac
  pack
done
say done
