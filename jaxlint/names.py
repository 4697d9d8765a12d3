"""What jaxlint knows about JAX's public API: which qualified names jit, transform,
run control-flow bodies, produce arrays, or sync with the host.

Everything here is data keyed by canonical qualified names (``jax.numpy.zeros``);
the module model turns a user's spelling (``jnp.zeros``, ``from jax import jit as J``)
into these names.
"""

from __future__ import annotations

# Internal module paths that users (and jax itself) import, mapped to the public name.
CANONICAL_PREFIXES = (
    ("jax._src.api.", "jax."),
    ("jax._src.numpy.lax_numpy.", "jax.numpy."),
    ("jax._src.numpy.", "jax.numpy."),
    ("jax._src.lax.lax.", "jax.lax."),
    ("jax._src.lax.control_flow.", "jax.lax."),
    ("jax._src.lax.", "jax.lax."),
    ("jax._src.random.", "jax.random."),
    ("jax._src.nn.functions.", "jax.nn."),
    ("jax.api.", "jax."),
    ("jax.experimental.shard_map.", "jax."),
    ("flax.experimental.nnx.", "flax.nnx."),
)

# Wrappers that compile a function: name -> kind.
JIT_WRAPPERS = {
    "jax.jit": "jit",
    "jax.pmap": "pmap",
    "equinox.filter_jit": "filter_jit",
    "equinox.filter_pmap": "filter_jit",
    "flax.nnx.jit": "jit",
    "flax.nnx.jit_partial": "jit",  # jit of fun with its leading arguments bound (flax >= 0.12)
    "flax.nnx.pmap": "pmap",
    # haliax (levanter): named_jit/filter_jit are equinox filter_jit with named axes: arrays are
    # traced, every other argument (Python scalars, closures, callables) is static
    "haliax.named_jit": "filter_jit",
    "haliax.filter_jit": "filter_jit",
}

# Jit wrappers whose cache is keyed on the identity of the function object, so a wrapper rebuilt
# around a new bound method (``jax.jit(env.step)``: ``env.step`` is a new object at every
# evaluation) traces and compiles again. Measured under jax 0.10.2: ``jax.jit(env.step)`` rebuilt
# 5 times compiles 5 times. ``flax.nnx.jit`` wraps every function in a new ``JitFn``
# (``dataclass(eq=False)``) handed to ``jax.jit``. Not here: ``jax.pmap`` and equinox's
# ``filter_jit``/``filter_pmap`` key their caches on the function's equality (a bound method equals
# the last one made from the same instance and function): rebuilt 5 times, they compile once.
IDENTITY_KEYED_WRAPPERS = frozenset({"jax.jit", "flax.nnx.jit"})

# Wrappers that, rebuilt around the same function object every time, do not trace or compile
# again, but each new wrapper is built and called for the first time, off jit's C++ dispatch fast
# path: what a call costs more than a call of a wrapper made once (JAX104). Measured by
# bench/jit_wrapper_cost.py on CPU under jax 0.10.2 (5 x 200 calls, medians, each call waited for):
# ``jax.jit`` of a module function over 10/100/300 leaves 47/88/123 us more (static_argnums:
# 54/92/190, donate_argnums: 50/65/103); with in_shardings and out_shardings 86/363/1060 us more;
# ``jax.random.split`` 75 us; ``jax.pmap`` 31/43 us (10/100 leaves). No compile in 1005 rebuilt
# calls of any of them. (A bound method rebuilt in ``jax.jit`` retraces and compiles every call:
# JAX101/JAX102; ``jax.pmap`` finds it equal and does not.) The ratio depends on the call, so
# messages give the measured range, not a factor.
REWRAP_COST = {
    "jax.jit": "about 0.05-0.2 ms",
    "jax.jit sharded": "about 0.1-1 ms (10 to 300 leaves)",
    "jax.pmap": "about 0.03-0.07 ms",
}

# A per-step parameter update, which outside a compiled step runs op by op (JAX701):
# functions that apply one, and the libraries whose optimizer objects' ``update`` makes one
# (an optax GradientTransformation's ``update(grads, state, params)``; flax NNX's
# ``Optimizer.update(model, grads)``, which applies it in place). (prefix or name, family)
EAGER_UPDATE_FUNCTIONS = frozenset({"optax.apply_updates"})
# Gradient transforms whose product, called outside jit, traces the function again at every call
# (their wrapper keeps no compiled cache) and runs its forward and backward passes op by op: a
# gradient step called so in a loop of steps (JAX701). Measured by bench/eager_grad_cost.py.
# Called outside any trace, each traces its function again and runs the passes op by op (CPU, jax 0.10.2, a
# two-layer MLP, 32x64 batch: flax 0.12.8's nnx.value_and_grad 15.7 ms a call against 0.41 ms under nnx.jit;
# equinox's filter_value_and_grad 8.2 ms against 0.34 ms under filter_jit).
EAGER_GRADIENT_TRANSFORMS = frozenset({"jax.grad", "jax.value_and_grad", "flax.nnx.grad", "flax.nnx.value_and_grad",
                                       "equinox.filter_grad", "equinox.filter_value_and_grad"})
# Transforms whose product returns a gradient (with the value, for the value_and_grad forms).
GRADIENT_TRANSFORMS = EAGER_GRADIENT_TRANSFORMS
# Fields of library objects that hold a device array the object's jitted update advances: flax NNX's
# optimizer keeps its step counter in ``step`` (an ``OptState`` variable over a ``jnp`` integer), so
# ``optimizer.step.value.item()`` after each ``nnx.jit`` step reads the device (and waits for the step).
LIBRARY_DEVICE_FIELDS = {"flax.nnx.Optimizer": frozenset({"step"}), "flax.nnx.ModelAndOptimizer": frozenset({"step"}),
                         "flax.nnx.optimizer.Optimizer": frozenset({"step"})}
DEVICE_FIELD_NAMES = frozenset(f for fields in LIBRARY_DEVICE_FIELDS.values() for f in fields)
OPTIMIZER_FAMILIES = (("optax.", "optax"), ("flax.nnx.Optimizer", "nnx"), ("flax.nnx.ModelAndOptimizer", "nnx"))
# JAX's example optimizers (``jax.example_libraries.optimizers``, ``jax.experimental.optimizers`` before
# 0.2.25): each maker returns ``(init_fun, update_fun, get_params)``, and ``update_fun(i, grads, state)``
# returns the new state (jax/example_libraries/optimizers.py).
EXAMPLE_OPTIMIZER_MAKERS = ("jax.example_libraries.optimizers.", "jax.experimental.optimizers.")
# Methods of objects made by these library calls (prefix or name) that only dispatch JAX work and
# return device values, reading nothing on the host: the libraries' pure, jittable functions of
# their state. Timing one measures its dispatch (JAX204). evosax strategies' ``ask``/``tell``/
# ``init``/``initialize`` (functions of (key, state, params) built on jax.numpy); an optax
# GradientTransformation's ``init``/``update``.
# gymnax's ``RolloutWrapper`` (``gymnax.experimental``): ``single_rollout``/``batch_rollout``/
# ``population_rollout`` are methods decorated ``partial(jax.jit, static_argnames=("self",))``
# (gymnax 1.0.1, gymnax/experimental/rollout.py): a call dispatches one compiled rollout.
LIBRARY_DISPATCH_METHODS = {"evosax.": frozenset({"ask", "tell", "init", "initialize"}),
                            "optax.": frozenset({"init", "update"}),
                            "gymnax.experimental.RolloutWrapper": frozenset({
                                "single_rollout", "batch_rollout", "population_rollout"}),
                            "gymnax.experimental.rollout.RolloutWrapper": frozenset({
                                "single_rollout", "batch_rollout", "population_rollout"})}
# Methods of objects made by these library calls that return a compiled function: calling what
# they return dispatches a compiled program. QDax's ``DistributedMAPElites.get_distributed_init_fn``
# and ``get_distributed_update_fn`` return ``jax.pmap(...)`` of the init and update loops (qdax
# 0.5.0, qdax/core/distributed_map_elites.py).
# rlax's distributions whose ``sample(key, ...)`` draws from its first argument (rlax 0.1.9,
# rlax/_src/distributions.py: each ``sample_fn(key, ...)`` returns a distrax distribution's
# ``sample(seed=key)``). ``rlax.greedy`` is left out: its sample is the argmax, whatever the key.
RLAX_SAMPLERS = frozenset({"rlax.softmax", "rlax.clipped_entropy_softmax", "rlax.epsilon_greedy",
                           "rlax.gaussian_diagonal", "rlax.squashed_gaussian"})
# Of those, the methods of class instances, where looking the method up makes a new bound-method object
# every time (``jax.jit(strategy.ask)`` in a loop misses jit's cache: fresh AP's meta-evolution notebook, 20
# traces in 20 generations). Not optax's: a GradientTransformation is a NamedTuple of functions, so
# ``tx.update`` is the same stored function at every lookup.
LIBRARY_BOUND_METHODS = {k: v for k, v in LIBRARY_DISPATCH_METHODS.items() if k != "optax."}
LIBRARY_COMPILED_FACTORY_METHODS = {
    "qdax.core.distributed_map_elites.DistributedMAPElites": frozenset({
        "get_distributed_init_fn", "get_distributed_update_fn"}),
}
# Context managers of libraries that time their block with the wall clock and wait for nothing on
# exit: mlxu's ``Timer`` (``__enter__`` reads ``time.time()``, ``__exit__`` subtracts it; mlxu 0.2.0,
# mlxu/utils.py), exported as ``mlxu.Timer``.
LIBRARY_TIMER_CONTEXTS = frozenset({"mlxu.Timer", "mlxu.utils.Timer"})
# Library functions that only rearrange the containers they are handed, reading none of the values:
# mlxu's ``prefix_metrics(metrics, prefix)`` returns ``{f"{prefix}/{key}": value for ...}`` (mlxu 0.2.0,
# mlxu/logging.py). Handed device values, they wait for nothing.
LIBRARY_STORING_FUNCTIONS = frozenset({"mlxu.prefix_metrics", "mlxu.logging.prefix_metrics"})

# Library classes whose own training loop calls a method of the user's subclass at every step:
# class (as the library exports it) -> the methods it calls. stable-baselines3's ``learn`` (and
# sbx's, its JAX port) calls ``train()`` after every ``train_freq`` environment steps (off-policy)
# or every rollout (on-policy); ``train`` runs the gradient steps.
_SB3_ALGOS = ("SAC", "TD3", "DDPG", "DQN", "PPO", "A2C")
_SBX_ALGOS = ("SAC", "TD3", "DDPG", "DQN", "PPO", "TQC", "DroQ", "CrossQ")
LIBRARY_LOOP_METHODS = {
    **{f"stable_baselines3.{a}": frozenset({"train"}) for a in _SB3_ALGOS},
    **{f"sbx.{a}": frozenset({"train"}) for a in _SBX_ALGOS},
    "stable_baselines3.common.base_class.BaseAlgorithm": frozenset({"train"}),
    "stable_baselines3.common.off_policy_algorithm.OffPolicyAlgorithm": frozenset({"train"}),
    "stable_baselines3.common.on_policy_algorithm.OnPolicyAlgorithm": frozenset({"train"}),
    "sbx.common.off_policy_algorithm.OffPolicyAlgorithmJax": frozenset({"train"}),
    "sbx.common.on_policy_algorithm.OnPolicyAlgorithmJax": frozenset({"train"}),
}

# Library factories that return an instance of one of the library's environment classes, whose
# API (``step``, ``reset``, ``get_obs``, ``step_env``, ...) is made of plain methods: an attribute
# called on the result is a bound method, a new object at every lookup. factory -> the index of
# the environment in the returned tuple (None: the result itself). From each library's public API:
# brax ``envs.create``/``envs.get_environment`` -> ``Env``; gymnax ``make`` -> ``(env, params)``;
# jumanji ``make`` -> ``Environment``; pgx ``make`` -> ``Env``; navix ``make`` -> ``Environment``.
ENV_FACTORIES = {
    "brax.envs.create": None,
    "brax.envs.get_environment": None,
    "gymnax.make": 0,
    "jumanji.make": None,
    "pgx.make": None,
    "navix.make": None,
}

# Transformations that trace the function they are given (argument 0 or keyword).
# policy: which parameters of the transformed function receive tracers.
#   "all"      every parameter (minus static_argnums where the transform has them)
#   "argnums"  only the differentiated ones (argnums, default 0)
#   "vmap"     every parameter whose in_axes entry is not None
#   "unknown"  the library decides per value (equinox/nnx filters): none are assumed
TRANSFORMS = {
    "jax.vmap": "vmap",
    "jax.grad": "argnums",
    "jax.value_and_grad": "argnums",
    "jax.jacfwd": "argnums",
    "jax.jacrev": "argnums",
    "jax.hessian": "argnums",
    "jax.checkpoint": "all",
    "jax.remat": "all",
    "jax.eval_shape": "all",
    "jax.make_jaxpr": "all",
    "jax.linearize": "all",
    "jax.jvp": "all",
    "jax.vjp": "all",
    "jax.shard_map": "all",
    "jax.named_call": "all",
    "equinox.filter_vmap": "unknown",
    "equinox.filter_grad": "unknown",
    "equinox.filter_value_and_grad": "unknown",
    "equinox.filter_checkpoint": "unknown",
    "equinox.filter_eval_shape": "unknown",
    "equinox.filter_hessian": "unknown",
    "equinox.filter_jacfwd": "unknown",
    "equinox.filter_jacrev": "unknown",
    "equinox.filter_jvp": "unknown",
    "equinox.filter_vjp": "unknown",
    "equinox.filter_make_jaxpr": "unknown",
    "equinox.filter_closure_convert": "unknown",
    "flax.nnx.vmap": "unknown",
    "flax.nnx.grad": "unknown",
    "flax.nnx.value_and_grad": "unknown",
    "flax.nnx.remat": "unknown",
    "flax.nnx.eval_shape": "unknown",
    "flax.nnx.shard_map": "unknown",
}

# Transforms whose made function returns a program, not arrays: ``jax.make_jaxpr(f)(x)`` is a
# ``ClosedJaxpr`` (its ``.jaxpr.outvars`` are variables of the program, not values).
JAXPR_MAKERS = frozenset({"jax.make_jaxpr", "equinox.filter_make_jaxpr"})

# Functions that return their operand's pytree with every leaf passed through (or cast to the
# same kind of value): ``a, b = lax.optimization_barrier((a, b))`` leaves each of ``a`` and ``b``
# what it was, so an element of the result has its operand element's kind.
PYTREE_MIRRORS = frozenset("jax.lax." + n for n in (
    "optimization_barrier", "stop_gradient", "with_sharding_constraint", "pvary", "pcast", "pbroadcast"))

# Control-flow primitives whose callable arguments become traced bodies:
# name -> list of (positional index, keyword name); a list/tuple there holds several bodies.
LAX_BODIES = {
    "jax.lax.scan": [(0, "f")],
    "jax.lax.fori_loop": [(2, "body_fun")],
    "jax.lax.while_loop": [(0, "cond_fun"), (1, "body_fun")],
    "jax.lax.cond": [(1, "true_fun"), (2, "false_fun")],
    "jax.lax.switch": [(1, "branches")],
    "jax.lax.map": [(0, "f")],
    "jax.lax.associative_scan": [(0, "fn")],
    "flax.nnx.scan": [(0, "f")],
    "flax.nnx.fori_loop": [(2, "body_fun")],
    "flax.nnx.while_loop": [(0, "cond_fun"), (1, "body_fun")],
    "flax.nnx.cond": [(1, "true_fun"), (2, "false_fun")],
    "flax.nnx.switch": [(1, "branches")],
}

# Calls under these prefixes return JAX arrays (or pytrees of them)...
ARRAY_PRODUCER_PREFIXES = (
    "jax.numpy.",
    "jax.random.",
    "jax.lax.",
    "jax.nn.",
    "jax.scipy.",
    "jax.ops.",
)
ARRAY_PRODUCERS = {"jax.device_put", "jax.device_put_replicated", "jax.device_put_sharded", "jax.block_until_ready",
                   # flax's pmap helpers: a pytree of device arrays with a device axis added / taken off
                   "flax.jax_utils.replicate", "flax.jax_utils.unreplicate"}

# ...except these, which return Python objects, dtypes, shapes or functions.
NON_ARRAY_RESULTS = {
    "jax.numpy.shape", "jax.numpy.ndim", "jax.numpy.size", "jax.numpy.dtype", "jax.numpy.result_type",
    "jax.numpy.issubdtype", "jax.numpy.iinfo", "jax.numpy.finfo", "jax.numpy.promote_types",
    "jax.numpy.can_cast", "jax.numpy.isscalar", "jax.numpy.iterable", "jax.numpy.broadcast_shapes",
    "jax.numpy.ndarray", "jax.numpy.save", "jax.numpy.savez", "jax.numpy.load", "jax.numpy.printoptions",
    "jax.numpy.set_printoptions", "jax.numpy.get_printoptions", "jax.numpy.isdtype", "jax.numpy.vectorize",
    "jax.numpy.frompyfunc", "jax.numpy.iscomplexobj", "jax.numpy.isrealobj",
    "jax.random.key_impl", "jax.random.default_prng_impl",
    "jax.lax.broadcast_shapes", "jax.lax.Precision", "jax.lax.conv_dimension_numbers",
    "jax.lax.ConvDimensionNumbers", "jax.lax.GatherDimensionNumbers", "jax.lax.ScatterDimensionNumbers",
    "jax.lax.padtype_to_pads", "jax.lax.axis_size", "jax.lax.dtype", "jax.lax.DotAlgorithmPreset",
}
NON_ARRAY_PREFIXES = ("jax.nn.initializers.", "jax.numpy.linalg.LinAlg", "jax.lax.linalg.")

# Attributes of an array that are host-side metadata, not arrays.
METADATA_ATTRS = {
    "shape", "ndim", "dtype", "size", "nbytes", "itemsize", "sharding", "device", "devices",
    "aval", "weak_type", "committed", "is_fully_addressable", "is_fully_replicated", "__class__",
    "addressable_shards", "global_shards", "format",
}
# Array methods that return host values (they are the transfers).
HOST_METHODS = {"item", "tolist", "__array__", "__float__", "__int__", "__bool__", "__index__", "tobytes"}
# Array methods that return something other than an array without syncing.
NON_ARRAY_METHODS = {"copy_to_host_async", "is_deleted", "delete", "on_device_size_in_bytes", "addressable_data",
                     "unsafe_buffer_pointer", "devices", "platform"}
# The methods of ``jax.Array`` (its public API on jax 0.10.2): read without a call on a value that is
# certainly one array (``x.sum != 0``, a missing ``()``), the attribute is a bound method, not an array.
ARRAY_METHODS = frozenset({
    "addressable_data", "all", "any", "argmax", "argmin", "argpartition", "argsort", "astype", "block_until_ready",
    "byteswap", "choose", "clip", "clone", "compress", "conj", "conjugate", "copy", "copy_to_host_async", "cumprod",
    "cumsum", "delete", "devices", "diagonal", "dot", "flatten", "is_deleted", "is_ready", "item", "max", "mean",
    "min", "nonzero", "on_device_size_in_bytes", "platform", "prod", "ptp", "ravel", "repeat", "reshape", "round",
    "searchsorted", "sort", "squeeze", "std", "sum", "swapaxes", "take", "to_device", "tobytes", "tolist", "trace",
    "transpose", "unsafe_buffer_pointer", "var", "view"})
# Methods whose name and a receiver that is certainly an array make the result an array.
AT_METHODS = {"set", "add", "subtract", "multiply", "mul", "divide", "power", "min", "max", "apply", "get"}

# Library calls that run a whole compiled loop on their own (an ODE solve, an optimisation), taken
# from the libraries' public API: one call is a program, not a step. ``SOLVER_CLASSES``: objects
# built by these modules' classes whose ``run`` method runs the whole solve (jaxopt's solvers).
LIBRARY_PROGRAMS = frozenset({"diffrax.diffeqsolve", "optimistix.minimise", "optimistix.root_find",
                              "optimistix.least_squares", "optimistix.fixed_point"})
# Library calls whose body is a device loop of many iterations wherever they are called, inside
# jit too: mctx's search policies run ``num_simulations`` simulations in a ``lax.while_loop``
# (a function that calls one runs a search per call, not one step). Unlike an ODE solve inside a
# differentiated loss, they are not part of a training step's forward pass.
SEARCH_PROGRAMS = frozenset({"mctx.muzero_policy", "mctx.gumbel_muzero_policy", "mctx.stochastic_muzero_policy"})
SOLVER_CLASS_PREFIXES = ("jaxopt.",)
# Functions a library solver calls at every iteration of its own compiled loop, by the call or
# class that is given them: (position, keyword) of the function argument. From the libraries'
# public API and their loops: jax's ``minimize`` (BFGS) and ``odeint`` run ``lax.while_loop``s,
# diffrax's terms are evaluated at every solver step of ``diffeqsolve``'s loop, optimistix solves
# run an equinox while loop, jaxopt's batch solvers run ``run`` as a ``lax.while_loop`` (its
# ``Scipy*`` wrappers and the stochastic solvers stepped by ``update`` from Python are not here).
SOLVER_STEP_FUNCTIONS = {
    "jax.scipy.optimize.minimize": (0, "fun"), "jax.experimental.ode.odeint": (0, "func"),
    "diffrax.ODETerm": (0, "vector_field"), "diffrax.ControlTerm": (0, "vector_field"),
    "optimistix.minimise": (0, "fn"), "optimistix.root_find": (0, "fn"),
    "optimistix.least_squares": (0, "fn"), "optimistix.fixed_point": (0, "fn"),
    "jaxopt.GradientDescent": (0, "fun"), "jaxopt.LBFGS": (0, "fun"), "jaxopt.BFGS": (0, "fun"),
    "jaxopt.NonlinearCG": (0, "fun"), "jaxopt.ProximalGradient": (0, "fun"),
    "jaxopt.GaussNewton": (0, "residual_fun"), "jaxopt.LevenbergMarquardt": (0, "residual_fun"),
    "jaxopt.FixedPointIteration": (0, "fixed_point_fun"), "jaxopt.AndersonAcceleration": (0, "fixed_point_fun"),
    "jaxopt.Bisection": (0, "optimality_fun"),
}
SOLVER_RUN_METHODS = frozenset({"run"})

# Pallas: the kernel a pallas_call is given takes refs (mutable views of its inputs and outputs).
PALLAS_CALLS = frozenset({"jax.experimental.pallas.pallas_call", "jax.experimental.pallas.tpu.pallas_call"})

# Calls that run host code from inside a compiled program. Measured on jax 0.10.2 (CPU): a jitted
# program that contains one returns from its call only when it has run (0.285 s for the call
# against 0.0002 s for the same program without the callback), so timing that call needs no block.
HOST_CALLBACKS = frozenset({"jax.debug.print", "jax.debug.callback", "jax.pure_callback", "jax.experimental.io_callback",
                            "jax.experimental.pure_callback", "jax.experimental.host_callback.id_tap",
                            "jax.experimental.host_callback.call", "jax.experimental.host_callback.id_print"})

# Library loggers that copy the JAX values they are given to the host on the calling thread, so a
# call syncs there. From the libraries' code: ``wandb.log`` (and ``run.log`` of ``wandb.init()``)
# turns a JAX array into NumPy with ``jax.device_get`` while it serializes the row
# (``wandb.util.json_friendly``); flax's tensorboard ``SummaryWriter`` does ``float(np.array(value))``
# in ``scalar`` and ``np.array`` in ``image``/``audio``/``histogram``; ``tf.summary`` ops convert
# their data to a tensor. Not here: writers that convert on a background thread (clu's
# ``AsyncWriter``, the default of ``create_default_writer``), and loggers that reject JAX arrays
# (torch's ``SummaryWriter.add_scalar``, ``mlflow.log_metric``): the user converts first there. tensorboardX's
# writer converts on the calling thread: HOST_LOGGER_METHODS.
HOST_LOGGER_FUNCTIONS = frozenset({"wandb.log", "tensorflow.summary.scalar", "tensorflow.summary.histogram",
                                   "tensorflow.summary.image"})
# (qualified name of the call that made the object) -> its methods that convert their arguments
# tqdm's ``set_postfix(loss=loss)`` formats each value that is not a Python number with ``str()``
# (tqdm/std.py): a JAX array is fetched to the host there.
_TQDM = ("tqdm.tqdm", "tqdm.auto.tqdm", "tqdm.notebook.tqdm", "tqdm.std.tqdm", "tqdm.trange", "tqdm.auto.trange",
         "tqdm.notebook.trange")
# tensorboardX (2.1 and later) turns a JAX array into NumPy with ``np.array`` in ``make_np``, called by
# ``add_scalar``/``add_scalars``/``add_histogram``/``add_image(s)`` on the calling thread (x2num.py, writer.py).
_TBX_METHODS = frozenset({"add_scalar", "add_scalars", "add_histogram", "add_image", "add_images"})
HOST_LOGGER_METHODS = {"wandb.init": frozenset({"log"}),
                       "flax.metrics.tensorboard.SummaryWriter": frozenset({"scalar", "image", "audio", "histogram"}),
                       **{t: _TBX_METHODS for t in ("tensorboardX.SummaryWriter", "tensorboardX.writer.SummaryWriter")},
                       **{t: frozenset({"set_postfix"}) for t in _TQDM}}
# Library objects whose ``__enter__`` returns the object itself: ``with tqdm(total=n) as pbar`` binds the bar.
ENTER_RETURNS_SELF = frozenset({"wandb.init", *_TQDM})

# Settings read from the environment when JAX's backend starts (the first device query, array or
# compiled call) or when ``jax`` is imported: assigned later, they do nothing. Measured on jax
# 0.4.30, 0.6.2 and 0.10.2 (CPU): ``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set after
# ``import jax`` but before any array gives 4 devices, after ``jnp.zeros(1)`` or ``jax.devices()``
# 1; ``JAX_ENABLE_X64=1`` after ``import jax`` leaves arrays float32 and ``JAX_PLATFORMS=bogus``
# after it is ignored (both work before the import): JAX reads its ``JAX_*`` flags' defaults from
# the environment when ``jax`` is imported. The XLA client and CUDA read theirs at backend start.
BACKEND_START_SETTINGS = frozenset({"XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_PYTHON_CLIENT_MEM_FRACTION",
                                    "XLA_PYTHON_CLIENT_ALLOCATOR", "XLA_PYTHON_CLIENT_MEM_POOL_SIZE",
                                    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"})
BACKEND_START_PREFIXES = ("TPU_",)
# JAX's own flags read when its backend starts (which platforms to start, which GPUs): a
# ``jax.config.update`` of one after the first device query, array or compiled call is silently
# ignored (measured on jax 0.10.2 CPU: ``jax_platform_name``/``jax_platforms``/
# ``jax_cuda_visible_devices`` updated after ``jax.devices()`` raise nothing and change nothing).
BACKEND_START_FLAGS = frozenset({"jax_platform_name", "jax_platforms", "jax_cuda_visible_devices"})
# Settings that choose the platform, and the values that name an accelerator: JAX already picks a
# GPU or TPU before the CPU when the machine has one, so an ignored request for one changes nothing
# there (reviewers judged such late settings harmless: fresh set S).
PLATFORM_SETTINGS = frozenset({"JAX_PLATFORM_NAME", "JAX_PLATFORMS", "jax_platform_name", "jax_platforms"})
ACCELERATOR_PLATFORMS = frozenset({"gpu", "tpu", "cuda", "rocm"})
# JAX's own flags, read from the environment when ``jax`` is imported: the names of ``jax.config``'s
# flags present in both jax 0.4.30 and 0.10.2 (the range CI tests), upper-cased, as JAX reads them.
# An unknown ``JAX_*`` name (another tool's, or one JAX reads later) is not in it.
IMPORT_TIME_SETTINGS = frozenset({
    "JAX_BACKEND_TARGET", "JAX_BCOO_CUSPARSE_LOWERING", "JAX_CHECK_TRACER_LEAKS", "JAX_COMPILATION_CACHE_DIR",
    "JAX_COMPILATION_CACHE_INCLUDE_METADATA_IN_KEY", "JAX_COMPILATION_CACHE_MAX_SIZE",
    "JAX_COMPILER_DETAILED_LOGGING_MIN_OPS", "JAX_CPU_COLLECTIVES_IMPLEMENTATION",
    "JAX_CPU_ENABLE_ASYNC_DISPATCH", "JAX_CUDA_VISIBLE_DEVICES", "JAX_DEBUG_INFS", "JAX_DEBUG_KEY_REUSE",
    "JAX_DEBUG_LOG_MODULES", "JAX_DEBUG_NANS", "JAX_DEFAULT_DEVICE", "JAX_DEFAULT_MATMUL_PRECISION",
    "JAX_DEFAULT_PRNG_IMPL", "JAX_DISABLE_JIT", "JAX_DISABLE_MOST_OPTIMIZATIONS", "JAX_DISTRIBUTED_DEBUG",
    "JAX_DUMP_IR_TO", "JAX_ENABLE_CHECKS", "JAX_ENABLE_COMPILATION_CACHE", "JAX_ENABLE_CUSTOM_PRNG",
    "JAX_ENABLE_PGLE", "JAX_ENABLE_X64", "JAX_EXPERIMENTAL_UNSAFE_XLA_RUNTIME_ERRORS",
    "JAX_EXPLAIN_CACHE_MISSES", "JAX_EXPORT_CALLING_CONVENTION_VERSION",
    "JAX_HLO_SOURCE_FILE_CANONICALIZATION_REGEX", "JAX_INCLUDE_DEBUG_INFO_IN_DUMPS",
    "JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", "JAX_LEGACY_PRNG_KEY", "JAX_LOG_CHECKPOINT_RESIDUALS",
    "JAX_LOG_COMPILES", "JAX_NUMPY_DTYPE_PROMOTION", "JAX_NUMPY_RANK_PROMOTION",
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES",
    "JAX_PGLE_AGGREGATION_PERCENTILE", "JAX_PGLE_PROFILING_RUNS", "JAX_PJRT_CLIENT_CREATE_OPTIONS",
    "JAX_PLATFORM_NAME", "JAX_PLATFORMS", "JAX_PPRINT_USE_COLOR", "JAX_RAISE_PERSISTENT_CACHE_ERRORS",
    "JAX_RANDOM_SEED_OFFSET", "JAX_ROCM_VISIBLE_DEVICES", "JAX_SERIALIZATION_VERSION",
    "JAX_SHARE_BINARY_BETWEEN_HOSTS", "JAX_SHARE_BINARY_BETWEEN_HOSTS_TIMEOUT_MS", "JAX_SOFTMAX_CUSTOM_JVP",
    "JAX_THREEFRY_GPU_KERNEL_LOWERING", "JAX_THREEFRY_PARTITIONABLE", "JAX_TRACEBACK_FILTERING",
    "JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "JAX_TRACER_ERROR_NUM_TRACEBACK_FRAMES", "JAX_TRANSFER_GUARD",
    "JAX_TRANSFER_GUARD_DEVICE_TO_DEVICE", "JAX_TRANSFER_GUARD_DEVICE_TO_HOST",
    "JAX_TRANSFER_GUARD_HOST_TO_DEVICE", "JAX_XLA_BACKEND", "JAX_XLA_PROFILE_VERSION"})
# Calls that start the backend when they run (beside every call that makes an array, and a call
# of a compiled function): device and process queries.
BACKEND_QUERIES = frozenset({"jax.devices", "jax.local_devices", "jax.device_count", "jax.local_device_count",
                             "jax.default_backend", "jax.process_index", "jax.process_count",
                             "jax.extend.backend.get_backend", "jax.lib.xla_bridge.get_backend"})
DISTRIBUTED_INITIALIZE = "jax.distributed.initialize"
# Calls that start another process, which reads the environment it is given (``os.environ`` set
# for a child is not a late setting of this one).
CHILD_PROCESS_PREFIXES = ("subprocess.", "multiprocessing.", "concurrent.futures.ProcessPoolExecutor",
                          "os.system", "os.exec", "os.spawn", "os.popen", "os.fork")
# Calls that run a function of the module as the program's entry point later (absl's ``app.run(main)``).
# Library calls that run a function of the program as its entry point, outside any trace (the position of
# that function): absl's ``app.run(main)``, python-fire's ``fire.Fire(main)``.
ENTRY_RUNNERS = {"absl.app.run": 0, "fire.Fire": 0}
# Decorators that make a function a command-line command, run by its library from ``main``, never under a trace:
# click's ``@click.command()``/``@click.group()`` and the ``.command()`` of a group made so; typer's
# ``@app.command()`` of ``app = typer.Typer()``.
CLI_COMMANDS = frozenset({"click.command", "click.group"})
CLI_APPS = frozenset({"typer.Typer", "click.Group", "click.group"})

# Builtins that pull a value to the host.
HOST_BUILTINS = {"builtins.float", "builtins.int", "builtins.bool", "builtins.complex"}
FORMAT_BUILTINS = {"builtins.str", "builtins.repr", "builtins.format", "builtins.print"}

# Multi-host utilities that copy every leaf of their first argument to host memory: both end in
# ``np.asarray`` of each leaf (jax 0.10.2, ``jax/experimental/multihost_utils.py``:
# ``process_allgather`` returns NumPy arrays; ``assert_equal`` gathers the tree from every process
# and compares the copies with ``np.equal`` on the host).
HOST_GATHERS = {"jax.experimental.multihost_utils.process_allgather", "jax.experimental.multihost_utils.assert_equal"}
# Real NumPy entry points that copy a device array to host memory.
NUMPY_FETCH = {"numpy.asarray", "numpy.array", "numpy.asanyarray", "numpy.ascontiguousarray"}
# NumPy functions that read metadata only: they never copy an array's data.
NUMPY_METADATA = {
    "numpy.shape", "numpy.ndim", "numpy.size", "numpy.result_type", "numpy.isscalar", "numpy.iterable",
    "numpy.dtype", "numpy.issubdtype", "numpy.iinfo", "numpy.finfo", "numpy.promote_types", "numpy.can_cast",
    "numpy.broadcast_shapes", "numpy.ndarray", "numpy.isdtype", "numpy.min_scalar_type",
    "numpy.iscomplexobj", "numpy.isrealobj", "numpy.dtypes",
}
# NumPy functions that hand an argument that is not an ndarray to its own method of the same name
# (``np.sum(x)`` calls ``x.sum()``): on a jax.Array they return a jax.Array and copy nothing
# (checked on jax 0.10.2 and NumPy 2: each returns ``ArrayImpl``). ``np.argsort``, ``np.diagonal``
# and ``np.trace`` are not among them: they call ``asanyarray`` first.
NUMPY_FORWARDING = {
    "numpy." + n for n in (
        "sum", "mean", "std", "var", "max", "min", "amax", "amin", "argmax", "argmin", "prod", "cumsum",
        "cumprod", "all", "any", "round", "around", "reshape", "transpose", "squeeze", "swapaxes", "repeat",
    )
}
# NumPy functions that write their argument to a file: the host needs its data there.
NUMPY_HOST_IO = {"numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt"}
# NumPy functions that are fine on a tracer (they read metadata only).
NUMPY_TRACER_SAFE = NUMPY_METADATA | {
    # These hand a non-ndarray argument to its own method (np.sum(t) calls t.sum()), which on a
    # tracer is the jnp operation: they work under jit (checked on jax 0.10.2 for the common ones).
    "numpy.sum", "numpy.mean", "numpy.std", "numpy.var", "numpy.max", "numpy.min", "numpy.amax",
    "numpy.amin", "numpy.argmax", "numpy.argmin", "numpy.prod", "numpy.cumsum", "numpy.cumprod",
    "numpy.all", "numpy.any", "numpy.round", "numpy.around", "numpy.reshape", "numpy.transpose",
    "numpy.squeeze", "numpy.swapaxes", "numpy.take", "numpy.repeat", "numpy.argsort", "numpy.diagonal",
    "numpy.trace",
    # ``m[indexer]`` on its argument, no conversion (checked on jax 0.10.2 with NumPy 2: ``np.fliplr``,
    # ``np.flipud`` and ``np.rot90`` convert first and fail)
    "numpy.flip",
}

TIMERS = {
    "time.perf_counter", "time.perf_counter_ns", "time.time", "time.time_ns", "time.monotonic",
    "time.monotonic_ns", "time.process_time", "timeit.default_timer", "timeit.timeit", "timeit.repeat",
    "timeit.Timer", "datetime.datetime.now", "datetime.datetime.utcnow",
}

CACHE_DECORATORS = {"functools.cache", "functools.lru_cache", "functools.cached_property"}

LOG_METHODS = {"debug", "info", "warning", "warn", "error", "critical", "exception", "log"}
# absl's logging module: its default verbosity shows INFO and above (absl-py's logging/__init__.py:
# ``DEFAULT_VERBOSITY`` / ``--verbosity=0`` is INFO), so these format their arguments on every call;
# ``debug`` and ``vlog`` do only under a raised verbosity.
ABSL_SHOWN_LOG_FUNCTIONS = frozenset("absl.logging." + n for n in (
    "info", "warning", "warn", "error", "fatal", "exception", "log_every_n_seconds", "log_first_n", "log_every_n"))

# Functions that call their first argument on every leaf of the trees after it.
TREE_MAPS = {"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"}

BLOCK_UNTIL_READY = "jax.block_until_ready"
DEVICE_GET = "jax.device_get"
DEVICE_PUT = "jax.device_put"
PARTIAL = "functools.partial"


CANONICAL_NAMES = {"jax.experimental.pjit.pjit": "jax.jit", "jax.api": "jax",
                   "jax.partial": PARTIAL}  # JAX 0.2.20 and older re-exported functools.partial


_CANONICAL_CACHE: dict = {}


def canonical(name: str) -> str:
    """The public spelling of a qualified name (``jax._src.api.jit`` -> ``jax.jit``)."""
    hit = _CANONICAL_CACHE.get(name)
    if hit is None:
        hit = _CANONICAL_CACHE[name] = _canonical(name)
        if len(_CANONICAL_CACHE) > 100_000:
            _CANONICAL_CACHE.clear()
    return hit


def _canonical(name: str) -> str:
    if name in CANONICAL_NAMES:
        return CANONICAL_NAMES[name]
    dotted = name + "."
    for old, new in CANONICAL_PREFIXES:
        if dotted.startswith(old):
            return (new + name[len(old):]) if len(name) >= len(old) else new[:-1]
    return name


def produces_array(qualname: str) -> bool:
    if qualname in ARRAY_PRODUCERS:
        return True
    if qualname in NON_ARRAY_RESULTS or qualname.startswith(NON_ARRAY_PREFIXES):
        return False
    return qualname.startswith(ARRAY_PRODUCER_PREFIXES)


# Array constructors and shape-taking functions: name -> the (position, keyword) of every
# argument that decides an output shape (JAX303: sizes in traced code; JAX304: sizes that
# follow a loop).
_NP = "jax.numpy."
_R = "jax.random."
_L = "jax.lax."
SHAPE_ARGS: dict = {
    **{_NP + n: [(0, "shape")] for n in ("zeros", "ones", "empty", "full")},
    _NP + "arange": [(0, "start"), (1, "stop"), (2, "step")],
    **{_NP + n: [(2, "num")] for n in ("linspace", "logspace", "geomspace")},
    _NP + "eye": [(0, "N"), (1, "M")],
    _NP + "tri": [(0, "N"), (1, "M")],
    _NP + "identity": [(0, "n")],
    _NP + "tril_indices": [(0, "n"), (2, "m")],
    _NP + "triu_indices": [(0, "n"), (2, "m")],
    _NP + "reshape": [(1, "shape"), (None, "newshape")],
    _NP + "broadcast_to": [(1, "shape")],
    **{_NP + n: [(2, "shape")] for n in ("zeros_like", "ones_like", "empty_like")},
    _NP + "full_like": [(3, "shape")],
    _L + "full": [(0, "shape")],
    _L + "iota": [(1, "size")],
    _L + "broadcast": [(1, "sizes")],
    _L + "broadcast_in_dim": [(1, "shape")],
    _L + "reshape": [(1, "new_sizes")],
    _L + "full_like": [(3, "shape")],
    _L + "dynamic_slice": [(2, "slice_sizes")],
    _L + "dynamic_slice_in_dim": [(2, "slice_size")],
    _R + "split": [(1, "num")],
    # jax.random samplers: the position of `shape` in each signature (jax 0.10.2).
    **{_R + n: [(1, "shape")] for n in ("normal", "uniform", "randint", "bits", "cauchy", "exponential",
                                         "gumbel", "laplace", "logistic", "maxwell", "rademacher")},
    **{_R + n: [(2, "shape")] for n in ("bernoulli", "gamma", "loggamma", "chisquare", "dirichlet",
                                         "generalized_normal", "geometric", "lognormal", "pareto", "poisson",
                                         "rayleigh", "t", "wald", "choice")},
    **{_R + n: [(3, "shape")] for n in ("ball", "beta", "binomial", "categorical", "double_sided_maxwell", "f",
                                         "multinomial", "multivariate_normal", "truncated_normal",
                                         "weibull_min")},
    _R + "triangular": [(4, "shape")],
    _R + "orthogonal": [(1, "n"), (2, "shape"), (4, "m")],
}

# Calls that turn a Python list (or a list of arrays) into one array whose leading size is the
# list's length (JAX304: a list that grows per iteration, or per-item data of varying length).
LIST_TO_ARRAY = frozenset({
    *(_NP + n for n in ("array", "asarray", "stack", "concatenate", "vstack", "hstack", "column_stack",
                        "dstack", "row_stack")),
    *("numpy." + n for n in ("array", "asarray", "stack", "concatenate", "vstack", "hstack", "column_stack")),
})

# Methods whose result has a length that depends on the data it is given: text split into words
# or encoded into tokens (JAX304: ``jnp.array([vocab[w] for w in sentence.split()])``).
RAGGED_METHODS = frozenset({"split", "rsplit", "splitlines", "findall", "encode", "tokenize", "word_tokenize"})


# Functions whose output size depends on the data unless ``size=`` is given (JAX301 in traced code,
# JAX304 outside it, on data that changes per iteration):
# name -> positions of the arguments whose values decide the size.
SIZE_FUNCS = {
    "jax.numpy.nonzero": (0,), "jax.numpy.argwhere": (0,), "jax.numpy.flatnonzero": (0,),
    "jax.numpy.unique": (0,), "jax.numpy.unique_values": (0,), "jax.numpy.unique_counts": (0,),
    "jax.numpy.unique_inverse": (0,), "jax.numpy.unique_all": (0,),
    "jax.numpy.compress": (0,), "jax.numpy.extract": (0,),
    "jax.numpy.union1d": (0, 1), "jax.numpy.intersect1d": (0, 1), "jax.numpy.setdiff1d": (0, 1),
    "jax.numpy.setxor1d": (0, 1),
}
