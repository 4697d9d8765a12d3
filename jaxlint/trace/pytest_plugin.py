"""pytest plugin (registered through the ``pytest11`` entry point): the ``jax_audit`` fixture.

    def test_train_step_compiles_once(jax_audit):
        for batch in batches:
            state = train_step(state, batch)
        jax_audit.assert_no_recompile(train_step)   # the message has the reasons and the fix
        assert jax_audit.transfer_count() == 0

JAX is imported only when a test asks for the fixture.
"""

import pytest


@pytest.fixture
def jax_audit(request):
    """An active ``jaxlint.trace.audit()`` for the duration of the test; the test module's own
    jitted functions (``@jax.jit`` at module level) get their calls counted."""
    from jaxlint.trace import audit

    module = getattr(request, "module", None)
    with audit(namespace=vars(module) if module is not None else None) as a:
        yield a
