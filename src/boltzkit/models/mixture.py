"""Mixture of factorial Bernoulli distributions: the baseline of Salakhutdinov & Murray (2008, S1),
Sec. 5.1 ("mixture of Bernoullis", 10, 100 and 500 components).

With ``K`` components, mixing proportions ``pi_k`` and per-component pixel probabilities
``mu_ki`` (strictly between 0 and 1)::

    p(v) = sum_k pi_k prod_i mu_ki^v_i (1 - mu_ki)^(1 - v_i)

    log p(v) = logsumexp_k [ log pi_k + sum_i v_i logit(mu_ki) + sum_i log(1 - mu_ki) ]

It is normalised (``log Z = 0``), so ``log p(v)`` is exact; it is computed in float64. Training
(EM with smoothing) is in :mod:`boltzkit.learning.mixture`.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from boltzkit._numerics import bernoulli
from boltzkit.errors import BoltzkitError

#: The mixing proportions must sum to 1 within this tolerance (they are renormalised).
WEIGHT_SUM_TOL = 1e-6


class MixtureOfBernoullis(nn.Module):
    """A mixture of ``n_components`` factorial Bernoulli distributions over ``n_visible`` units.

    Parameters
    ----------
    weights
        Mixing proportions ``pi``, shape ``(K,)``: positive, summing to 1.
    means
        Pixel probabilities ``mu``, shape ``(K, n_visible)``, strictly between 0 and 1.
    dtype, device
        Of the parameters (float64 by default: the model is small and ``log p`` is exact).

    Examples
    --------
    >>> mob = MixtureOfBernoullis(torch.tensor([0.25, 0.75]), torch.full((2, 3), 0.5))
    >>> round(float(mob.log_prob(torch.zeros(1, 3))[0]), 6)  # 3 log(1/2)
    -2.079442
    """

    kind = "mixture"

    def __init__(
        self,
        weights: Tensor,
        means: Tensor,
        *,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        w = torch.as_tensor(weights).detach().to(torch.float64)
        mu = torch.as_tensor(means).detach().to(torch.float64)
        check_mixture(w, mu)
        w = w / w.sum()
        kw = {"dtype": dtype, "device": device}
        self.weights = nn.Parameter(w.to(**kw), requires_grad=False)
        self.means = nn.Parameter(mu.to(**kw), requires_grad=False)

    @classmethod
    def uniform(cls, n_components: int, n_visible: int, **kw) -> MixtureOfBernoullis:
        """Equal weights and every pixel probability 1/2."""
        return cls(
            torch.full((n_components,), 1.0 / n_components), torch.full((n_components, n_visible), 0.5), **kw
        )

    # ------------------------------------------------------------------------------- shape
    @property
    def n_components(self) -> int:
        return int(self.means.shape[0])

    @property
    def n_visible(self) -> int:
        return int(self.means.shape[1])

    @property
    def layer_sizes(self) -> tuple[int, ...]:
        """``(n_visible,)``: the only observed layer (the component is a latent label)."""
        return (self.n_visible,)

    @property
    def dtype(self) -> torch.dtype:
        return self.means.dtype

    @property
    def device(self) -> torch.device:
        return self.means.device

    def extra_repr(self) -> str:
        return f"n_components={self.n_components}, n_visible={self.n_visible}, dtype={self.dtype}"

    # --------------------------------------------------------------------------- densities
    def component_log_probs(self, v: Tensor) -> Tensor:
        """``log pi_k + log p(v | k)`` for every row and component, float64, ``(n, K)``."""
        mu = self.means.detach().to(torch.float64)
        logit = torch.log(mu) - torch.log1p(-mu)
        const = torch.log1p(-mu).sum(1) + torch.log(self.weights.detach().to(torch.float64))
        return torch.addmm(const, v.to(device=mu.device, dtype=torch.float64), logit.t())

    def log_prob(self, v: Tensor) -> Tensor:
        """Exact ``log p(v)`` of each row, float64, ``(n,)``."""
        return torch.logsumexp(self.component_log_probs(v), dim=1)

    def responsibilities(self, v: Tensor) -> Tensor:
        """``p(k | v)``, float64, ``(n, K)``."""
        return torch.softmax(self.component_log_probs(v), dim=1)

    def sample(self, n: int, generator: torch.Generator, *, return_components: bool = False):
        """Draw ``n`` vectors: a component from ``pi``, then independent pixels from ``mu_k``.

        Returns the samples ``(n, n_visible)`` in the parameters' dtype (and the components when
        ``return_components``)."""
        k = torch.multinomial(self.weights.detach(), int(n), replacement=True, generator=generator)
        x = bernoulli(self.means.detach()[k], generator)
        return (x, k) if return_components else x

    def detached_copy(self, *, dtype: torch.dtype | None = None, device=None) -> MixtureOfBernoullis:
        return MixtureOfBernoullis(
            self.weights.detach(),
            self.means.detach(),
            dtype=dtype or self.dtype,
            device=device or self.device,
        )


def check_mixture(weights: Tensor, means: Tensor) -> None:
    """Refuse mixing proportions and pixel probabilities that do not make a mixture."""
    if weights.dim() != 1 or means.dim() != 2 or weights.shape[0] != means.shape[0]:
        raise BoltzkitError(
            "a mixture of Bernoullis needs weights (K,) and means (K, n_visible)",
            got=f"weights {tuple(weights.shape)}, means {tuple(means.shape)}",
        )
    if weights.shape[0] < 1 or means.shape[1] < 1:
        raise BoltzkitError("a mixture needs at least one component and one unit", got=tuple(means.shape))
    if not bool(torch.isfinite(weights).all()) or not bool(torch.isfinite(means).all()):
        raise BoltzkitError("a mixture's parameters must be finite")
    if bool((weights <= 0).any()) or abs(float(weights.sum()) - 1.0) > WEIGHT_SUM_TOL:
        raise BoltzkitError(
            "the mixing proportions must be positive and sum to 1",
            got=f"min {float(weights.min()):g}, sum {float(weights.sum()):.9g}",
        )
    if bool((means <= 0).any()) or bool((means >= 1).any()):
        bad = torch.nonzero((means <= 0) | (means >= 1))[0].tolist()
        raise BoltzkitError(
            "the pixel probabilities of a mixture must lie strictly between 0 and 1",
            got=f"means[{bad[0]}, {bad[1]}] = {float(means[bad[0], bad[1]]):g}",
            hint="smooth them, e.g. (count + a) / (n + 2 a), so that no data vector gets probability 0.",
        )


__all__ = ["MixtureOfBernoullis", "check_mixture"]
