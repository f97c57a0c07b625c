"""Saved split-learning models and defenses: no pickle, no noise generator.

A fitted :class:`~vflsec.splitnn.SplitNNClassifier` / ``SplitNNRegressor``
is saved by ``model.save(path)`` as **one** ``.npz`` archive (NumPy's zip of
``.npy`` arrays, read back with ``allow_pickle=False``: loading never runs code
from the file), written with mode 0600, atomically and never through a
symlink (:func:`vflsec.federation.private_files.private_open`, as the runtime
writes its ``.modules.npz``):

* member ``__vflsec__``: the header, UTF-8 JSON stored as a ``uint8`` array
  (the safetensors layout: a JSON header beside raw tensors)::

    {"format": "vflsec-splitnn-model", "version": 1, "estimator": "SplitNNClassifier",
     "vflsec_version": "...", "params": {...}, "modules": {...}, "fitted": {...},
     "defenses": {"defense_": {...}, "parties": {party: {...}}},
     "arrays": [[module, party, parameter], ...], "not_saved": "..."}

* members ``a0``, ``a1``, ...: every tensor of every trained module's
  ``state_dict()`` (bottoms, head; FedPass's passport layers with the
  passports in use), bit for bit; ``arrays[i]`` names the module and the
  parameter of ``a{i}``.

``params`` are the estimator's ``get_params(deep=False)``; ``modules`` how
to rebuild the bottoms and the head before their weights are loaded: the
default models (``None``), a factory of :mod:`vflsec.splitnn.models` (the
function or a ``functools.partial`` of it with JSON arguments), or
``{"custom": "<type>"}`` for a module or factory of the user's own, which
``load(path, bottoms=..., head=...)`` must be given again (the saved weights
then go into the models it builds). ``fitted`` is the rest of the fitted
model: the classes (with their dtype), parties, widths, history, bytes and
timings. ``defenses`` holds the set-up defense and each party's copy as
defense documents (below); the models are wrapped by them again on load (e.g.
FedPass's passport layers) before the weights are loaded, so the reloaded
model predicts identically, and ``privacy_spent_`` is recomputed from the
restored accounting (inference passes included).

A defense alone is saved by ``defense.save(path)`` as one JSON document
(0600, atomic)::

    {"format": "vflsec-splitnn-defense", "version": 1, "vflsec_version": "...",
     "defense": "<registry name>", "class": "<class name>", "params": {...},
     "context": {...} or null, "state": {...}, "not_saved": "..."}

``defense`` is the name it is registered under in :mod:`.defenses.registry`
(an unregistered class cannot be saved); ``context`` the
:class:`~.defenses.base.DefenseContext` it was set up with; ``state`` what
its guarantee and its releases depend on: VFL-AFE's resolved ``delta_`` /
``epsilon_``, its mechanisms (every part's sensitivity and sigma, as
calibrated) and inference passes; DP-SGD's ``delta_``, each owner's
mechanism, steps and clip threshold. A loaded defense is set up from
``context`` (none recalibrated) and reports the same ``privacy_spent()``.

Not saved (``not_saved``): noise and passport generators (a loaded defense
draws fresh, secure noise; it never repeats the saved one's) and noise seeds
(a defense's ``seed`` is saved as None: whoever holds a seed can reconstruct
the noise), the training data and what was measured on it for diagnostics
only (DP-SGD's ``calibration_norms_`` / ``last_clipped_norms_``, VFL-AFE's
``last_release_``, ``last_scale_``, ``rescale_trace_``, ``timings_``).
Floats in the JSON are Python's shortest round-trip repr (exact); a
non-finite float is ``{"__float__": "inf"}``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import warnings
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from .._json_data import from_json, read_json_document, to_json

__all__ = [
    "DEFENSE_FORMAT",
    "FORMAT_VERSION",
    "MODEL_FORMAT",
    "NOT_SAVED",
    "decode_defense",
    "encode_defense",
    "load_defense",
    "load_model",
    "save_defense",
    "save_model",
]

MODEL_FORMAT = "vflsec-splitnn-model"
DEFENSE_FORMAT = "vflsec-splitnn-defense"
FORMAT_VERSION = 1
HEADER = "__vflsec__"
NOT_SAVED = ("noise and passport generators (a loaded defense draws fresh, secure noise), noise seeds (saved as "
             "None), the training data and diagnostics measured on it (DP-SGD's calibration_norms_ / "
             "last_clipped_norms_, VFL-AFE's last_release_, last_scale_, rescale_trace_, timings_)")
PathLike = Union[str, "Path"]


def _document_text(document: Dict[str, Any]) -> bytes:
    """``document`` (its format and version first) with this vflsec's version and ``not_saved``, as UTF-8 JSON."""
    from .. import __version__

    head = {"format": document["format"], "version": document["version"], "vflsec_version": __version__}
    document = {**head, **document, "not_saved": NOT_SAVED}
    return (json.dumps(document, indent=1, allow_nan=False) + "\n").encode("utf-8")


def _checked(document: Any, file: Any, fmt: str, what: str) -> Dict[str, Any]:
    if not isinstance(document, dict) or document.get("format") != fmt:
        raise ValueError(f"{file}: not a saved vflsec {what} (no \"format\": \"{fmt}\")")
    if document.get("version") != FORMAT_VERSION:
        raise ValueError(f"{file}: saved {what} format version {document.get('version')!r}; this vflsec reads "
                         f"version {FORMAT_VERSION} -- save it again with this version")
    return document


# -- mechanisms and contexts ----------------------------------------------------------------------
def _encode_gaussian(mechanism: Any) -> Dict[str, Any]:
    return {"name": mechanism.name, "neighbours": mechanism.neighbours,
            "target": None if mechanism.target is None else list(mechanism.target),
            "parts": [[p.label, p.sensitivity, p.sigma, p.coordinates] for p in mechanism.parts]}


def _decode_gaussian(data: Mapping[str, Any]) -> Any:
    from ..dp.mechanisms import GaussianMechanism, GaussianPart

    parts = tuple(GaussianPart(str(label), float(sens), float(sigma), int(coords))
                  for label, sens, sigma, coords in data["parts"])
    target = data.get("target")
    return GaussianMechanism(data["name"], parts, data["neighbours"],
                             None if target is None else (float(target[0]), float(target[1])))


def _encode_subsampled(mechanism: Any) -> Dict[str, Any]:
    out = dataclasses.asdict(mechanism)
    out["target"] = None if mechanism.target is None else list(mechanism.target)
    return out


def _decode_subsampled(data: Mapping[str, Any]) -> Any:
    from ..dp.mechanisms import SubsampledGaussianMechanism

    fields = dict(data)
    target = fields.pop("target", None)
    return SubsampledGaussianMechanism(**fields, target=None if target is None else (float(target[0]),
                                                                                     float(target[1])))


def _encode_context(context: Any) -> Optional[Dict[str, Any]]:
    if context is None:
        return None
    out = {f.name: getattr(context, f.name) for f in dataclasses.fields(context)}
    out["seed"] = None  # a noise seed is not saved (module docstring)
    return to_json(out, "the defense's context")


def _decode_context(data: Any, device: Optional[str]) -> Any:
    if data is None:
        return None
    from .defenses.base import DefenseContext

    fields = dict(data)
    fields["passive_parties"] = tuple(fields["passive_parties"])
    if device is not None:
        fields["device"] = device
    return DefenseContext(**fields)


# -- a defense's fitted state, per kind -----------------------------------------------------------
def _defense_state(defense: Any) -> Dict[str, Any]:
    """What the defense's guarantee and releases depend on beyond its params and context."""
    from .defenses.dp_sgd import DPSGD
    from .defenses.vfl_afe import VFLAFE

    if isinstance(defense, VFLAFE) and hasattr(defense, "delta_"):
        mechanisms = getattr(defense, "_mechanisms", {})
        return {"delta_": defense.delta_, "epsilon_": getattr(defense, "epsilon_", None),
                "noise_multiplier_": getattr(defense, "noise_multiplier_", None),
                "n_clusters_": getattr(defense, "n_clusters_", None),
                "mechanisms": [[width, rows, _encode_gaussian(m)] for (width, rows), m in mechanisms.items()],
                "inference_passes_": dict(getattr(defense, "inference_passes_", {}))}
    if isinstance(defense, DPSGD) and hasattr(defense, "delta_"):
        return {"delta_": defense.delta_,
                "mechanisms": {p: _encode_subsampled(m) for p, m in defense.mechanisms_.items()},
                "steps_": dict(defense.steps_), "clip_norm_": dict(defense.clip_norm_)}
    return {}


def _restore_state(defense: Any, context: Any, state: Mapping[str, Any]) -> None:
    """Set ``defense`` up for ``context`` as it was when saved (no noise is recalibrated)."""
    from ..dp.gaussian import PrivacyWarning
    from .defenses.dp_sgd import DPSGD
    from .defenses.vfl_afe import VFLAFE

    if context is None:
        defense.check_params()
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)  # a delta >= 1/n was warned about when it was set up
        if isinstance(defense, VFLAFE) and state:
            defense.check_params()
            defense.context_ = context
            defense._reset_state()
            defense.delta_ = float(state["delta_"])
            defense.epsilon_ = None if state["epsilon_"] is None else float(state["epsilon_"])
            if state.get("noise_multiplier_") is not None:
                defense.noise_multiplier_ = float(state["noise_multiplier_"])
            if state.get("n_clusters_") is not None:
                defense.n_clusters_ = int(state["n_clusters_"])
            defense._mechanisms = {(int(w), None if r is None else int(r)): _decode_gaussian(m)
                                   for w, r, m in state["mechanisms"]}
            defense.inference_passes_ = {str(p): int(c) for p, c in state["inference_passes_"].items()}
            return
        defense.setup(context)
    if isinstance(defense, DPSGD) and state:
        defense.delta_ = float(state["delta_"])
        for party, data in state["mechanisms"].items():
            mechanism = _decode_subsampled(data)
            defense.mechanisms_[party] = mechanism
            defense.noise_multipliers_[party] = mechanism.noise_multiplier
            defense.coordinates_[party] = mechanism.coordinates
        defense.steps_ = {str(p): int(s) for p, s in state["steps_"].items()}
        defense.clip_norm_ = {str(p): float(c) for p, c in state["clip_norm_"].items()}


# -- defense documents ----------------------------------------------------------------------------
def _registered_name(defense: Any) -> str:
    from .defenses.registry import available_defenses, get_defense

    names = [name for name in available_defenses() if get_defense(name) is type(defense)]
    if not names:
        raise ValueError(f"{type(defense).__name__} is not registered (vflsec.splitnn.defenses.register_defense): "
                         "only a registered defense can be saved and built again on load")
    return names[0]


def encode_defense(defense: Any) -> Dict[str, Any]:
    """The defense document of ``defense`` (module docstring), as JSON data."""
    params = dict(defense.get_params(deep=False))
    if "seed" in params:
        params["seed"] = None  # a noise seed is not saved (module docstring)
    return {"format": DEFENSE_FORMAT, "version": FORMAT_VERSION, "defense": _registered_name(defense),
            "class": type(defense).__name__,
            "params": to_json(params, f"{type(defense).__name__} params"),
            "context": _encode_context(getattr(defense, "context_", None)),
            "state": to_json(_defense_state(defense), f"{type(defense).__name__} state")}


def decode_defense(document: Any, file: Any = "defense", *, device: Optional[str] = None) -> Any:
    """The defense a document describes, set up as it was saved."""
    from .defenses.registry import get_defense

    document = _checked(from_json(document), file, DEFENSE_FORMAT, "split-learning defense")
    cls = get_defense(document.get("defense"))
    if cls.__name__ != document.get("class"):
        raise ValueError(f"{file}: defense {document.get('defense')!r} is registered as {cls.__name__} here, "
                         f"but was saved from {document.get('class')}")
    params = dict(document.get("params") or {})
    defaults = {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()}
    for name, value in params.items():  # JSON has no tuples: give back the ones the constructor defaults to
        if isinstance(value, list) and isinstance(defaults.get(name), tuple):
            params[name] = tuple(value)
    defense = cls(**params)
    _restore_state(defense, _decode_context(document.get("context"), device), document.get("state") or {})
    return defense


def save_defense(defense: Any, path: PathLike) -> None:
    """Write ``defense``'s document to ``path`` (0600, atomic, not through a symlink)."""
    from ..federation.private_files import write_private_bytes

    write_private_bytes(Path(path), _document_text(encode_defense(defense)))


def load_defense(path: PathLike) -> Any:
    """The defense saved at ``path`` by :func:`save_defense`."""
    file = Path(path)
    document = read_json_document(file, "a saved vflsec split-learning defense")
    return decode_defense(document, file)


# -- models -------------------------------------------------------------------------------------
def _factories() -> Dict[str, Any]:
    from . import models

    return {name: getattr(models, name) for name in models.__all__}


def _encode_module_spec(spec: Any, where: str) -> Any:
    """How ``bottoms`` / ``head`` rebuilds its modules (module docstring)."""
    if spec is None:
        return None
    if isinstance(spec, (list, tuple)):
        return [_encode_module_spec(s, f"{where}[{i}]") for i, s in enumerate(spec)]
    factories = _factories()
    func, args, kwargs = spec, (), {}
    if isinstance(spec, functools.partial):
        func, args, kwargs = spec.func, spec.args, spec.keywords
    name = next((n for n, f in factories.items() if f is func), None)
    if name is not None:
        try:
            return {"factory": name, "args": to_json(list(args), where), "kwargs": to_json(dict(kwargs), where)}
        except TypeError:
            pass
    return {"custom": type(spec).__name__}


def _has_custom(spec: Any) -> bool:
    if isinstance(spec, list):
        return any(_has_custom(s) for s in spec)
    return isinstance(spec, dict) and "custom" in spec


def _decode_module_spec(spec: Any) -> Any:
    if spec is None:
        return None
    if isinstance(spec, list):
        return [_decode_module_spec(s) for s in spec]
    factories = _factories()
    if spec.get("factory") not in factories:
        raise ValueError(f"unknown model factory {spec.get('factory')!r}")
    return functools.partial(factories[spec["factory"]], *spec["args"], **spec["kwargs"])


def _encode_classes(classes: np.ndarray) -> Dict[str, Any]:
    array = np.asarray(classes)
    if array.dtype.kind not in "biufUO":
        raise TypeError(f"labels of dtype {array.dtype} cannot be saved -- use str, int, float or bool labels")
    return {"values": to_json(array, "classes_"), "dtype": "object" if array.dtype.kind == "O" else array.dtype.str}


def _decode_classes(data: Mapping[str, Any]) -> np.ndarray:
    return np.asarray(from_json(data["values"]), dtype=np.dtype(data["dtype"]))


_FITTED = ("n_parts_", "passive_parties_", "device_", "n_features_per_party_", "embedding_dims_", "bytes_by_tag_",
           "timings_", "history_")


def save_model(estimator: Any, path: PathLike) -> None:
    """Write the fitted split-learning ``estimator`` to ``path`` (module docstring)."""
    from ..federation.private_files import private_open

    estimator._check_fitted()
    name = type(estimator).__name__
    params = dict(estimator.get_params(deep=False))
    modules = {"bottoms": _encode_module_spec(params.pop("bottoms"), "bottoms"),
               "head": _encode_module_spec(params.pop("head"), "head")}
    params["defense"] = None if params["defense"] is None else "defense_"
    fitted = {key: getattr(estimator, key) for key in _FITTED}
    if hasattr(estimator, "classes_"):
        fitted["classes_"] = _encode_classes(estimator.classes_)
    defenses = {"defense_": encode_defense(estimator.defense_),
                "parties": {p: encode_defense(d) for p, d in estimator.party_defenses_.items()}}
    arrays: Dict[str, Any] = {}  # a0, a1, ... (never np.savez's own allow_pickle keyword) and the header
    names: List[List[Any]] = []
    owned = [("bottom", p, m) for p, m in estimator.bottoms_.items()] + [("head", None, estimator.head_)]
    for kind, party, module in owned:
        for key, tensor in module.state_dict().items():
            where = f"{kind} {party} {key}" if party else f"{kind} {key}"
            try:
                arrays[f"a{len(names)}"] = tensor.detach().cpu().numpy()
            except TypeError as exc:  # e.g. bfloat16, which numpy has no type for
                raise TypeError(f"cannot save {where}: {exc}") from None
            names.append([kind, party, key])
    header = _document_text({"format": MODEL_FORMAT, "version": FORMAT_VERSION, "estimator": name,
                             "params": to_json(params, "params"),
                             "modules": modules, "fitted": to_json(fitted, "fitted"), "defenses": defenses,
                             "arrays": names})
    arrays[HEADER] = np.frombuffer(header, dtype=np.uint8)
    with private_open(Path(path)) as fh:  # trained weights: 0600, atomic, never through a symlink
        np.savez(fh, **arrays)


def _read_archive(file: Path) -> Tuple[Dict[str, Any], Dict[str, np.ndarray]]:
    """``(header, arrays)`` of a saved model; ValueError naming ``file`` for anything else."""
    what = "split-learning model"
    try:
        data = np.load(file, allow_pickle=False)  # never unpickles: a file asking for it is refused
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ValueError(f"{file}: not a saved vflsec {what} ({exc})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{file}: not a saved vflsec {what} (one array, not an archive)")
    try:
        with data:
            if HEADER not in data.files:
                raise ValueError(f"{file}: not a saved vflsec {what} (no {HEADER} header)")
            header = bytes(data[HEADER].tobytes())
            arrays = {key: data[key] for key in data.files if key != HEADER}
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        if str(exc).startswith(str(file)):
            raise
        raise ValueError(f"{file}: not a saved vflsec {what} ({exc})") from None
    try:
        document = json.loads(header.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{file}: the {what}'s header is not JSON ({exc})") from None
    return _checked(document, file, MODEL_FORMAT, what), arrays


def load_model(cls: Any, path: PathLike, *, bottoms: Any = None, head: Any = None, device: Optional[str] = None):
    """The ``cls`` model saved at ``path`` by :func:`save_model` (see ``SplitNNClassifier.load``)."""
    from .._torch import require_torch
    from .estimator import resolve_device

    torch = require_torch("split learning")
    file = Path(path)
    document, arrays = _read_archive(file)
    if document.get("estimator") != cls.__name__:
        raise ValueError(f"{file} holds a {document.get('estimator')!r} model -- load it with "
                         f"{document.get('estimator')}.load")
    params = from_json(document["params"])
    modules = document["modules"]
    for key, given in (("bottoms", bottoms), ("head", head)):
        if given is None and _has_custom(modules[key]):
            raise ValueError(f"{file} was fitted with {key} of the user's own ({modules[key]}): pass {key}= (the "
                             "same modules or factories it was fitted with) to load it")
        params[key] = given if given is not None else _decode_module_spec(modules[key])
    if device is not None:
        params["device"] = device
    try:
        device_ = resolve_device(params["device"])
    except ValueError as exc:  # e.g. saved on a GPU machine, loaded on one without
        raise ValueError(f"{file}: {exc} -- pass device='cpu' (or another device this machine has) to load") \
            from None
    parties = document["defenses"]["parties"]
    defense_ = decode_defense(document["defenses"]["defense_"], file, device=device_)
    params["defense"] = defense_ if params["defense"] == "defense_" else None
    estimator = cls(**params)
    fitted = from_json(document["fitted"])
    for key in _FITTED:
        setattr(estimator, key, fitted[key])
    estimator.passive_parties_ = tuple(estimator.passive_parties_)
    estimator.device_ = device_
    if "classes_" in fitted:
        estimator.classes_ = _decode_classes(fitted["classes_"])
    estimator.defense_ = defense_
    estimator.party_defenses_ = {p: decode_defense(doc, file, device=device_) for p, doc in parties.items()}
    _rebuild_modules(estimator, torch, file)
    _load_weights(estimator, torch, file, document["arrays"], arrays)
    estimator.privacy_spent_ = {p: estimator.party_defenses_[p].privacy_spent() for p in estimator.passive_parties_}
    return estimator


def _rebuild_modules(estimator: Any, torch: Any, file: Path) -> None:
    """The bottoms and head as ``fit`` builds them, wrapped by each party's defense copy as its program wraps them."""
    features = estimator._training_order(list(estimator.n_features_per_party_))
    n_outputs = len(estimator.classes_) if hasattr(estimator, "classes_") else 1
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(estimator.seed))  # the weights are overwritten; this keeps the global stream
            bottoms = [estimator._build_bottom(i, f) for i, f in enumerate(features)]
            widths = [estimator._out_width(b, f) for b, f in zip(bottoms, features)]
            head = estimator._build_head(sum(widths), n_outputs)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{file}: the models cannot be built again: {exc}") from None
    device = torch.device(estimator.device_)
    names = list(estimator.passive_parties_) + (["active"] if estimator.active_features else [])
    estimator.bottoms_ = {}
    for party, bottom in zip(names, bottoms):
        bottom = bottom.to(device)
        if party != "active":  # the active party's own bottom is never wrapped (its embedding is not sent)
            bottom = estimator.party_defenses_[party].wrap_bottom(party, bottom)
        estimator.bottoms_[party] = bottom
    estimator.head_ = estimator.party_defenses_["active"].wrap_head(head.to(device))


def _load_weights(estimator: Any, torch: Any, file: Path, names: List[Any], arrays: Mapping[str, np.ndarray]) -> None:
    states: Dict[Tuple[str, Optional[str]], Dict[str, Any]] = {}
    for i, (kind, party, key) in enumerate(names):
        array = arrays.get(f"a{i}")
        if array is None:
            raise ValueError(f"{file}: array a{i} ({kind} {party or ''} {key}) is missing")
        states.setdefault((kind, party), {})[key] = torch.from_numpy(np.array(array))
    owned = [(("bottom", p), m) for p, m in estimator.bottoms_.items()] + [(("head", None), estimator.head_)]
    if {k for k, _ in owned} != set(states):
        raise ValueError(f"{file}: the saved modules {sorted(map(str, states))} are not this model's "
                         f"{sorted(str(k) for k, _ in owned)}")
    for key, module in owned:
        try:
            module.load_state_dict(states[key], strict=True)
        except RuntimeError as exc:
            raise ValueError(f"{file}: the saved weights of {' '.join(k for k in key if k)} do not fit the model "
                             f"built for them (pass the bottoms / head it was fitted with): {exc}") from None
