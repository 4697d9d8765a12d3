"""The memo tables of the JAX facts of one module, owned by one object instead of the model's
``__dict__``: each table is a named slot, so a reader sees every cache the facts keep and which
module fills it. ``JaxModel`` (facts/model.py) makes one per model (``JaxModel.facts``); the fact
modules read and fill their own slots, and ``ModuleModel.dispose`` drops it with the model."""

from __future__ import annotations

# Tables that start empty (a dict per question, keyed by node or record ids), with the module that fills each.
_TABLES = (
    "array_results",  # values
    "callables",  # callables
    "callers_memo",  # frequency
    "eager_memo",  # eagerwork: gradients and plain callees per call
    "element_makers",  # containers
    "escaping_memo",  # frequency
    "events",  # values
    "factory_call_memo",  # callables
    "factory_memo",  # callables
    "instance_key_memo",  # keydraws
    "key_names_memo",  # keys
    "key_params_memo",  # keys
    "kinds",  # values
    "own_loads",  # closures
    "loop_assigned",  # periodicity
    "param_args_memo",  # callables
    "parameter_draw_memo",  # keyhandoffs
    "body_nodes_memo",  # keyhandoffs (a function's body walked once)
    "per_compilation_memo",  # repetition
    "repeats_memo",  # frequency
    "repeats_local_memo",  # frequency (without the project's other modules)
    "returns",  # values
    "self_stores_memo",  # keydraws
    "tuple_key_params_memo",  # keys
    "timing_roles",  # timing: a call's device role per (call, depth)
    "wraps_by_call",  # callables, tracing
)
# Answers computed once per module on first use (None until then), with the module that computes each.
_ONCE = (
    "after_donation",  # donation
    "applied_memo",  # repetition
    "array_fields",  # pytrees
    "clock_calls",  # policy/looprecord: lines of the calls spelled like a clock
    "clock_call_ids",  # timing: calls of a clock spelled with a local alias (``timer()``)
    "declared_jax",  # jaxrange: the JAX versions the project's packaging files declare
    "element_read_ids",  # elementwise
    "element_reads",  # elementwise
    "fixed_key_memo",  # keydraws
    "grown_memo",  # growth: the arrays grown by a join in a loop
    "forwarder_names_memo",  # keys
    "host_fetch",  # fetches, values
    "hostarray_visiting",  # hostarrays: the names whose bindings are being followed (a self-rebinding's cycle)
    "attribute_store_counts",  # hostarrays: attribute name -> how many stores/deletes of it the module makes
    "if_tests",  # periodicity
    "implicit_uploads",  # policy/transfers
    "item_stores",  # containers: values stored by ``name[...] = v`` per (scope, name)
    "ifs_by_id",  # work
    "key_func_calls_memo",  # keys
    "imported_key_calls_memo",  # keys: ids of the calls that may hand a drawn key to another module
    "key_handoffs_memo",  # keyhandoffs
    "row_key_draws_memo",  # keyrows
    "seed_key_draws_memo",  # seedkeys
    "mapped_key_draws_memo",  # mappedkeys
    "loop_bodies",  # deviceloops
    "loop_callbacks",  # callbacks
    "loop_records",  # policy/looprecord
    "may_call_random",  # keys
    "may_sync",  # fetches
    "method_names",  # fetches
    "np_names",  # fetches
    "pallas_kernels",  # refs
    "quiet",  # rule.Rule.quiet: a list only when a run asks why a line has no finding
    "rebinding_calls",  # donation
    "inplace_steps",  # nnxdonation
    "setup_flow",  # setuporder
    "slice_bounds",  # fetches: slices with a JAX value as a bound
    "numpy_index_reads",  # hostarrays: NumPy arrays indexed with a JAX value
    "shape_reads",  # fetches: data-dependent shapes computed eagerly
    "static_fields",  # pytrees
    "summarizing",  # callables, summary
    "timings",  # timing
    "trace_children",  # closures: the functions each function's trace runs directly
    "unreachable",  # closures: the spans of statements that never run (python/syntax.unreachable_spans)
    "tree_map_sites",  # values
    "work_memo",  # work
)


class FactCache:
    """One module's fact caches (see ``_TABLES`` and ``_ONCE`` for what each slot holds and who fills it)."""

    __slots__ = _TABLES + _ONCE

    def __init__(self):
        for name in _TABLES:
            setattr(self, name, {})
        for name in _ONCE:
            setattr(self, name, None)
