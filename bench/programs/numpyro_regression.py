"""After numpyro's getting-started regression, reduced: a Bayesian linear regression sampled with
NUTS on synthetic data."""
import numpy as np
import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS

rng = np.random.default_rng(0)
x = jnp.asarray(rng.normal(size=(200, 3)).astype(np.float32))
y = x @ jnp.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * jnp.asarray(rng.normal(size=200).astype(np.float32))


def model(x, y=None):
    w = numpyro.sample("w", dist.Normal(jnp.zeros(3), 1.0).to_event(1))
    b = numpyro.sample("b", dist.Normal(0.0, 1.0))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    numpyro.sample("y", dist.Normal(x @ w + b, sigma), obs=y)


mcmc = MCMC(NUTS(model), num_warmup=100, num_samples=100, progress_bar=False)
mcmc.run(jax.random.PRNGKey(0), x, y)
print("w", [round(float(v), 1) for v in mcmc.get_samples()["w"].mean(0)])
