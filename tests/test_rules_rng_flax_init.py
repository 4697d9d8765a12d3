"""JAX502 through flax ``Module.init(key, x)`` (jaxlint/model/facts/flaxmodules.py): the module's
weights are drawn from the key, so another draw or another module's ``init`` from that key repeats its
bits. Fresh K's VQ-GAN trainer (``vqgan.init(key, x)``, ``disc.init(key, x)``) and fresh AD's CycleGAN
were catalogued misses; one module initialised twice from one key is opt-in (a target network's copy
is made so on purpose)."""

from __future__ import annotations

from jaxlint.model import build_model
from jaxlint.project import ProjectResolver
from ruletools import assert_marked, default_findings, make_project, opt_in_findings, path_default_codes

_MODULES = """
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn


class Encoder(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(8)(x)


class Critic(Encoder):  # a module through the module's own class
    pass


def setup(key, x):
    key, k_model = jax.random.split(key)
    enc = Encoder()
    enc_params = enc.init(k_model, x)
    critic_params = Critic().init(k_model, x)  # expect: JAX502
    noise = jax.random.normal(k_model, x.shape)  # expect: JAX502
    tx = optax.adam(1e-3)
    opt_state = tx.init(enc_params)  # an optimizer's init takes parameters, not a key
    dense = nn.Dense(4).init(key, x)
    return enc_params, critic_params, noise, opt_state, dense
"""


def test_a_key_that_initialised_a_flax_module_is_used_again():
    assert_marked(_MODULES)


def test_an_object_not_shown_to_be_a_flax_module_draws_nothing():
    src = _MODULES.replace("class Encoder(nn.Module):", "class Encoder:").replace(
        "    critic_params = Critic().init(k_model, x)  # expect: JAX502\n", "    critic_params = None\n")
    # Encoder is a plain class now: its init is not known to draw, so the normal draw is the first use
    assert default_findings(src, "JAX502") == []


def test_one_module_initialised_twice_from_one_key_is_opt_in():
    src = """
    import jax
    from flax import linen as nn

    class QNetwork(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(2)(x)

    def make(key, x):
        q = QNetwork()
        return dict(params=q.init(key, x), target_params=q.init(key, x))
    """
    assert default_findings(src, "JAX502") == []
    (found,) = opt_in_findings(src, "JAX502")
    assert found[2].startswith("the same module initialised twice from one key")


def test_a_module_class_of_another_module_of_the_project(tmp_path):
    root = make_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/nets.py": ("from functools import partial\nfrom flax import linen as nn\n\n"
                        "class UNet(nn.Module):\n    features: int = 8\n\n"
                        "    @nn.compact\n    def __call__(self, x):\n        return nn.Dense(self.features)(x)\n\n"
                        "UNetSmall = partial(UNet, features=4)\n\nclass Plain:\n    def init(self, key, x):\n"
                        "        return x\n"),
        "train.py": ("import jax\nfrom pkg.nets import UNet, UNetSmall, Plain\n\n"
                         "def run(key, x):\n    a = UNet().init(key, x)\n    b = UNetSmall().init(key, x)\n"
                         "    c = Plain().init(key, x)\n    return a, b, c\n\n\nrun(jax.random.key(0), 1.0)\n"),
    })
    (tmp_path / ".git").mkdir()
    # UNetSmall is a partial of a flax module: its init repeats UNet's draw; Plain's init is not known to draw
    assert path_default_codes(root / "train.py") == [(6, "JAX502")]
