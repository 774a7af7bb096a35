r"""Rule functions: a Gaussian process per concept over the 3 x 3 panel layout, and its categorical counterpart.

Every rule is a GP over the panel coordinates :math:`x_i = (r_i, c_i)`, :math:`i = 0..8` row-major (the answer is
panel 8). Its log marginal likelihood of the observed panels is the rule's evidence; the predictive density of a
held-out panel is a ratio of evidences, :math:`p(y_8 \mid y_{0:8}) = ML(y_{0:9}) / ML(y_{0:8})`, which averages the
posterior over rules, variants and hyper-parameters exactly. [reconstruction: the spec names GPs over panel
coordinates; the kernels below are ours.]

**Ordinal concepts** (number, size, ...; values in attribute levels). Each rule is a linear-Gaussian model
:math:`f = A w`, :math:`w \sim N(\bar w, \Sigma_w)`, i.e. a GP with mean :math:`m = A \bar w` and the finite-rank
kernel :math:`K = A \Sigma_w A^T`, observed with noise :math:`\sigma_n^2 I`:

* ``constant``: :math:`f(r, c) = \mu + d_r` -- kernel :math:`s_\mu^2 + s_l^2 [r = r']`;
* ``progression``: :math:`f(r, c) = \mu + d_r + b (c - 1)` -- adds :math:`s_b^2 (c - 1)(c' - 1)`;
* ``arithmetic`` (sign :math:`s = \pm 1`): :math:`f(r, 0) = \mu + \alpha_r`, :math:`f(r, 1) = \mu + \beta_r`,
  :math:`f(r, 2) = (1 + s)\mu + \alpha_r + s \beta_r`;
* ``distribute_three`` (direction :math:`t = \pm 1`): :math:`f(r, c) = \mu + h_{(c + t r) \bmod 3}`;
* ``smooth``: :math:`s_\mu^2 + s_l^2 \exp(-\lVert x - x' \rVert^2 / 2\ell^2)` (the generic GP; off by default);
* the no-rule model ``none``: i.i.d. values around a common mean, :math:`s_\mu^2 + \tau^2 [i = j]` (a kernel that
  ignores the coordinates).

with :math:`\mu \sim N(m_0, s_\mu^2)` (:math:`m_0` = the middle of the concept's range). Hyper-parameters are not
fitted but averaged over the grids of :class:`~hfx.vision.crd.CRDConfig` (uniform weights), so the evidence is a
proper marginal likelihood at every grid size. Up to ``max_outliers`` panels may be *misread*: they are then uniform
over the value range (density :math:`1/W`) and the GP explains the rest; the evidence sums over all such subsets
(each panel misread with prior probability ``outlier_prob``, truncated at ``max_outliers`` and renormalised).

**Why exact torch Cholesky rather than GPyTorch.** The inputs are the same nine coordinates for every matrix, so
every kernel matrix -- and, for each subset of observed panels, its Cholesky factor, inverse and log-determinant --
is data-independent: they are computed once per rule bank (at most 9 x 9, float64) and every matrix's evidence is a
batched quadratic form over them (:math:`O(N C S n^2)` for N concept rows, C rule components, S panel subsets). A
GPyTorch ``ExactGP`` per concept would rebuild the same tiny kernels and solves in Python for each of the thousands of
concepts a benchmark scores, and its strengths (scalable solvers, structure exploitation, hyper-parameter
optimisation) do not apply to n <= 9 with grid-averaged hyper-parameters. The result is checked against
``scipy.stats.multivariate_normal`` in the tests.

**Categorical concepts** (shape, colour, position pattern): a GP on category labels has no meaning, so the same rule
kernels are used for what they say about *which panels share a value*: ``constant`` makes each row one class,
``distribute_three`` each cyclic diagonal (both directions), with three *different* categories. Each class has a
latent category (uniform over the :math:`K` categories; distinct triples for ``distribute_three``), and each panel
shows its class's category through a symmetric noisy channel,
:math:`p(v \mid z) = (1 - \epsilon)[v = z] + \epsilon / K`, marginalised exactly (sums over :math:`K` per class; the
distinct-triple sum by inclusion-exclusion). The no-rule model is a Dirichlet(:math:`\alpha`)-multinomial over
i.i.d. panels. These are proper distributions over label assignments (they sum to one over all :math:`K^9`
assignments; tested), so evidences and predictive probabilities compare across rules and candidates. The simple
alternative, GP regression on one-hot codes (``categorical_likelihood="one_hot_gp"``), is available for comparison:
its predictive is renormalised over the :math:`K` categories.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import torch

from .config import CRDConfig


ROWS = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2], dtype=torch.float64)
COLS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2], dtype=torch.float64)
NUM_PANELS = 9
ANSWER_PANEL = 8
NONE_RULE = "none"
_LOG_2PI = math.log(2 * math.pi)


def _same(a: torch.Tensor) -> torch.Tensor:
    return (a[:, None] == a[None, :]).to(torch.float64)


def diagonal_index(direction: int) -> torch.Tensor:
    """The cyclic diagonal of each panel, ``(c + direction * r) mod 3``, shape `(9,)` (long)."""
    return ((COLS + direction * ROWS) % 3).long()


def ordinal_components(rules: Sequence[str], config: CRDConfig) -> list[dict]:
    """The GP components of the ordinal rules and of the no-rule model.

    Returns:
        `list[dict]`: one dict per (rule, variant, hyper-parameter) with ``rule`` (name), ``variant`` (text),
        ``mean_shape`` (`(9,)`: the GP mean is ``m0 * mean_shape``), ``latent`` (`(9, 9)` kernel of f) and
        ``noise_var`` (the observation noise variance; the no-rule model puts its i.i.d. variance here).
    """
    ones = torch.ones(NUM_PANELS, dtype=torch.float64)
    mu2 = config.mean_std**2
    rows_same = _same(ROWS)
    out = []
    for rule in rules:
        for noise in config.noise_std:
            if rule == "constant":
                for lvl in config.level_std:
                    k = mu2 + lvl**2 * rows_same
                    out.append(dict(rule=rule, variant=f"level={lvl:g},noise={noise:g}", mean_shape=ones,
                                    latent=k, noise_var=noise**2))
            elif rule == "progression":
                centred = COLS - 1
                for lvl, slope in itertools.product(config.level_std, config.slope_std):
                    k = mu2 + lvl**2 * rows_same + slope**2 * torch.outer(centred, centred)
                    out.append(dict(rule=rule, variant=f"level={lvl:g},slope={slope:g},noise={noise:g}",
                                    mean_shape=ones, latent=k, noise_var=noise**2))
            elif rule == "arithmetic":
                for sign, lvl in itertools.product((1, -1), config.level_std):
                    a = torch.tensor([1.0, 0.0, 1.0], dtype=torch.float64)[COLS.long()]
                    b = torch.tensor([0.0, 1.0, float(sign)], dtype=torch.float64)[COLS.long()]
                    g = torch.tensor([1.0, 1.0, 1.0 + sign], dtype=torch.float64)[COLS.long()]
                    k = mu2 * torch.outer(g, g) + lvl**2 * rows_same * (torch.outer(a, a) + torch.outer(b, b))
                    out.append(dict(rule=rule, variant=f"sign={'+' if sign > 0 else '-'},level={lvl:g},noise={noise:g}",
                                    mean_shape=g, latent=k, noise_var=noise**2))
            elif rule == "distribute_three":
                for direction, lvl in itertools.product((1, -1), config.level_std):
                    k = mu2 + lvl**2 * _same(diagonal_index(direction))
                    out.append(dict(rule=rule, variant=f"direction={direction:+d},level={lvl:g},noise={noise:g}",
                                    mean_shape=ones, latent=k, noise_var=noise**2))
            elif rule == "smooth":
                d2 = (ROWS[:, None] - ROWS[None, :]) ** 2 + (COLS[:, None] - COLS[None, :]) ** 2
                for lvl, ell in itertools.product(config.level_std, config.smooth_lengthscale):
                    k = mu2 + lvl**2 * torch.exp(-d2 / (2 * ell**2))
                    out.append(dict(rule=rule, variant=f"lengthscale={ell:g},level={lvl:g},noise={noise:g}",
                                    mean_shape=ones, latent=k, noise_var=noise**2))
            else:
                raise ValueError(f"unknown ordinal rule {rule!r}")
    for tau in config.null_std:
        out.append(dict(rule=NONE_RULE, variant=f"std={tau:g}", mean_shape=ones,
                        latent=mu2 * torch.ones(NUM_PANELS, NUM_PANELS, dtype=torch.float64), noise_var=tau**2))
    return out


class OrdinalRuleBank:
    """Evidence of ordinal concepts under each rule GP, batched over concepts.

    Args:
        config (:class:`~hfx.vision.crd.CRDConfig`): grids, outlier model.
        rules (`Sequence[str]`, *optional*): the rules (defaults to ``config.ordinal_rules``).
        max_outliers (`int`, *optional*): overrides ``config.max_outliers`` (the one-hot path uses 0).
    """

    def __init__(self, config: CRDConfig, rules: Sequence[str] | None = None, max_outliers: int | None = None):
        self.config = config
        self.rules = tuple(config.ordinal_rules if rules is None else rules)
        self.rule_names = (*self.rules, NONE_RULE)
        self.max_outliers = config.max_outliers if max_outliers is None else max_outliers
        comps = ordinal_components(self.rules, config)
        self.components = comps
        self.rule_index = torch.tensor([self.rule_names.index(c["rule"]) for c in comps])
        counts = torch.bincount(self.rule_index, minlength=len(self.rule_names)).to(torch.float64)
        self.log_weight = -torch.log(counts[self.rule_index])  # uniform within a rule
        self.mean_shape = torch.stack([c["mean_shape"] for c in comps])  # (C, 9)
        self.latent = torch.stack([c["latent"] for c in comps])  # (C, 9, 9)
        noise = torch.tensor([c["noise_var"] for c in comps], dtype=torch.float64)
        self.kernel = self.latent + noise[:, None, None] * torch.eye(NUM_PANELS, dtype=torch.float64)
        self._tables: dict[tuple[int, ...], list] = {}

    # --------------------------------------------------------------------------------------------- subset tables
    def _subset_table(self, observed: tuple[int, ...]) -> list[tuple]:
        """Per outlier count u: (u, kept indices (S, s), K^-1 (C, S, s, s), logdet (C, S), mean shape (C, S, s),
        log prior weight of u outliers)."""
        table = self._tables.get(observed)
        if table is not None:
            return table
        m = len(observed)
        k = min(self.max_outliers, m)
        eps = self.config.outlier_prob
        if k > 0:
            # One joint model over the 9 panels: each panel misread with probability eps, at most max_outliers of
            # them (renormalised); unobserved panels are marginalised, so the evidence of any subset of panels is a
            # marginal of that model and ML(context + answer) / ML(context) is a normalised predictive.
            kmax, hidden = self.max_outliers, NUM_PANELS - m

            def binom_mass(n, j):
                return math.comb(n, j) * eps**j * (1 - eps) ** (n - j)

            z = sum(binom_mass(NUM_PANELS, j) for j in range(kmax + 1))
            logw = []
            for j in range(k + 1):
                rest = sum(binom_mass(hidden, h) for h in range(min(hidden, kmax - j) + 1))
                logw.append(j * math.log(eps) + (m - j) * math.log1p(-eps) + math.log(rest) - math.log(z))
            log_z = 0.0
        else:
            logw, log_z = [0.0], 0.0
        table = []
        for u in range(k + 1):
            outs = list(itertools.combinations(observed, u))
            kept = [tuple(i for i in observed if i not in out) for out in outs]
            idx = torch.tensor(kept, dtype=torch.long).reshape(len(kept), m - u)  # (S, s)
            removed = torch.tensor(outs, dtype=torch.long).reshape(len(outs), u)  # (S, u)
            if m - u == 0:  # every observed panel misread: no GP term
                c = len(self.components)
                empty = torch.zeros(c, 1, 0, 0, dtype=torch.float64)
                table.append((u, idx, empty, torch.zeros(c, 1, dtype=torch.float64), self.mean_shape[:, idx],
                              logw[u] - log_z, removed, torch.zeros(1, 0, c, dtype=torch.float64),
                              torch.zeros(1, 0, c, dtype=torch.float64), torch.zeros(c, 1, dtype=torch.float64)))
                continue
            sub = self.kernel[:, idx[:, :, None], idx[:, None, :]]  # (C, S, s, s)
            chol = torch.linalg.cholesky(sub)
            eye = torch.eye(idx.shape[1], dtype=torch.float64).expand_as(sub)
            inv = torch.cholesky_solve(eye, chol)
            logdet = 2 * torch.log(torch.diagonal(chol, dim1=-2, dim2=-1)).sum(-1)
            shape = self.mean_shape[:, idx]  # (C, S, s)
            # quad(y) = y'Ay - 2 m0 (A g)'y + m0^2 g'Ag, with A = K^-1: GEMMs instead of a per-component residual
            flat_inv = inv.permute(1, 2, 3, 0).reshape(idx.shape[0], -1, inv.shape[0])  # (S, s*s, C)
            ag = torch.einsum("cust,cut->usc", inv, shape)  # (S, s, C)
            gag = torch.einsum("cus,usc->cu", shape, ag)  # (C, S)
            table.append((u, idx, inv, logdet, shape, logw[u] - log_z, removed, flat_inv, ag, gag))
        self._tables[observed] = table
        return table

    # ------------------------------------------------------------------------------------------------ evidence
    def component_log_ml(self, values: torch.Tensor, center: torch.Tensor, value_range: torch.Tensor,
                         chunk_size: int = 512) -> torch.Tensor:
        """Log marginal likelihood of each row under each component, summed over outlier subsets.

        Args:
            values (`torch.Tensor` of shape `(N, 9)`): panel values (NaN = not observed).
            center (`torch.Tensor` of shape `(N,)`): :math:`m_0` per row.
            value_range (`torch.Tensor` of shape `(N, 2)`): ``(low, high)`` levels per row; a misread value is
                uniform on ``[low - 1/2, high + 1/2]`` (density :math:`1 / W`, :math:`W = high - low + 1`).
            chunk_size (`int`, *optional*, defaults to `512`): rows per batched solve.

        Returns:
            `torch.Tensor` of shape `(N, C)` (float64). Rows without any observed panel get 0.
        """
        values = values.to(torch.float64)
        n = values.shape[0]
        out = torch.zeros(n, len(self.components), dtype=torch.float64)
        observed = ~torch.isnan(values)
        codes = (observed.long() * (2 ** torch.arange(NUM_PANELS))).sum(1)
        out_lp = outlier_log_density(values, value_range)  # (N, 9)
        for code in torch.unique(codes).tolist():
            rows = torch.nonzero(codes == code).flatten()
            obs = tuple(i for i in range(NUM_PANELS) if code >> i & 1)
            if not obs:
                continue
            table = self._subset_table(obs)
            for start in range(0, rows.numel(), chunk_size):
                r = rows[start : start + chunk_size]
                y, m0, lpo = values[r], center[r].to(torch.float64), out_lp[r]
                parts = []
                for u, idx, _, logdet, _, logw, removed, flat_inv, ag, gag in table:
                    ys = y[:, idx].transpose(0, 1)  # (S, n, s)
                    outer = (ys[:, :, :, None] * ys[:, :, None, :]).reshape(ys.shape[0], ys.shape[1], -1)
                    yay = torch.bmm(outer, flat_inv)  # (S, n, C)
                    agy = torch.bmm(ys, ag)  # (S, n, C)
                    quad = (yay - 2 * m0[None, :, None] * agy).permute(1, 2, 0) + m0[:, None, None] ** 2 * gag[None]
                    s = idx.shape[1]
                    misread = lpo[:, removed].sum(-1) if u else torch.zeros(r.numel(), idx.shape[0],
                                                                             dtype=torch.float64)
                    ll = -0.5 * (quad + logdet[None] + s * _LOG_2PI) + misread[:, None, :] + logw
                    parts.append(ll)
                out[r] = torch.logsumexp(torch.cat(parts, dim=2), dim=2)
        return out

    def rule_log_ml(self, component_ll: torch.Tensor) -> torch.Tensor:
        """Mix components into rules: ``log sum_c w_c ML_c`` per rule (uniform weights within a rule).

        Returns:
            `torch.Tensor` of shape `(N, R + 1)` (the last column is the no-rule model).
        """
        return _mix(component_ll + self.log_weight, self.rule_index, len(self.rule_names))

    def fitted_values(self, values: torch.Tensor, center: float, value_range: tuple[float, float],
                      rule: str) -> torch.Tensor:
        """Posterior mean of the latent function at the 9 panels under ``rule`` (its components and outlier subsets
        weighted by their posterior), for one concept.

        Returns:
            `torch.Tensor` of shape `(9,)`.
        """
        if rule not in self.rule_names:
            raise ValueError(f"`rule` has to be one of {list(self.rule_names)}, but is {rule!r}")
        values = values.to(torch.float64).reshape(1, NUM_PANELS)
        obs = tuple(i for i in range(NUM_PANELS) if not math.isnan(values[0, i].item()))
        if not obs:
            return torch.full((NUM_PANELS,), float(center), dtype=torch.float64)
        lpo = outlier_log_density(values, torch.tensor([value_range], dtype=torch.float64))[0]
        sel = torch.nonzero(self.rule_index == self.rule_names.index(rule)).flatten()
        lls, means = [], []
        for u, idx, inv, logdet, shape, logw, removed, *_ in self._subset_table(obs):
            resid = values[0, idx][None] - center * shape[sel]  # (c, S, s)
            alpha = torch.einsum("cust,cut->cus", inv[sel], resid)
            quad = (resid * alpha).sum(-1)
            misread = lpo[removed].sum(-1) if u else torch.zeros(idx.shape[0], dtype=torch.float64)
            lls.append(-0.5 * (quad + logdet[sel] + idx.shape[1] * _LOG_2PI) + misread[None] + logw
                       + self.log_weight[sel][:, None])
            cross = self.latent[sel][:, :, idx].permute(0, 2, 1, 3)  # (c, S, 9, s)
            means.append(center * self.mean_shape[sel][:, None, :] + torch.einsum("cuis,cus->cui", cross, alpha))
        ll = torch.cat(lls, 1).flatten()
        mean = torch.cat(means, 1).reshape(-1, NUM_PANELS)
        return (torch.softmax(ll, 0)[:, None] * mean).sum(0)


def outlier_log_density(values: torch.Tensor, value_range: torch.Tensor) -> torch.Tensor:
    """``log`` of the misread density of each value: uniform on ``[low - 1/2, high + 1/2]``, ``-inf`` outside.

    Args:
        values (`torch.Tensor` of shape `(N, 9)`).
        value_range (`torch.Tensor` of shape `(N, 2)`): ``(low, high)``.

    Returns:
        `torch.Tensor` of shape `(N, 9)` (NaN values give NaN-free ``-log W``; they are never used).
    """
    value_range = value_range.to(torch.float64)
    low, high = value_range[:, :1], value_range[:, 1:]
    width = high - low + 1
    inside = (values >= low - 0.5) & (values <= high + 0.5) | torch.isnan(values)
    return torch.where(inside, -torch.log(width).expand_as(values), torch.full_like(values, -math.inf))


def _mix(weighted_ll: torch.Tensor, index: torch.Tensor, num: int) -> torch.Tensor:
    """``out[:, r] = logsumexp(weighted_ll[:, index == r])``."""
    out = torch.full((weighted_ll.shape[0], num), -math.inf, dtype=weighted_ll.dtype)
    for r in range(num):
        cols = index == r
        if bool(cols.any()):
            out[:, r] = torch.logsumexp(weighted_ll[:, cols], dim=1)
    return out


# ------------------------------------------------------------------------------------------------- categorical
class CategoricalRuleBank:
    """Evidence of categorical concepts under the partition likelihood (see the module docstring).

    Args:
        config (:class:`~hfx.vision.crd.CRDConfig`): rules, channel-noise grid, Dirichlet concentration.
    """

    def __init__(self, config: CRDConfig):
        self.config = config
        self.rules = tuple(config.categorical_rules)
        self.rule_names = (*self.rules, NONE_RULE)
        groups, distinct, names = [], [], []
        for rule in self.rules:
            if rule == "constant":
                groups.append(ROWS.long())
                distinct.append(False)
                names.append((rule, "rows"))
            elif rule == "distribute_three":
                for direction in (1, -1):
                    groups.append(diagonal_index(direction))
                    distinct.append(True)
                    names.append((rule, f"direction={direction:+d}"))
            else:
                raise ValueError(f"unknown categorical rule {rule!r}")
        # membership (V, 3, 9)
        self.membership = torch.stack([(g[None, :] == torch.arange(3)[:, None]).to(torch.float64) for g in groups])
        self.distinct = torch.tensor(distinct)
        self.variant_names = names
        self.variant_rule = torch.tensor([self.rule_names.index(r) for r, _ in names])

    def component_log_ml(self, values: torch.Tensor, num_categories: torch.Tensor,
                         chunk_elements: int = 2_000_000) -> torch.Tensor:
        """Log evidence of each row under each (variant, channel noise) component, and the no-rule model.

        Args:
            values (`torch.Tensor` of shape `(N, 9)`, long): category indices, ``-1`` = not observed.
            num_categories (`torch.Tensor` of shape `(N,)`, long): K per row (>= 1; every index < K).
            chunk_elements (`int`, *optional*): rows are evaluated in groups of equal K, in chunks of about this many
                (row x category) cells, so memory stays bounded for large K.

        Returns:
            `torch.Tensor` of shape `(N, V * E + 1)`: variant-major, then noise; the last column is the no-rule
            Dirichlet-multinomial.
        """
        values, num_categories = values.long(), num_categories.long()
        width = self.membership.shape[0] * len(self.config.categorical_noise) + 1
        out = torch.empty(values.shape[0], width, dtype=torch.float64)
        kmax_rows = torch.maximum(num_categories, values.max(1).values + 1).clamp_min(1)
        for k in torch.unique(kmax_rows).tolist():
            rows = torch.nonzero(kmax_rows == k).flatten()
            step = max(1, chunk_elements // (NUM_PANELS * int(k)))
            for start in range(0, rows.numel(), step):
                r = rows[start : start + step]
                out[r] = self._component_log_ml(values[r], num_categories[r])
        return out

    def _component_log_ml(self, values: torch.Tensor, num_categories: torch.Tensor) -> torch.Tensor:
        values = values.long()
        num_categories = num_categories.to(torch.float64)
        kmax = int(max(int(num_categories.max().item()), int(values.max().item()) + 1, 1))
        onehot = torch.zeros(values.shape[0], NUM_PANELS, kmax, dtype=torch.float64)
        obs = values >= 0
        onehot[obs.nonzero(as_tuple=True) + (values[obs],)] = 1.0
        counts = torch.einsum("vgi,nik->nvgk", self.membership, onehot)  # (N, V, 3, Kmax)
        size = counts.sum(-1, keepdim=True)
        valid = torch.arange(kmax)[None, :] < num_categories[:, None]  # (N, Kmax)
        k = num_categories[:, None, None, None]
        logk = torch.log(num_categories)
        cols = []
        for eps in self.config.categorical_noise:
            hit = torch.log(1 - eps + eps / k)
            miss = math.log(eps) - torch.log(k)
            log_l = counts * hit + (size - counts) * miss  # (N, V, 3, Kmax)
            log_l = log_l.masked_fill(~valid[:, None, None, :], -math.inf)
            const = (torch.logsumexp(log_l, -1) - logk[:, None, None]).sum(-1)  # (N, V): iid uniform latents
            dist = _log_distinct_triple(log_l, num_categories)  # (N, V)
            cols.append(torch.where(self.distinct[None, :], dist, const))
        comp = torch.stack(cols, dim=2).reshape(values.shape[0], -1)  # (N, V*E) variant-major
        alpha = self.config.dirichlet_alpha
        total = onehot.sum((1, 2))
        n_z = onehot.sum(1)
        kalpha = num_categories * alpha
        null = (torch.lgamma(kalpha) - torch.lgamma(kalpha + total)
                + (torch.lgamma(alpha + n_z) - math.lgamma(alpha)).sum(-1))
        return torch.cat([comp, null[:, None]], dim=1)

    def rule_log_ml(self, component_ll: torch.Tensor) -> torch.Tensor:
        """Mix into rules (uniform over variants and channel noise within a rule).

        Returns:
            `torch.Tensor` of shape `(N, R + 1)`.
        """
        e = len(self.config.categorical_noise)
        index = torch.cat([self.variant_rule.repeat_interleave(e), torch.tensor([len(self.rules)])])
        counts = torch.bincount(index, minlength=len(self.rule_names)).to(torch.float64)
        return _mix(component_ll - torch.log(counts[index]), index, len(self.rule_names))

    def fitted_categories(self, values: torch.Tensor, num_categories: int, rule: str) -> torch.Tensor:
        """The most probable category of each panel under the best component of ``rule`` (its class's latent
        category given the observed panels), for one concept.

        Returns:
            `torch.Tensor` of shape `(9,)` (long category indices).
        """
        if rule not in self.rules:
            raise ValueError(f"`rule` has to be one of {list(self.rules)}, but is {rule!r}")
        values = values.long().reshape(1, NUM_PANELS)
        ll = self.component_log_ml(values, torch.tensor([num_categories]))[0, :-1]
        e = len(self.config.categorical_noise)
        best, best_ll = None, -math.inf
        for j in range(ll.numel()):
            v, n = divmod(j, e)
            if self.variant_names[v][0] == rule and ll[j].item() > best_ll:
                best, best_ll = (v, self.config.categorical_noise[n]), ll[j].item()
        v, eps = best
        onehot = torch.zeros(NUM_PANELS, num_categories, dtype=torch.float64)
        obs = values[0] >= 0
        onehot[obs.nonzero().flatten(), values[0][obs]] = 1.0
        counts = self.membership[v] @ onehot  # (3, K)
        size = counts.sum(-1, keepdim=True)
        log_l = counts * math.log(1 - eps + eps / num_categories) + (size - counts) * math.log(eps / num_categories)
        if bool(self.distinct[v]):
            a = torch.exp(log_l - log_l.max(-1, keepdim=True).values)
            post = torch.stack([
                a[g] * ((a[h1].sum() - a[h1]) * (a[h2].sum() - a[h2]) - ((a[h1] * a[h2]).sum() - a[h1] * a[h2]))
                for g, (h1, h2) in ((0, (1, 2)), (1, (0, 2)), (2, (0, 1)))
            ])
        else:
            post = log_l
        z = post.argmax(-1)  # (3,)
        group = self.membership[v].argmax(0)  # (9,)
        return z[group]


def _log_distinct_triple(log_l: torch.Tensor, num_categories: torch.Tensor) -> torch.Tensor:
    """``log [sum_{z0, z1, z2 distinct} prod_g L_g(z_g) / (K (K-1) (K-2))]`` for the 3 classes, by
    inclusion-exclusion in a scaled linear space. ``log_l`` is `(N, V, 3, Kmax)`; -inf where K < 3."""
    top = log_l.amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    a = torch.exp(log_l - top)  # (N, V, 3, K)
    a0, a1, a2 = a[:, :, 0], a[:, :, 1], a[:, :, 2]
    s0, s1, s2 = a0.sum(-1), a1.sum(-1), a2.sum(-1)
    total = (s0 * s1 * s2 - (a0 * a1).sum(-1) * s2 - (a0 * a2).sum(-1) * s1 - (a1 * a2).sum(-1) * s0
             + 2 * (a0 * a1 * a2).sum(-1))
    k = num_categories[:, None]
    log_norm = torch.log(k) + torch.log(k - 1) + torch.log(k - 2)
    out = torch.log(total.clamp_min(1e-300)) + top.squeeze(-1).sum(-1) - log_norm
    return torch.where(k >= 3, out, torch.full_like(out, -math.inf))


__all__ = [
    "ANSWER_PANEL",
    "NONE_RULE",
    "NUM_PANELS",
    "CategoricalRuleBank",
    "OrdinalRuleBank",
    "diagonal_index",
    "ordinal_components",
    "outlier_log_density",
]
