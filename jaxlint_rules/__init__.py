"""The rule catalog: one module per family, each rule a small class.

JAX1xx recompilation.py   retracing and recompiling
       static_args.py     static arguments new every iteration or call (JAX103)
       rewrap.py          a jit wrapper rebuilt every step around the same function (JAX104)
JAX2xx host_transfer.py   device-to-host syncs, blocks, timing, host callbacks
       uploads.py         host-to-device copies of the same data every step (JAX205)
JAX3xx shapes.py          data-dependent shapes, Python control flow on tracers, unrolled loops
       shape_churn.py     shapes that change every iteration, so JAX compiles again (JAX304)
JAX4xx mutation.py        in-place updates of immutable arrays
       removed_api.py     names JAX has removed (the jax.ops index API, jax.tree_map, ...)
JAX5xx rng.py             host RNGs frozen by tracing, reused PRNG keys
JAX6xx side_effects.py    Python side effects and print inside traced code
JAX7xx eager.py           work run op by op outside jit every step or every element
JAX8xx memory.py          memory and device set-up: settings that come too late
"""

from __future__ import annotations

from . import (eager, host_transfer, memory, mutation, recompilation, removed_api, rewrap, rng, shape_churn, shapes,
               side_effects, static_args, uploads)

ALL_RULES = sorted([*recompilation.RULES, *static_args.RULES, *rewrap.RULES, *host_transfer.RULES, *uploads.RULES, *shapes.RULES, *shape_churn.RULES,
                    *mutation.RULES, *removed_api.RULES, *rng.RULES, *side_effects.RULES, *eager.RULES, *memory.RULES],
                   key=lambda r: r.code)
RULES_BY_CODE = {r.code: r for r in ALL_RULES}
