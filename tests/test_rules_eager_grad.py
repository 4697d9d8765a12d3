"""Tests of JAX701's eager gradients: a gradient transform's product (``jax.grad``,
``jax.value_and_grad``) called outside jit at every step of a loop, which traces the function
again and runs its passes op by op at every call. Positive cases mark every expected finding with
``# expect: CODE`` and compare with the findings of all rules."""

from __future__ import annotations

from ruletools import assert_marked, default_findings, findings, line_of, messages, opt_in_findings

_HEAD = """
    import functools
    import jax
    import jax.numpy as jnp
    from jax import grad

    def loss(w, x):
        return jnp.mean((x @ w) ** 2)
"""


def test_jax701_gradient_function_made_once_and_called_every_step():
    # dl-workshop's model_optimization_loop: dloss = grad(loss), then 3000 eager steps
    src = _HEAD + """
    def fit(w, x, n_steps=3000):
        dloss = grad(loss)
        for i in range(n_steps):
            w = w - 0.01 * dloss(w, x)  # expect: JAX701
        return w

    print(fit(jnp.ones(3), jnp.ones((3, 3))))
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX701")
    assert msg.startswith("`dloss` (`grad(...)` on line 11)") and "traces `loss` again" in msg
    assert "loop on line 12" in msg


def test_jax701_value_and_grad_applied_in_the_loop_of_a_while():
    assert_marked(_HEAD + """
    def fit(w, x, tol):
        err = 1.0
        while err > tol:  # expect: JAX201
            err, g = jax.value_and_grad(loss)(w, x)  # expect: JAX701
            w = w - 0.1 * g
        return w

    def main():
        fit(jnp.ones(3), jnp.ones((3, 3)), 1e-3)

    if __name__ == "__main__":
        main()
    """)


def test_jax701_partial_of_a_gradient_at_module_level_one_finding_per_loop():
    # a notebook's gradient descent: the gradient conditioned on the data with partial, 300 steps
    src = _HEAD + """
    dloss = grad(loss)
    dloss = functools.partial(dloss, x=jnp.ones((3, 3)))
    w = jnp.ones(3)
    for i in range(300):
        w -= dloss(w) * 0.01  # expect: JAX701
        w -= dloss(w) * 0.01
    """
    assert_marked(src)


def test_jax701_a_name_imported_then_bound_to_a_gradient_in_a_later_cell():
    # dl-workshop's notebook: `from dl_workshop.answers import df` (a hand-written derivative),
    # then a later cell's `df = grad(f)`; only the loop after the rebinding runs a gradient
    assert_marked(_HEAD + """
    from lib import df
    w = 10.0
    for i in range(1000):
        w = w - df(w) * 0.01
    df = grad(loss)
    w = jnp.ones(3)
    for i in range(1000):
        w = w - df(w, jnp.ones((3, 3))) * 0.01  # expect: JAX701
    from lib import df
    for i in range(1000):
        w = w - df(w) * 0.01
    """)


def test_jax701_gradient_passed_by_every_caller_and_a_loop_that_also_calls_compiled_code():
    assert_marked(_HEAD + """
    evaluate = jax.jit(loss)

    def descend(w, x, dfun, steps):
        losses = []
        for i in range(steps):
            w = w - 0.01 * dfun(w, x)  # expect: JAX701
            losses.append(evaluate(w, x))
        return w, losses

    def main(w, x):
        return descend(w, x, grad(loss), 1000)

    main(jnp.ones(3), jnp.ones((3, 3)))
    """)


def test_jax701_a_whole_eager_step_is_one_finding_on_its_gradient():
    # no compiled call in the loop: the optimizer update is not reported on its own (the advice
    # is to jit the whole step), the gradient is; opt-in here, as the model cannot show that the loop
    # over batches threads JAX state (`tx` is a parameter: what its `update` returns is not known)
    src = _HEAD + """
    import optax

    def eager_everything(params, batches, tx, opt_state):
        for batch in batches:
            grads = jax.grad(lambda p: jnp.mean(p["w"] * batch))(params)  # expect: JAX701 (opt-in)
            updates, opt_state = tx.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        return params
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX701")
    assert msg.startswith("`jax.grad(...)` computes a gradient") and "traces `lambda p:" in msg


def test_jax701_eager_gradient_in_a_function_no_code_of_the_module_calls_is_opt_in():
    # a library function (uvadlc's accumulate_gradients_loop, scenic's PGD attack): its callers in
    # other modules run it under jit or pmap, where the loop is unrolled into one trace
    src = _HEAD + """
    def accumulate(w, batches, n):
        g = jax.value_and_grad(loss)
        total = 0.0
        for i in range(n):
            value, grads = g(w, batches[i])  # expect: JAX701 (opt-in)
            total = total + grads
        return total

    def attack(w, x, steps):
        for _ in range(steps):
            w = w + 0.1 * jnp.sign(grad(loss)(w, x))  # expect: JAX701 (opt-in)
        return w

    def run(w, x):  # called by no code of this module either
        return attack(w, x, 1000)
    """
    assert_marked(src)
    reasons = [r for _, _, r in opt_in_findings(src, "JAX701")]
    assert reasons[0].startswith("eager unknown: whether `accumulate` runs under a trace")
    assert reasons[1].startswith("eager unknown: whether `attack` runs under a trace")


def test_jax701_eager_gradient_in_test_code_or_over_items_is_opt_in():
    src = _HEAD + """
    def test_descends(x):
        w = jnp.ones(3)
        for i in range(1000):
            w = w - 0.01 * grad(loss)(w, x)  # expect: JAX701 (opt-in)

    def gradients(ws, x):
        return [grad(loss)(w, x) for w in ws]  # expect: JAX701 (opt-in)

    def norms(ws, x):
        out = []
        for w in ws:
            out.append(jnp.linalg.norm(grad(loss)(w, x)))  # expect: JAX701 (opt-in)
        return out
    """
    assert_marked(src)
    reasons = [r for _, _, r in opt_in_findings(src, "JAX701")]
    assert "test code" in reasons[0] and all(r.startswith("per-step unknown") for r in reasons[1:])


def test_jax701_compiled_gradients_are_not_reported():
    src = _HEAD + """
    dloss_jit = jax.jit(grad(loss))
    loss_jit = jax.jit(loss)

    @jax.jit
    def step(w, x):
        return w - 0.01 * grad(loss)(w, x)

    def fit(w, x, n):
        g = grad(loss)
        g = jax.jit(g)
        for i in range(n):
            w = step(w, x)
            w = w - 0.01 * dloss_jit(w, x)
            w = w - 0.01 * g(w, x)
            w = w - 0.01 * grad(loss_jit)(w, x)
        return w

    def scan_fit(w, x):
        def body(w, _):
            return w - 0.01 * grad(loss)(w, x), None
        return jax.lax.scan(body, w, None, length=1000)[0]

    def inner(w, x, n):
        for i in range(n):
            w = w - 0.01 * grad(loss)(w, x)
        return w

    outer = jax.jit(inner, static_argnums=2)
    """
    assert findings(src, "JAX701") == []


def test_jax701_near_misses_few_steps_periodic_and_a_gradient_of_unknown_origin():
    src = _HEAD + """
    def few(w, x):
        for i in range(100):
            w = w - 0.01 * grad(loss)(w, x)
        return w

    def checked(w, x, step, n):
        for i in range(n):
            w = step(w, x)
            if i % 100 == 0:
                print(jnp.linalg.norm(grad(loss)(w, x)))
        return w

    def given(w, x, dfun, n):
        for i in range(n):
            w = w - 0.01 * dfun(w, x)
        return w

    def hessian_free(w, x, n):
        for i in range(n):
            w = w - 0.01 * jax.jacfwd(loss)(w, x)
        return w
    """
    assert findings(src, "JAX701") == []


def test_jax701_eager_gradient_does_not_depend_on_the_names():
    src = _HEAD + """
    def fit(w, x, n_steps=3000):
        dloss = grad(loss)
        for i in range(n_steps):
            w = w - 0.01 * dloss(w, x)
        return w

    print(fit(jnp.ones(3), jnp.ones((3, 3))))
    """
    renamed = src.replace("dloss", "q").replace("loss", "objective").replace("fit", "run").replace(
        "n_steps", "k")
    assert default_findings(src, "JAX701") == default_findings(renamed, "JAX701") == [(13, "JAX701")]


def test_jax701_a_step_function_without_jit_that_computes_a_gradient_called_every_step():
    # fresh set S (an LLM trainer): `train_step` runs value_and_grad and apply_gradients, and the loop
    # calls it with no jit anywhere: the whole forward and backward pass runs op by op every step
    src = _HEAD + """
    def train_step(w, batch):
        def loss_fn(p):
            return loss(p, batch)
        value, grads = jax.value_and_grad(loss_fn)(w)
        return w - 0.01 * grads, value

    def train(w, batches, steps_per_epoch=1000):
        for step in range(steps_per_epoch):
            w, value = train_step(w, batches[step % 8])  # expect: JAX701
        return w

    if __name__ == "__main__":
        train(jnp.ones(3), jnp.ones((8, 3, 3)))
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX701")
    assert msg.startswith("`train_step` is not jitted, and its body computes a gradient (`jax.value_and_grad(...)` on "
                          "line 13)") and "loop on line 17" in msg and "jit `train_step`" in msg


def test_jax701_near_misses_of_a_step_function_computing_a_gradient():
    src = _HEAD + """
    from mylib import compile_me

    @jax.jit
    def jitted_step(w, x):
        return w - jax.grad(loss)(w, x)

    def rebound_step(w, x):
        return w - jax.grad(loss)(w, x)
    rebound_step = jax.jit(rebound_step)

    @compile_me
    def decorated_step(w, x):
        return w - jax.grad(loss)(w, x)

    def plain_step(w, x):
        return w - jax.grad(loss)(w, x)

    def no_gradient(w, x):
        return w - 0.1 * loss(w, x)

    def train(w, x, n):
        for i in range(n):
            w = jitted_step(w, x)
            w = rebound_step(w, x)
            w = decorated_step(w, x)
            w = no_gradient(w, x)
        for i in range(3):  # a few known iterations
            w = plain_step(w, x)
        for i in range(n):
            if i % 100 == 0:  # periodic
                w = plain_step(w, x)
        return w

    @jax.jit
    def traced(w, x):
        for i in range(10):
            w = plain_step(w, x)  # under a trace: unrolled into one program
        return w

    if __name__ == "__main__":
        train(jnp.ones(3), jnp.ones((3, 3)), 1000)
    """
    assert default_findings(src, "JAX701") == []
    assert opt_in_findings(src, "JAX701") == []


def test_jax701_flax_nnx_and_equinox_gradients_in_a_step_without_jit():
    # fresh set T: the notebook's `@nnx.jit` is commented out; nnx.value_and_grad outside a trace runs the
    # passes op by op (15.7 ms a call against 0.41 ms jitted, names.EAGER_GRADIENT_TRANSFORMS)
    src = """
    import equinox as eqx
    from flax import nnx

    def loss_fn(model, batch):
        return (model(batch) ** 2).mean()

    #@nnx.jit
    def train_step(model, optimizer, batch):
        loss, grads = nnx.value_and_grad(loss_fn)(model, batch)
        optimizer.update(model, grads)
        return loss

    @nnx.jit
    def jitted_step(model, optimizer, batch):
        loss, grads = nnx.value_and_grad(loss_fn)(model, batch)
        optimizer.update(model, grads)
        return loss

    def eqx_step(model, batch):
        return eqx.filter_grad(loss_fn)(model, batch)

    def train(model, optimizer, batches, steps):
        for i in range(steps):
            train_step(model, optimizer, batches[i])  # expect: JAX701
        for i in range(steps):
            jitted_step(model, optimizer, batches[i])
        for i in range(steps):
            eqx_step(model, batches[i])  # expect: JAX701

    if __name__ == "__main__":
        train(None, None, None, 1000)
    """
    assert_marked(src)


def test_jax701_an_agents_step_method_whose_only_jax_work_is_its_eager_gradient():
    # fresh set U (flaxdocs' DQN): the env loop's only JAX work is `agent.train_step()`, a method
    # returning a float whose helper computes an NNX gradient op by op: the loop runs JAX work
    src = """
    import jax.numpy as jnp
    from flax import nnx

    class Agent:
        def __init__(self, model, optimizer):
            self.model, self.optimizer = model, optimizer

        def train_step(self, batch):
            return float(self._update(batch))

        def _update(self, batch):
            loss, grads = nnx.value_and_grad(lambda m: jnp.mean(m(batch) ** 2))(self.model)
            self.optimizer.update(self.model, grads)
            return loss

        def act(self, obs):
            return int(obs.argmax())

    def train(env, model, optimizer, episodes, steps):
        agent = Agent(model, optimizer)
        for episode in range(episodes):
            obs = env.reset()
            for step in range(steps):
                obs = env.step(agent.act(obs))
                agent.train_step(obs)  # expect: JAX701
        for step in range(steps):
            agent.act(env.reset())  # no gradient: no JAX work the loop shows

    if __name__ == "__main__":
        train(None, None, None, 10, 1000)
    """
    assert_marked(src)


def test_jax701_an_eager_update_after_the_jitted_gradient_inside_a_step_function():
    # fresh set U (a DDPM trainer): `train_step` is plain Python; it calls the jitted gradient, then
    # `state.apply_gradients` outside jit, every step of a loop in the function python-fire runs
    src = """
    from functools import partial

    import fire
    import jax

    @partial(jax.jit, static_argnames=["scale"])
    def grads_and_loss(state, batch, scale):
        return jax.value_and_grad(lambda p: (p * batch).sum() * scale)(state.params)

    def train_step(state, batch):
        loss, grads = grads_and_loss(state, batch, 2.0)
        state = state.apply_gradients(grads=grads)  # expect: JAX701
        return state, loss

    def main(state, batches, epochs=10):
        for epoch in range(epochs):
            for batch in batches:
                state, loss = train_step(state, batch)

    if __name__ == "__main__":
        fire.Fire(main)
    """
    assert_marked(src)
    (msg,) = messages(src, "JAX701")
    assert "runs outside jit after the compiled `grads_and_loss`" in msg and "move the update into `grads_and_loss`" in msg
    # near misses: the step jitted, or called from code the module does not show runs eagerly
    jitted = src.replace("def train_step(", "@jax.jit\ndef train_step(").replace("  # expect: JAX701", "")
    assert findings(jitted, "JAX701") == []
    library = src.replace("        fire.Fire(main)", "        pass").replace("  # expect: JAX701", "  # expect: JAX701 (opt-in)")
    assert_marked(library)


def test_jax701_an_eager_forward_chain_is_opt_in_and_an_evaluation_over_batches_is_not_one():
    # fresh set U (jax_diffusion's run_ddpm): the UNet's output feeds its next input for 1000 steps,
    # eagerly; how long the chain runs and how large the model is decide its cost: opt-in, saying so
    src = """
    import jax
    import jax.numpy as jnp

    def run_ddpm(model, params, z, alphas, key):
        for t in reversed(range(len(alphas))):
            g = model.apply({"params": params}, z, jnp.array([t]))  # HERE
            key, sub = jax.random.split(key)
            z = (z - alphas[t] * g) + jax.random.normal(sub, z.shape)
        return z

    def evaluate(model, params, batches):
        out = []
        for x in batches:
            out.append(model.apply({"params": params}, x))
        return out

    def rollout(net, params, obs, steps):
        net.apply = jax.jit(net.apply)
        for _ in range(steps):
            obs = net.apply({"params": params}, obs)
        return obs

    def main(model, params, z, alphas, batches):
        return run_ddpm(model, params, z, alphas, jax.random.key(0)), evaluate(model, params, batches)

    if __name__ == "__main__":
        main(None, None, None, None, None)
    """
    assert default_findings(src, "JAX701") == []
    ((line, code, reason),) = opt_in_findings(src, "JAX701")
    assert line == line_of(src, "# HERE")
    assert reason.startswith("how many steps the chain runs and how large the model is are not known")


_VMAPPED = """
    import jax
    import jax.numpy as jnp

    def rollout(params, x):
        def body(c, _):
            return c * params, c
        return jax.lax.scan(body, x, None, length=100)[0].sum()  # expect: JAX102

    def train(params, xs, n):
        for i in range(n):
            g = {call}(params, xs)  # expect: JAX701
            params = params - 0.1 * g.mean()
        return params

    print(train(1.0, jnp.ones(8), 1000))
"""


def test_jax701_a_vmapped_gradient_outside_jit_every_step():
    # issue 39: `jax.vmap(jax.grad(f))` outside jit traces `f` again at every call (JAX701), and its scan's
    # body, a new function each time, is compiled again too (JAX102)
    assert_marked(_VMAPPED.replace("{call}", "jax.vmap(jax.grad(rollout), in_axes=(None, 0))"))


def test_jax701_a_jitted_vmapped_gradient_is_compiled():
    src = _VMAPPED.replace("{call}", "vg").replace(
        "    def train(", "    vg = jax.jit(jax.vmap(jax.grad(rollout), in_axes=(None, 0)))\n\n    def train(")
    assert "vg = jax.jit" in src and default_findings(src) == []


_THROUGH_SCAN = """
    import jax
    import jax.numpy as jnp
    from jax import grad

    def body(c, x):
        return c * 0.9 + jnp.sin(x) * c, c

    def paths(p, xs):
        return jax.lax.scan(body, p, xs)[1]

    def loss_function(p, xs):
        return jnp.sum(paths(p, xs) ** 2)

    @jax.jit
    def jitted_loss(p, xs):
        return jnp.sum(paths(p, xs) ** 2)

    def loss_via_jit(p, xs):
        return jitted_loss(p, xs)

    def update(p, xs):
        return p - 0.01 * grad(loss_function)(p, xs)

    def update_via_jit(p, xs):
        return p - 0.01 * grad(loss_via_jit)(p, xs)

    def train(p, xs, n_iter):
        for it in range(n_iter):
            p = update(p, xs)  # THROUGH
            loss = loss_function(p, xs)
        for it in range(n_iter):
            p = update_via_jit(p, xs)
            loss = loss_function(p, xs)
        for it in range(n_iter):
            p = update_via_jit(p, xs)  # SAME PROGRAM
            loss = loss_via_jit(p, xs)
        return p

    train(jnp.ones(16), jnp.arange(50.0), 2000)
"""


def test_jax701_an_eager_gradient_through_a_scan_beside_a_program_per_iteration():
    """Fresh set AX (deep BSDE solvers): the loss runs `lax.scan`, and each iteration also evaluates the loss
    (a whole program per iteration, which hides a small eager update); but an eager gradient of a function
    that runs a scan compiles the scan's derivative at every call (105 ms a call against 0.02 ms jitted on
    CPU): reported. The gradient of a function that reaches the scan only through a jitted call (its derivative
    is cached with the compiled function) is reported only where it differentiates the very function whose call
    is the iteration's program (it does that work again, op by op around the compiled part), not beside another
    program."""
    src = _THROUGH_SCAN
    assert default_findings(src, "JAX701") == sorted([(line_of(src, "# THROUGH"), "JAX701"),
                                                      (line_of(src, "# SAME PROGRAM"), "JAX701")])


def test_loop_under_finds_the_device_loop_a_function_runs():
    import ast
    import textwrap

    from jaxlint.model import build_model
    from jaxlint.model.facts import deviceloops

    src = textwrap.dedent(_THROUGH_SCAN)
    m = build_model(ast.parse(src), src)
    by_name = {f.name: f for f in m.functions}
    scan_line = 1 + src.splitlines().index("    return jax.lax.scan(body, p, xs)[1]")
    assert [(c.lineno, via) for c, via in [deviceloops.loop_under(m, by_name["paths"])]] == [(scan_line, None)]
    loop, via = deviceloops.loop_under(m, by_name["loss_function"])  # one call down
    assert (loop.lineno, via) == (scan_line, None)
    loop, via = deviceloops.loop_under(m, by_name["loss_via_jit"])  # through a compiled function: named
    assert (loop.lineno, via) == (scan_line, "jitted_loss")
    assert deviceloops.loop_under(m, by_name["body"]) is None


def test_runtime_an_eager_gradient_through_a_scan_compiles_every_call():
    """Each eager call of the gradient compiles the scan's derivative again (the body is traced once, but the
    derivative's program is new at every call); jitted, it compiles once."""
    jax = __import__("pytest").importorskip("jax")
    from jax._src import monitoring

    jnp = jax.numpy
    compiles = []

    def listener(event, duration, **kw):
        if event.endswith("backend_compile_duration"):
            compiles.append(event)

    def body(c, x):
        return c * 0.9 + jnp.sin(x) * c, c

    def loss(p, xs):
        return jnp.sum(jax.lax.scan(body, p, xs)[1] ** 2)

    g = jax.grad(loss)
    p, xs = jnp.ones(4), jnp.arange(5.0)
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        g(p, xs)
        warm = len(compiles)
        g(p, xs)
        g(p, xs)
        eager_more = len(compiles) - warm
        jg = jax.jit(g)
        jg(p, xs)
        settled = len(compiles)
        jg(p, xs)
        jg(p, xs)
        jitted_more = len(compiles) - settled
    finally:
        drop = getattr(monitoring, "unregister_event_duration_listener", None) or getattr(
            monitoring, "_unregister_event_duration_listener_by_callback")
        drop(listener)
    assert eager_more >= 2  # each later eager call compiled again
    assert jitted_more == 0
