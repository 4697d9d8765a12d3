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
def jax_audit():
    """An active ``jaxlint.trace.audit()`` for the duration of the test."""
    from jaxlint.trace import audit

    with audit() as a:
        yield a
