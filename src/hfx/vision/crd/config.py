"""`CRDConfig`: every setting of the CRD pipeline (rule functions, subset prior, MH search, answer scoring).

The spec (OpenReview huEYU44Ax4, confidence low) fixes only the structure -- an LVLM proposes concepts, a Gaussian
process per concept models its values over the 3 x 3 panel layout, Metropolis-Hastings with an LVLM-guided proposal
selects a parsimonious concept subset, candidate answers are scored under the selected rules. Kernels, likelihoods,
prior and proposal are ours: each is a named [reconstruction] and a field here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from hfx.utils.validation import check_choice, check_float, check_int, check_sequence, check_str


ORDINAL_RULES = ("constant", "progression", "arithmetic", "distribute_three", "smooth")
CATEGORICAL_RULES = ("constant", "distribute_three")
CATEGORICAL_LIKELIHOODS = ("partition", "one_hot_gp")
SUBSET_SCORES = ("bayes_factor", "marginal_likelihood")
PRIORS = ("geometric", "uniform", "size_uniform")
SELECTIONS = ("mh", "exhaustive", "all", "random")
PROPOSALS = ("guided", "uniform", "toggle")
INITS = ("empty", "full", "confident", "random")
RULE_AVERAGING = ("bma", "map")
ANSWER_SCORES = ("selected", "joint")
SUBSET_ESTIMATES = ("mode", "best_visited")

CONFIG_MODEL_TYPE = "hfx_crd"
FORMAT_VERSION = 1


def _positive_floats(name: str, value: Any, *, allow_zero: bool = False) -> tuple[float, ...]:
    items = check_sequence(name, value, min_length=1)
    return tuple(
        check_float(f"{name}[{i}]", v, minimum=0.0, strict_minimum=not allow_zero) for i, v in enumerate(items)
    )


def _rules(name: str, value: Any, allowed: tuple[str, ...]) -> tuple[str, ...]:
    items = check_sequence(name, value, min_length=1)
    rules = tuple(check_choice(f"{name}[{i}]", v, allowed) for i, v in enumerate(items))
    if len(set(rules)) != len(rules):
        raise ValueError(f"`{name}` has to list each rule once, but is {list(rules)}")
    return rules


@dataclass
class CRDConfig:
    r"""Settings of :class:`~hfx.vision.crd.CRDPipeline`; JSON-serialisable (``save_pretrained`` writes it as
    ``config.json`` with ``model_type = "hfx_crd"``), and ``CRDConfig.from_dict(c.to_dict()) == c`` exactly.

    The defaults of ``noise_std``, ``outlier_prob``, ``dirichlet_alpha`` and ``parsimony`` were chosen on the
    validation split of :func:`~hfx.vision.crd.load_dataset` (``benchmarks/crd.py --stage dev``).

    > Rule functions (a GP per concept over panel coordinates; [reconstruction], see :mod:`hfx.vision.crd.rules`)

    Args:
        ordinal_rules (`tuple[str]`, *optional*, defaults to the four RAVEN rules):
            rule kernels for ordinal concepts (number, size, ...), each a GP over the (row, column) of a panel:

            - ``"constant"``: a value per row (row-indicator kernel);
            - ``"progression"``: a value per row plus one step shared by all rows (+ linear column kernel);
            - ``"arithmetic"``: column 3 = column 1 + column 2 or column 1 - column 2 (two sign variants; the kernel
              of that linear map of two free columns);
            - ``"distribute_three"``: three values on the cyclic diagonals (both directions);
            - ``"smooth"``: a squared-exponential kernel over (row, column) -- the generic GP, off by default.
        categorical_rules (`tuple[str]`, *optional*, defaults to `("constant", "distribute_three")`):
            rules for categorical concepts (shape, colour).
        categorical_likelihood (`str`, *optional*, defaults to `"partition"`):
            ``"partition"``: the rule kernel's equivalence classes (rows, diagonals) share a latent category seen
            through a symmetric noisy channel, marginalised exactly -- a proper distribution over category labels;
            ``"one_hot_gp"``: GP regression on one-hot codes (the simple encoding; a density, not a distribution,
            kept as the comparison).
        noise_std (`tuple[float]`, *optional*, defaults to `(0.05, 0.3)`): observation noise grid (value units, i.e.
            attribute levels) of the ordinal rule GPs; the evidence averages over the grid.
        level_std (`tuple[float]`, *optional*, defaults to `(1.0, 3.0)`): prior std grid of per-row / per-diagonal
            values and of the free columns of ``"arithmetic"``.
        slope_std (`tuple[float]`, *optional*, defaults to `(1.0, 2.0)`): prior std grid of the progression step.
        mean_std (`float`, *optional*, defaults to `3.0`): prior std of a concept's overall mean (around the middle
            of its value range).
        smooth_lengthscale (`tuple[float]`, *optional*, defaults to `(1.0,)`): length-scale grid of ``"smooth"``
            (panel units).
        null_std (`tuple[float]`, *optional*, defaults to `(1.0, 2.0, 3.0)`): std grid of the no-rule model of an
            ordinal concept (i.i.d. values around a common mean: a GP whose kernel ignores the coordinates).
        max_outliers (`int`, *optional*, defaults to `1`): ordinal panels that may be explained as misread
            (uniform over the value range) instead of by the GP; the evidence sums over all such subsets exactly.
        outlier_prob (`float`, *optional*, defaults to `0.05`): prior probability that a panel value is misread.
        categorical_noise (`tuple[float]`, *optional*, defaults to `(0.02, 0.2)`): grid of the channel noise of
            the partition likelihood (a panel shows its class's category with probability 1 - e + e / K).
        dirichlet_alpha (`float`, *optional*, defaults to `5.0`): concentration of the categorical no-rule model
            (Dirichlet-multinomial over i.i.d. panels).
        rule_averaging (`str`, *optional*, defaults to `"bma"`): a concept's predictive density of a candidate
            answer averages the rules by their posterior (``"bma"``) or uses the best rule only (``"map"``).

    > Concept selection (Metropolis-Hastings over subsets)

    Args:
        subset_score (`str`, *optional*, defaults to `"bayes_factor"`):
            ``"bayes_factor"``: ``score(S) = sum_{c in S} [log ML_c(rule) - log ML_c(no rule)] + log p(S)`` -- the
            log posterior of "S follows rules, the rest does not" up to a constant (comparable across concepts with
            different units); ``"marginal_likelihood"``: the spec's literal ``sum_{c in S} log ML_c + log p(S)``.
        prior (`str`, *optional*, defaults to `"geometric"`): parsimony prior ``log p(S)``: ``"geometric"``
            ``-parsimony * |S|``; ``"uniform"`` 0; ``"size_uniform"`` uniform over sizes, then over subsets of a size.
        parsimony (`float`, *optional*, defaults to `0.0`): the geometric prior's cost per concept (nats). The
            Bayes factor already pays an Occam penalty for each rule's extra freedom; on the generator's validation
            split an extra cost (0.5, 1, 2) lowered accuracy, so the default adds none.
        selection (`str`, *optional*, defaults to `"mh"`): ``"mh"`` (the method), ``"exhaustive"`` (the exact best
            subset, all ``2^n``), ``"all"`` (every proposed concept, no selection), ``"random"`` (each concept with
            probability 1/2) -- the last three are the baselines.
        proposal (`str`, *optional*, defaults to `"guided"`): ``"guided"``: add / remove / swap moves choosing the
            concept to add with weight ``(confidence + 1e-3) ** guidance`` and to remove with
            ``(1 - confidence + 1e-3) ** guidance`` (the LVLM-guided proposal); ``"uniform"``: the same moves with
            uniform choices; ``"toggle"``: flip one concept chosen uniformly (a symmetric proposal).
        guidance (`float`, *optional*, defaults to `1.0`): exponent of the confidence weights (0 = uniform).
        move_probs (`tuple[float]`, *optional*, defaults to `(1/3, 1/3, 1/3)`): probabilities of add / remove /
            swap, renormalised over the moves possible in a state (the acceptance ratio uses the renormalised ones).
        num_steps (`int`, *optional*, defaults to `200`): MH steps per chain.
        burn_in (`int`, *optional*, defaults to `50`): initial steps left out of the estimates.
        num_chains (`int`, *optional*, defaults to `4`): independent chains per matrix.
        init (`str`, *optional*, defaults to `"empty"`): initial subset: ``"empty"``, ``"full"``, ``"confident"``
            (concepts with confidence >= 0.5) or ``"random"``.
        subset_estimate (`str`, *optional*, defaults to `"mode"`): the reported subset is the most visited one after
            burn-in (``"mode"``) or the best-scoring one visited (``"best_visited"``).
        max_concepts (`int`, *optional*, defaults to `16`): most concepts a matrix may have (``"exhaustive"``
            enumerates ``2^n`` subsets).

    > Answer selection

    Args:
        answer_score (`str`, *optional*, defaults to `"selected"`): a candidate's score is
            ``sum_{c in S} log p_c(value_c(candidate) | context)`` (``"selected"``, the spec) or that plus the
            no-rule predictive of every concept outside ``S`` (``"joint"``).
        seed (`int`, *optional*, defaults to `0`): seeds the chains, the random baseline and answer tie-breaks.
        batch_size (`int`, *optional*, defaults to `256`): matrices evaluated together (vectorised).

    Raises:
        TypeError / ValueError: naming the field, for any value outside the above.
    """

    # rule functions
    ordinal_rules: tuple[str, ...] = ("constant", "progression", "arithmetic", "distribute_three")
    categorical_rules: tuple[str, ...] = CATEGORICAL_RULES
    categorical_likelihood: str = "partition"
    noise_std: tuple[float, ...] = (0.05, 0.3)
    level_std: tuple[float, ...] = (1.0, 3.0)
    slope_std: tuple[float, ...] = (1.0, 2.0)
    mean_std: float = 3.0
    smooth_lengthscale: tuple[float, ...] = (1.0,)
    null_std: tuple[float, ...] = (1.0, 2.0, 3.0)
    max_outliers: int = 1
    outlier_prob: float = 0.05
    categorical_noise: tuple[float, ...] = (0.02, 0.2)
    dirichlet_alpha: float = 5.0
    rule_averaging: str = "bma"
    # selection
    subset_score: str = "bayes_factor"
    prior: str = "geometric"
    parsimony: float = 0.0
    selection: str = "mh"
    proposal: str = "guided"
    guidance: float = 1.0
    move_probs: tuple[float, ...] = (1 / 3, 1 / 3, 1 / 3)
    num_steps: int = 200
    burn_in: int = 50
    num_chains: int = 4
    init: str = "empty"
    subset_estimate: str = "mode"
    max_concepts: int = 16
    # answers
    answer_score: str = "selected"
    seed: int = 0
    batch_size: int = 256
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        self.ordinal_rules = _rules("ordinal_rules", self.ordinal_rules, ORDINAL_RULES)
        self.categorical_rules = _rules("categorical_rules", self.categorical_rules, CATEGORICAL_RULES)
        check_choice("categorical_likelihood", self.categorical_likelihood, CATEGORICAL_LIKELIHOODS)
        for name in ("noise_std", "level_std", "slope_std", "smooth_lengthscale", "null_std", "categorical_noise"):
            setattr(self, name, _positive_floats(name, getattr(self, name)))
        if max(self.categorical_noise) > 1.0:
            raise ValueError(f"`categorical_noise` has to hold floats > 0 and <= 1, but is {list(self.categorical_noise)}")
        self.mean_std = check_float("mean_std", self.mean_std, minimum=0.0, strict_minimum=True)
        self.max_outliers = check_int("max_outliers", self.max_outliers, minimum=0, maximum=3)
        self.outlier_prob = check_float(
            "outlier_prob", self.outlier_prob, minimum=0.0, maximum=1.0, strict_maximum=True
        )
        if self.max_outliers > 0 and self.outlier_prob == 0.0:
            raise ValueError("`outlier_prob` has to be > 0 when `max_outliers` > 0 (set `max_outliers=0` instead)")
        self.dirichlet_alpha = check_float("dirichlet_alpha", self.dirichlet_alpha, minimum=0.0, strict_minimum=True)
        check_choice("rule_averaging", self.rule_averaging, RULE_AVERAGING)
        check_choice("subset_score", self.subset_score, SUBSET_SCORES)
        check_choice("prior", self.prior, PRIORS)
        self.parsimony = check_float("parsimony", self.parsimony)
        check_choice("selection", self.selection, SELECTIONS)
        check_choice("proposal", self.proposal, PROPOSALS)
        self.guidance = check_float("guidance", self.guidance, minimum=0.0)
        probs = _positive_floats("move_probs", self.move_probs, allow_zero=True)
        if len(probs) != 3 or sum(probs) <= 0 or probs[0] == 0 or probs[1] == 0:
            raise ValueError(
                "`move_probs` has to be 3 floats >= 0 (add, remove, swap) with add > 0 and remove > 0, but is "
                f"{list(probs)}"
            )
        total = sum(probs)
        self.move_probs = tuple(p / total for p in probs)
        self.num_steps = check_int("num_steps", self.num_steps, minimum=1, maximum=1_000_000)
        self.burn_in = check_int("burn_in", self.burn_in, minimum=0)
        if self.burn_in >= self.num_steps:
            raise ValueError(
                f"`burn_in` has to be < `num_steps` ({self.num_steps}) so some steps are kept, but is {self.burn_in}"
            )
        self.num_chains = check_int("num_chains", self.num_chains, minimum=1, maximum=4096)
        check_choice("init", self.init, INITS)
        check_choice("subset_estimate", self.subset_estimate, SUBSET_ESTIMATES)
        self.max_concepts = check_int("max_concepts", self.max_concepts, minimum=1, maximum=24)
        check_choice("answer_score", self.answer_score, ANSWER_SCORES)
        self.seed = check_int("seed", self.seed, minimum=0)
        self.batch_size = check_int("batch_size", self.batch_size, minimum=1)
        if not isinstance(self.extra, dict):
            raise TypeError(f"`extra` has to be a dict, but is {type(self.extra).__name__}")
        for key in self.extra:
            check_str("extra key", key)

    # ------------------------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (tuples as lists) with ``model_type`` and ``format_version``.

        Returns:
            `dict`: the fields plus ``model_type = "hfx_crd"`` and ``format_version``.
        """
        out = dataclasses.asdict(self)
        for key, value in out.items():
            if isinstance(value, tuple):
                out[key] = list(value)
        out["model_type"] = CONFIG_MODEL_TYPE
        out["format_version"] = FORMAT_VERSION
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CRDConfig:
        """Build from a dict (e.g. a saved ``config.json``).

        Returns:
            `CRDConfig`: the validated config.

        Raises:
            ValueError: for another artifact's ``model_type``, an unknown ``format_version`` or unknown keys.
        """
        if not isinstance(data, dict):
            raise TypeError(f"`data` has to be a dict, but is {type(data).__name__}")
        data = dict(data)
        model_type = data.pop("model_type", CONFIG_MODEL_TYPE)
        if model_type != CONFIG_MODEL_TYPE:
            raise ValueError(
                f"this is not a CRD config: its `model_type` is {model_type!r}, expected {CONFIG_MODEL_TYPE!r}"
            )
        version = data.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"unsupported CRD config `format_version` {version!r} (this hfx reads {FORMAT_VERSION})")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown CRDConfig keys {unknown}; allowed: {sorted(names)}")
        return cls(**data)

    def replace(self, **changes) -> CRDConfig:
        """A validated copy with ``changes`` applied.

        Returns:
            `CRDConfig`: the new config.
        """
        return dataclasses.replace(self, **changes)
