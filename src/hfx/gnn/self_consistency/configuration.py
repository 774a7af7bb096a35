"""Configuration of a self-interpretable GNN (SI-GNN) trained with or without self-consistency (SC-GNN, ICLR 2026)."""

from __future__ import annotations

from transformers import PretrainedConfig

from hfx.utils.artifacts import ConfigArtifactMixin, register_module


SI_GNN_METHODS = ("gsat", "att", "size", "cal")
ATTENTION_LEVELS = ("edge", "node")
TASKS = ("graph", "node")
SC_TRAINING_MODES = ("finetune", "joint")
SC_ENCODER_ATTENTIONS = ("sample", "sigmoid")

# the authors' per-method regulariser weights (configs/method/<name>.yaml, ba_2motifs): GSAT's KL weight, SIZE's and
# CAL+CR's sparsity weight; ATT has no regulariser.
DEFAULT_REG_LOSS_WEIGHTS = {"gsat": 0.5, "size": 0.5, "cal": 0.5, "att": 0.0}


def _check_choice(name: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"`{name}` must be one of {list(allowed)}, but is {value!r}")


def _check_non_negative(name: str, value) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"`{name}` must be a number >= 0, but is {value!r}")


class SelfInterpretableGNNConfig(ConfigArtifactMixin, PretrainedConfig):
    r"""Configuration of [`SelfInterpretableGNN`]: a GIN encoder, an MLP explainer giving edge (or node) attention, and
    a classifier run on the attention-weighted graph, for the SI-GNNs GSAT, ATT, SIZE and CAL, each with or without the
    self-consistency (SC) loss of *Self-Consistency Improves the Trustworthiness of Self-Interpretable GNNs* (Tai et
    al., ICLR 2026, OpenReview ``hxGdAUn3sB``; code github.com/ICDM-UESTC/SelfConsistencyXGNN).

    Defaults follow the authors' configs for BA-2Motifs (GIN, 2 layers, 64 hidden, dropout 0.3, explainer dropout 0.5,
    CE weight 1, SC weight 1, GSAT KL weight 0.5 towards r = 0.5). The training loss (computed by
    [`SelfConsistencyTrainer`]) is

    ``L = ce_loss_weight * CE + reg_loss_weight * reg + sc_loss_weight * L_SC``  (``L_SC`` only with
    ``use_self_consistency``),

    with ``reg`` the method's regulariser: GSAT the KL of the attention to Bernoulli(r); SIZE and CAL (+CR) the mean
    attention (sparsity) with a linear warm-up; ATT none. CAL replaces CE by its causal / shortcut / intervention
    losses (``cal_*_weight``).

    Args:
        num_node_features (`int`, *optional*, defaults to 10): node feature size (BA-2Motifs: 10).
        num_classes (`int`, *optional*, defaults to 2): classes; 2 uses one logit and BCE (as the authors' code),
            more use ``num_classes`` logits and CE.
        task (`str`, *optional*, defaults to `"graph"`): ``"graph"`` (sum-pooled graph classification, the paper's
            setting) or ``"node"`` (per-node classification, e.g. BA-Shapes; hfx's extension [reconstruction]).
        si_gnn (`str`, *optional*, defaults to `"gsat"`): the base SI-GNN: ``"gsat"``, ``"att"``, ``"size"``,
            ``"cal"``.
        hidden_size (`int`, *optional*, defaults to 64), num_layers (`int`, *optional*, defaults to 2),
        dropout (`float`, *optional*, defaults to 0.3): the GIN backbone.
        explainer_dropout (`float`, *optional*, defaults to 0.5): dropout inside the explainer MLP (the authors use
            0.3 for GSAT+SC on BA-2Motifs, 0.5 elsewhere).
        attention_level (`str`, *optional*, defaults to `"edge"`): ``"edge"`` (edge attention from concatenated
            endpoint embeddings, symmetrised on undirected graphs; the authors' ``learn_edge_att: true`` for
            BA-2Motifs) or ``"node"`` (node attention, edge weight = product of its endpoints' attention; their
            setting for the molecule sets).
        concrete_temperature (`float`, *optional*, defaults to 1.0): temperature of the concrete (relaxed Bernoulli) sample
            used in training.
        ce_loss_weight (`float`, *optional*, defaults to 1.0).
        reg_loss_weight (`float`, *optional*): the regulariser weight; ``None`` takes the authors' value for
            ``si_gnn`` (GSAT 0.5, SIZE 0.5, CAL+CR 0.5; ATT 0, and ATT accepts only 0).
        gsat_r (`float`, *optional*, defaults to 0.5): GSAT's final Bernoulli prior ``r``;
        gsat_init_r (`float`, *optional*, defaults to 0.9), gsat_decay_r (`float`, *optional*, defaults to 0.1),
        gsat_decay_interval (`int`, *optional*, defaults to 10): ``r(epoch) = max(gsat_r, gsat_init_r - (epoch //
            gsat_decay_interval) * gsat_decay_r)`` during base training; the SC fine-tuning stage uses ``gsat_r``
            throughout (as the authors' ``GSATSCTrainer``).
        sparsity_warmup_epochs (`int`, *optional*, defaults to 10): SIZE / CAL+CR sparsity weight ramps linearly
            ``reg_loss_weight * min(1, (epoch + 1) / sparsity_warmup_epochs)``.
        cal_causal_weight (`float`, *optional*, defaults to 1.0), cal_shortcut_weight (`float`, *optional*,
            defaults to 0.5), cal_intervention_weight (`float`, *optional*, defaults to 0.5): CAL's losses (CE of
            the causal branch, KL of the shortcut branch to the uniform prediction, CE of the intervened
            causal + shuffled-shortcut branch, which is also the prediction).
        use_self_consistency (`bool`, *optional*, defaults to `False`): add ``sc_loss_weight * L_SC``.
        sc_loss_weight (`float`, *optional*, defaults to 1.0).
        sc_training (`str`, *optional*, defaults to `"finetune"`): how [`train_si_gnn`] applies SC: ``"finetune"``
            (the authors' code: train the base SI-GNN, then fine-tune it with SC with the message-passing layers
            frozen) or ``"joint"`` (SC from the first step, the spec's pseudo-code) [reconstruction: the spec
            describes only the loss].
        sc_encoder_attention (`str`, *optional*, defaults to `"sample"`): the attention that weights the graph for
            ``emb_new``: the training-time concrete sample (``"sample"``, the authors' ``GSATSCTrainer``) or its
            deterministic sigmoid (``"sigmoid"``) [reconstruction: the spec's open question].

    Raises:
        ValueError: for a value outside the allowed choices or a negative weight (naming the argument).
    """

    model_type = "si_gnn"
    keys_to_ignore_at_inference = [  # noqa: RUF012 (transformers reads a list)
        "node_embeddings",
        "attention_logits",
        "attention",
        "causal_logits",
        "shortcut_logits",
    ]

    def __init__(
        self,
        num_node_features: int = 10,
        num_classes: int = 2,
        task: str = "graph",
        si_gnn: str = "gsat",
        hidden_size: int = 64,
        num_layers: int = 2,
        dropout: float = 0.3,
        explainer_dropout: float = 0.5,
        attention_level: str = "edge",
        concrete_temperature: float = 1.0,
        ce_loss_weight: float = 1.0,
        reg_loss_weight: float | None = None,
        gsat_r: float = 0.5,
        gsat_init_r: float = 0.9,
        gsat_decay_r: float = 0.1,
        gsat_decay_interval: int = 10,
        sparsity_warmup_epochs: int = 10,
        cal_causal_weight: float = 1.0,
        cal_shortcut_weight: float = 0.5,
        cal_intervention_weight: float = 0.5,
        use_self_consistency: bool = False,
        sc_loss_weight: float = 1.0,
        sc_training: str = "finetune",
        sc_encoder_attention: str = "sample",
        **kwargs,
    ):
        _check_choice("si_gnn", si_gnn, SI_GNN_METHODS)
        _check_choice("task", task, TASKS)
        _check_choice("attention_level", attention_level, ATTENTION_LEVELS)
        _check_choice("sc_training", sc_training, SC_TRAINING_MODES)
        _check_choice("sc_encoder_attention", sc_encoder_attention, SC_ENCODER_ATTENTIONS)
        for name, value in (("num_node_features", num_node_features), ("hidden_size", hidden_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int, but is {value!r}")
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"`num_layers` must be a positive int, but is {num_layers!r}")
        if not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"`num_classes` must be an int >= 2, but is {num_classes!r}")
        for name, value in (("dropout", dropout), ("explainer_dropout", explainer_dropout)):
            if not 0.0 <= value < 1.0:
                raise ValueError(f"`{name}` must be in [0, 1), but is {value!r}")
        if not concrete_temperature > 0:
            raise ValueError(f"`concrete_temperature` must be > 0, but is {concrete_temperature!r}")
        for name, value in (("gsat_r", gsat_r), ("gsat_init_r", gsat_init_r)):
            if not 0.0 < value < 1.0:
                raise ValueError(f"`{name}` must be in (0, 1), but is {value!r}")
        if not isinstance(gsat_decay_interval, int) or gsat_decay_interval < 1:
            raise ValueError(f"`gsat_decay_interval` must be a positive int, but is {gsat_decay_interval!r}")
        if not isinstance(sparsity_warmup_epochs, int) or sparsity_warmup_epochs < 1:
            raise ValueError(f"`sparsity_warmup_epochs` must be a positive int, but is {sparsity_warmup_epochs!r}")
        if reg_loss_weight is None:
            reg_loss_weight = DEFAULT_REG_LOSS_WEIGHTS[si_gnn]
        if si_gnn == "att" and reg_loss_weight != 0:
            raise ValueError(
                f"ATT has no regulariser: `reg_loss_weight` must be 0 or None, but is {reg_loss_weight!r}"
            )
        for name, value in (
            ("ce_loss_weight", ce_loss_weight),
            ("reg_loss_weight", reg_loss_weight),
            ("gsat_decay_r", gsat_decay_r),
            ("cal_causal_weight", cal_causal_weight),
            ("cal_shortcut_weight", cal_shortcut_weight),
            ("cal_intervention_weight", cal_intervention_weight),
            ("sc_loss_weight", sc_loss_weight),
        ):
            _check_non_negative(name, value)
        if not isinstance(use_self_consistency, bool):
            raise TypeError(f"`use_self_consistency` must be a bool, but is {type(use_self_consistency).__name__}")

        self.num_node_features = num_node_features
        self.num_classes = num_classes
        self.task = task
        self.si_gnn = si_gnn
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.dropout = dropout
        self.explainer_dropout = explainer_dropout
        self.attention_level = attention_level
        self.concrete_temperature = concrete_temperature
        self.ce_loss_weight = ce_loss_weight
        self.reg_loss_weight = reg_loss_weight
        self.gsat_r = gsat_r
        self.gsat_init_r = gsat_init_r
        self.gsat_decay_r = gsat_decay_r
        self.gsat_decay_interval = gsat_decay_interval
        self.sparsity_warmup_epochs = sparsity_warmup_epochs
        self.cal_causal_weight = cal_causal_weight
        self.cal_shortcut_weight = cal_shortcut_weight
        self.cal_intervention_weight = cal_intervention_weight
        self.use_self_consistency = use_self_consistency
        self.sc_loss_weight = sc_loss_weight
        self.sc_training = sc_training
        self.sc_encoder_attention = sc_encoder_attention
        super().__init__(**kwargs)

    @property
    def num_logits(self) -> int:
        """1 for binary classification (one logit, BCE, as the authors' code), else ``num_classes``."""
        return 1 if self.num_classes == 2 else self.num_classes


register_module(__name__)  # AutoConfig (see hfx.utils.artifacts.ARCHITECTURES)
