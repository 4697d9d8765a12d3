"""JAX502 through flax ``Module.init(key, x)`` (jaxlint/model/facts/flaxmodules.py, keypairs.init_pair):
flax derives each parameter's key from the given key and the parameter's path, so two instances of one
module class initialised from one key get the same weights (fresh H's GAN notebook: a generator and a
discriminator of one ``MLP``), while a ``jax.random`` draw from that key shares no bits with the weights
(7 findings judged FALSE before this was known). One instance initialised twice (a target network's
copy) and modules of different classes (shared paths not shown) are opt-in."""

from __future__ import annotations

from ruletools import assert_marked, default_findings, make_project, messages, opt_in_findings, path_codes, path_default_codes

_MODULES = """
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn


class MLP(nn.Module):
    features: tuple = (8, 8)

    @nn.compact
    def __call__(self, x):
        for f in self.features:
            x = nn.Dense(f)(x)
        return x


class Critic(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(x)


def setup(key, x, z):
    key, k_model = jax.random.split(key)
    discriminator = MLP(features=(25, 1))
    generator = MLP(features=(25, 2))
    noise = jax.random.normal(k_model, z.shape)  # a draw: flax's per-parameter keys share no bits with it
    disc_params = discriminator.init(k_model, x)
    gen_params = generator.init(k_model, z)  # expect: JAX502
    critic_params = Critic().init(k_model, x)  # expect: JAX502 (opt-in)
    tx = optax.adam(1e-3)
    opt_state = tx.init(gen_params)  # an optimizer's init takes parameters, not a key
    return disc_params, gen_params, critic_params, noise, opt_state
"""


def test_two_instances_of_one_module_class_initialised_from_one_key():
    assert_marked(_MODULES)
    gen, critic = messages(_MODULES, "JAX502")  # generator's (one class), then Critic's (another class)
    assert "instances of one class" in gen and "same weights wherever their shapes agree" in gen
    assert "instances of one class" not in critic and "parameter paths and shapes coincide" in critic


def test_one_instance_initialised_twice_is_opt_in():
    src = """
    import jax
    from flax import linen as nn

    def make(key, x):
        q_network = nn.Dense(2)
        return dict(params=q_network.init(key, x), target_params=q_network.init(key, x))
    """
    assert default_findings(src, "JAX502") == []
    (found,) = opt_in_findings(src, "JAX502")
    assert found[2].startswith("the same module initialised twice from one key")


def test_a_draw_beside_an_init_is_no_reuse():
    src = """
    import jax
    from flax import linen as nn

    def make(key, x):
        model = nn.Dense(4)
        params = model.init(key, x)
        noise = jax.random.normal(key, x.shape)
        return params, noise
    """
    assert default_findings(src, "JAX502") == [] and opt_in_findings(src, "JAX502") == []


def test_an_object_not_shown_to_be_a_flax_module_draws_nothing():
    src = _MODULES.replace("class MLP(nn.Module):", "class MLP:").replace("  # expect: JAX502\n", "\n")
    assert default_findings(src, "JAX502") == []


def test_module_classes_of_another_module_of_the_project(tmp_path):
    root = make_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/nets.py": ("from flax import linen as nn\n\n"
                        "class UNet(nn.Module):\n    features: int = 8\n\n"
                        "    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(self.features)(x)\n\n"
                        "class Plain:\n    def init(self, key, x):\n        return x\n"),
        "train.py": ("import jax\nfrom pkg.nets import UNet, Plain\n\n"
                     "def run(key, x):\n    g_a = UNet()\n    g_b = UNet()\n    a = g_a.init(key, x)\n"
                     "    b = g_b.init(key, x)\n    c = Plain().init(key, x)\n    return a, b, c\n\n\n"
                     "run(jax.random.key(0), 1.0)\n"),
    })
    (tmp_path / ".git").mkdir()
    # two generators of the project's UNet from one key: the same weights; Plain's init is not known to draw
    assert path_default_codes(root / "train.py") == [(8, "JAX502")]
    assert path_codes(root / "train.py") == [(8, "JAX502")]
