"""Load Celo2 meta-weights from the official (flax) and PyLO checkpoint formats, or from hfx's own Hub format.

Formats (documented assumptions; tested on synthetic files written to these layouts):

* **hfx** (``Celo2MetaWeights.save_pretrained``): a folder / Hub repo with ``config.json`` + ``model.safetensors``.
* **official** (``amoudgl/celo2``, ``amoudgl/celo2-base`` on the Hub; ``celo2_optax.load_checkpoint``): one file holding
  ``flax.serialization.to_bytes(theta)``, i.e. msgpack of the nested dict
  ``{"ff_mod_stack": {"~": {"w0__0": ..., "w0__13": ..., "b0": ..., "w1": ..., "b1": ..., "w2": ..., "b2": ...}}}``
  (Haiku names its top-level parameters under module ``"~"``). Each array is a msgpack extension of type 1 whose
  payload is msgpack of ``(shape, dtype_name, raw C-order bytes)``; ``w0__i`` is ``(width_i, hidden)`` for feature
  group ``i`` in the reference order, ``w_j`` is ``(in, out)``. The file name is not fixed (``theta.state`` in the
  authors' earlier Celo releases); every file that is not one of the other formats is tried as msgpack.
* **PyLO** (``pylo/models/celo2_weights.pt`` and its converter's output): a ``torch.save`` state dict, either
  ``first_layer.weight (H, C)``, ``first_layer.bias``, ``hidden.weight``, ``hidden.bias``, ``output.weight``,
  ``output.bias`` (``nn.Linear`` layout), or ``w0.<i> (width_i, H)``, ``b0``, ``dense_w.<j> (in, out)``,
  ``dense_b.<j>``, or ``first_layer_weights.<i> (H, width_i)`` + ``first_layer_bias`` + the ``nn.Linear`` keys.
  Loaded with ``torch.load(weights_only=True)``. (PyLO itself is not vendored; point at a file you have.)

Pickled meta-training checkpoints are not read (unpickling runs code; convert them with the authors' tools first).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

from .functional import FEATURE_NAMES, feature_widths
from .meta_weights import ADAFACTOR_DECAYS, MOMENTUM_DECAYS, RMS_DECAYS, Celo2MetaWeights


_TORCH_SUFFIXES = (".pt", ".pth", ".bin")
_SKIP_FILES = {"README.md", ".gitattributes", "LICENSE"}


# ------------------------------------------------------------------------------------------------------ msgpack/flax
def _decode_ext(code: int, data: bytes):
    import msgpack

    if code in (1, 3):  # flax _MsgpackExtType.ndarray / npscalar
        shape, dtype, buffer = msgpack.unpackb(data, raw=False)
        arr = np.frombuffer(buffer, dtype=np.dtype(dtype)).reshape(shape)
        return arr.copy() if code == 1 else arr.reshape(())
    raise ValueError(f"unsupported msgpack extension type {code} in a flax checkpoint")


def read_flax_msgpack(path) -> dict:
    """Decode a ``flax.serialization.to_bytes`` file into nested ``dict``s of ``numpy`` arrays (no flax needed).

    Raises:
        ImportError: without the ``msgpack`` package. ValueError: if the file is not such msgpack.
    """
    try:
        import msgpack
    except ImportError as err:  # pragma: no cover - msgpack is in the celo2 extra
        raise ImportError("Reading official Celo2 checkpoints needs `msgpack` (pip install 'hfx[celo2]').") from err
    raw = Path(path).read_bytes()
    try:
        tree = msgpack.unpackb(
            raw, ext_hook=lambda code, data: _decode_ext(code, data), raw=False, strict_map_key=False
        )
    except (ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError, TypeError) as err:
        raise ValueError(f"{path} is not a flax msgpack checkpoint ({err})") from None
    if not isinstance(tree, dict):
        raise ValueError(f"{path} is not a flax msgpack checkpoint (top level is {type(tree).__name__})")  # noqa: TRY004
    return tree


def _find_theta(tree: dict) -> dict | None:
    """The dict holding ``w0__*`` leaves (``tree["ff_mod_stack"]["~"]`` in the official layout)."""
    if any(isinstance(k, str) and re.fullmatch(r"w0__\d+", k) for k in tree):
        return tree
    for value in tree.values():
        if isinstance(value, dict):
            found = _find_theta(value)
            if found is not None:
                return found
    return None


def _build(first_blocks_in_out, dense_in_out, biases, features, activation, **config) -> Celo2MetaWeights:
    """Meta-weights from first-layer blocks ``(width_i, H)``, dense ``[(in, out)]`` and biases ``[b0, b1, ...]``."""
    hidden = int(biases[0].shape[0])
    output_size = int(biases[-1].shape[0])
    hidden_layers = len(dense_in_out)
    if features is None:
        if len(first_blocks_in_out) != len(FEATURE_NAMES):
            raise ValueError(
                f"the checkpoint has {len(first_blocks_in_out)} first-layer feature blocks; the default Celo2 "
                f"features have {len(FEATURE_NAMES)}: pass `features=` (the reference's with_* switches)"
            )
        features = FEATURE_NAMES
    meta = Celo2MetaWeights(
        hidden_size=hidden,
        hidden_layers=hidden_layers,
        output_size=output_size,
        activation=activation,
        features=tuple(features),
        **config,
    )
    widths = feature_widths(meta.features, meta.momentum_decays, meta.rms_decays, meta.adafactor_decays)
    found = [int(b.shape[0]) for b in first_blocks_in_out]
    if found != list(widths.values()):
        raise ValueError(f"first-layer block widths {found} do not match the features {dict(widths)}")
    w0 = torch.cat([torch.as_tensor(np.asarray(b), dtype=torch.float32) for b in first_blocks_in_out], dim=0)
    weights = [w0] + [torch.as_tensor(np.asarray(w), dtype=torch.float32) for w in dense_in_out]
    with torch.no_grad():
        for layer, w, b in zip(meta.layers, weights, biases):
            if tuple(w.T.shape) != tuple(layer.weight.shape):
                raise ValueError(f"weight of shape {tuple(w.shape)} does not fit layer {tuple(layer.weight.shape)}")
            layer.weight.copy_(w.T)
            layer.bias.copy_(torch.as_tensor(np.asarray(b), dtype=torch.float32))
    return meta


def from_official_tree(tree: dict, features=None, activation: str = "relu", **config) -> Celo2MetaWeights:
    """Convert the official ``theta`` tree (see the module docstring) to :class:`Celo2MetaWeights`.

    Raises:
        ValueError: if no ``w0__*`` leaves are found or shapes do not fit the feature configuration.
    """
    theta = _find_theta(tree)
    if theta is None:
        raise ValueError("no Celo2 meta-parameters (`w0__<i>` leaves, under ff_mod_stack/~) in the checkpoint")
    n_blocks = 1 + max(int(k[4:]) for k in theta if re.fullmatch(r"w0__\d+", k))
    n_dense = max((int(k[1:]) for k in theta if re.fullmatch(r"w[1-9]\d*", k)), default=0)
    try:
        blocks = [theta[f"w0__{i}"] for i in range(n_blocks)]
        dense = [theta[f"w{j}"] for j in range(1, n_dense + 1)]
        biases = [theta[f"b{j}"] for j in range(n_dense + 1)]
    except KeyError as err:
        raise ValueError(f"incomplete Celo2 checkpoint: missing {err}") from None
    return _build(blocks, dense, biases, features, activation, **config)


def from_pylo_state_dict(sd: dict, features=None, activation: str = "relu", **config) -> Celo2MetaWeights:
    """Convert a PyLO Celo2 MLP state dict (any of the layouts in the module docstring).

    Raises:
        ValueError: for an unrecognised layout.
    """
    sd = {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else np.asarray(v) for k, v in sd.items()}
    if "w0.0" in sd:  # CELO2_MLP: (in, out) blocks
        n = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("w0."))
        m = 1 + max((int(k.split(".")[1]) for k in sd if k.startswith("dense_w.")), default=-1)
        blocks = [sd[f"w0.{i}"] for i in range(n)]
        dense = [sd[f"dense_w.{j}"] for j in range(m)]
        biases = [sd["b0"]] + [sd[f"dense_b.{j}"] for j in range(m)]
        return _build(blocks, dense, biases, features, activation, **config)
    if "first_layer_weights.0" in sd:  # old grouped layout, (out, in) blocks
        n = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("first_layer_weights."))
        sd = dict(sd)
        sd["first_layer.weight"] = np.concatenate([sd[f"first_layer_weights.{i}"] for i in range(n)], axis=1)
        sd["first_layer.bias"] = sd["first_layer_bias"]
    if "first_layer.weight" in sd:  # Celo2_MLP: nn.Linear layout, one dense first layer
        names = ["first_layer"] + sorted(
            {k.rsplit(".", 1)[0] for k in sd if k.endswith(".weight") and k.startswith("hidden")}
        )
        names.append("output")
        missing = [f"{n}.weight" for n in names if f"{n}.weight" not in sd]
        if missing:
            raise ValueError(f"PyLO state dict is missing {missing}")
        w0 = sd["first_layer.weight"].T  # (C, H)
        meta_features = tuple(features or FEATURE_NAMES)
        widths = feature_widths(meta_features, *_decays(config))
        splits = np.cumsum(list(widths.values()))[:-1]
        if w0.shape[0] != sum(widths.values()):
            raise ValueError(
                f"first layer has {w0.shape[0]} inputs, the features {dict(widths)} need {sum(widths.values())}"
            )
        blocks = np.split(w0, splits, axis=0)
        dense = [sd[f"{n}.weight"].T for n in names[1:]]
        biases = [sd[f"{n}.bias"] for n in names]
        return _build(blocks, dense, biases, meta_features, activation, **config)
    raise ValueError(f"unrecognised PyLO Celo2 state dict (keys: {sorted(sd)[:8]} ...)")


def _decays(config: dict):
    return (
        tuple(config.get("momentum_decays", MOMENTUM_DECAYS)),
        tuple(config.get("rms_decays", RMS_DECAYS)),
        tuple(config.get("adafactor_decays", ADAFACTOR_DECAYS)),
    )


def convert_checkpoint(path, features=None, activation: str = "relu", **config) -> Celo2MetaWeights:
    """Read an official (flax msgpack) or PyLO (torch) Celo2 checkpoint **file** into :class:`Celo2MetaWeights`.

    Args:
        path (`str` or `Path`): the file.
        features (`tuple[str, ...]`, *optional*): the feature groups the checkpoint was trained with (default: all 14).
        activation (`str`, defaults to `"relu"`); **config: decays if they differ from Celo2's defaults.

    Returns:
        :class:`Celo2MetaWeights` (save it with ``save_pretrained`` to get the hfx Hub format).

    Raises:
        FileNotFoundError: if ``path`` is not a file. ValueError: if the content is not a Celo2 checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint file at {path}")
    if path.suffix in (".pickle", ".pkl"):
        raise ValueError(f"{path}: pickled checkpoints are not read (unpickling runs code); use the flax file")
    if path.suffix in _TORCH_SUFFIXES:
        sd = torch.load(path, map_location="cpu", weights_only=True)
        if not isinstance(sd, dict):
            raise ValueError(f"{path} does not hold a state dict")
        return from_pylo_state_dict(sd, features, activation, **config)
    return from_official_tree(read_flax_msgpack(path), features, activation, **config)


def _checkpoint_in_folder(folder: Path) -> Path:
    candidates = [
        p
        for p in sorted(folder.iterdir())
        if p.is_file()
        and p.name not in _SKIP_FILES
        and not p.name.startswith(".")
        and p.suffix not in (".json", ".md")
    ]
    if len(candidates) != 1:
        raise ValueError(
            f"{folder} has no `config.json` (hfx format) and {len(candidates)} candidate checkpoint files "
            f"({[p.name for p in candidates]}); pass the checkpoint file itself"
        )
    return candidates[0]


def load_any(source, **kwargs) -> Celo2MetaWeights:
    """Meta-weights from an hfx folder / Hub repo, an official or PyLO checkpoint file, or a folder / repo with one.

    The source is checked first (:func:`hfx.utils.artifacts.check_load_source`): a missing local path, a folder
    holding another hfx artifact (naming both) or a corrupt file is refused before anything is read. A Hub repo id
    that is not in the local cache is resolved with ``huggingface_hub.snapshot_download``.

    Raises:
        FileNotFoundError: no such file / folder (or a Hub id not cached while offline).
        ValueError: another artifact's folder, a corrupt file, a ``config.json`` missing a field.
    """
    from hfx.utils.artifacts import artifact_type, check_load_source

    checks = dict(who="Celo2 (loading meta-weights)", arg="meta_weights", allow_file=True, allow_untyped=True)
    path = check_load_source(source, ("hfx_celo2",), **checks)
    if path is None:
        from huggingface_hub import snapshot_download

        path = check_load_source(Path(snapshot_download(str(source))), ("hfx_celo2",), **checks)
    if path.is_dir():
        if artifact_type(path) == "hfx_celo2":
            return Celo2MetaWeights.from_pretrained(path)
        return convert_checkpoint(_checkpoint_in_folder(path), **kwargs)
    return convert_checkpoint(path, **kwargs)


def main(argv=None) -> int:
    """``python -m hfx.optim.celo2.convert CHECKPOINT --out DIR``: write the hfx Hub folder of a checkpoint."""
    import argparse

    parser = argparse.ArgumentParser(description="Convert an official / PyLO Celo2 checkpoint to the hfx Hub format.")
    parser.add_argument("checkpoint", help="flax msgpack file (official release) or PyLO .pt state dict")
    parser.add_argument("--out", required=True, help="output folder (config.json + model.safetensors)")
    args = parser.parse_args(argv)
    meta = convert_checkpoint(args.checkpoint)
    meta.save_pretrained(args.out)
    print(f"wrote {args.out} ({meta.num_parameters()} meta-parameters)")  # noqa: T201
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())


__all__ = [
    "convert_checkpoint",
    "from_official_tree",
    "from_pylo_state_dict",
    "load_any",
    "read_flax_msgpack",
]
