"""Run PEFT's own parametrised custom-model tests with SLAOConfig added once (not collected by pytest).

Usage (PEFT's ``tests/`` are not shipped with the wheel; take them from a checkout or a snapshot of
huggingface/peft, e.g. ``git -C <peft.git> archive HEAD tests | tar x -C /tmp/peft``)::

    python tests/conformance/peft_suite_slao.py /tmp/peft/tests            # inject, then run with -k SLAO
    python -m pytest -q /tmp/peft/tests/test_custom_models.py -k SLAO -p no:cacheprovider

The injection is the smallest change that adds SLAO to the matrix:

* ``test_custom_models.py``: imports :class:`hfx.tuners.slao.SLAOConfig` and appends an SLAO copy of every LoRA
  case whose targets SLAO supports (``nn.Linear`` of the ``MLP`` model without DoRA / lora_bias / LoRA variants) to
  ``TEST_CASES`` and to ``MULTIPLE_ACTIVE_ADAPTERS_TEST_CASES`` (names have ``LoRA`` -> ``SLAO``);
* ``testing_utils.set_init_weights_false``: treats LoraConfig subclasses like LoraConfig (``init_lora_weights=False``)
  instead of passing the unknown ``init_weights=False``.

Nothing else in PEFT's tests changes; each test decides its own skips exactly as for LoRA's subclasses.
"""

from __future__ import annotations

import sys
from pathlib import Path


SLAO_CASES = """
# --- hfx: SLAOConfig added once (tests/conformance/peft_suite_slao.py) ---
from hfx.tuners.slao import SLAOConfig  # noqa: E402

_SLAO_UNSUPPORTED = ("use_dora", "lora_bias", "kasa_config", "velora_config", "monteclora_config", "use_bdlora",
                     "target_parameters")
TEST_CASES += [
    (name.replace("LoRA", "SLAO"), model_id, SLAOConfig, kwargs)
    for name, model_id, cls, kwargs in list(TEST_CASES)
    if cls is LoraConfig and model_id == "MLP" and not any(k in kwargs for k in _SLAO_UNSUPPORTED)
]
# --- end hfx ---
"""

SLAO_MULTI_CASES = """
# --- hfx: SLAOConfig added once (multiple active adapters) ---
MULTIPLE_ACTIVE_ADAPTERS_TEST_CASES += [
    (name.replace("LoRA", "SLAO"), tuner, SLAOConfig, kw1, kw2)
    for name, tuner, cls, kw1, kw2 in list(MULTIPLE_ACTIVE_ADAPTERS_TEST_CASES)
    if cls is LoraConfig and tuner == "lora" and not any(k in kw1 or k in kw2 for k in _SLAO_UNSUPPORTED)
]
# --- end hfx ---
"""


def inject(tests_dir: str | Path) -> list[Path]:
    """Add SLAOConfig to PEFT's custom-model test matrix in ``tests_dir`` (idempotent). Returns the files changed."""
    tests_dir = Path(tests_dir)
    custom = tests_dir / "test_custom_models.py"
    utils = tests_dir / "testing_utils.py"
    text = custom.read_text()
    changed = []
    if "hfx: SLAOConfig added once" not in text:
        anchor_1 = "\nALL_PEFT_CONFIG_CLASSES = "
        anchor_2 = "\nclass TestPeftCustomModel("
        if anchor_1 not in text or anchor_2 not in text:
            raise ValueError(f"{custom} does not have the expected layout (anchors {anchor_1!r}, {anchor_2!r})")
        text = text.replace(anchor_1, "\n" + SLAO_CASES + anchor_1, 1)
        text = text.replace(anchor_2, "\n" + SLAO_MULTI_CASES + "\n" + anchor_2, 1)
        custom.write_text(text)
        changed.append(custom)
    utils_text = utils.read_text()
    old = "if config_cls in (LoraConfig, AdaLoraConfig):"
    if old in utils_text:
        utils.write_text(
            utils_text.replace(old, "if issubclass(config_cls, LoraConfig):  # hfx: LoraConfig subclasses", 1)
        )
        changed.append(utils)
    return changed


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    for path in inject(sys.argv[1]):
        print("patched", path)  # noqa: T201
