"""FedPass: adaptive obfuscation with private passports (Gu et al., IJCAI 2023).

A passport layer replaces a normal layer ``W``::

    g(x, s) = gamma * (W x) + beta
    gamma   = Avg(D(E(W s_gamma))),   beta = Avg(D(E(W s_beta)))

``E``/``D`` are a small autoencoder over the layer's output channels
(``out -> max(1, out // 4) -> out``, LeakyReLU between, no biases) trained
with the model, and ``Avg`` averages over the passport's rows (linear) or
spatial positions (conv). ``W`` is applied to the passport as to an input: a
matrix product for :class:`PassportLinear` (passport ``(rows, in_features)``),
the convolution itself for :class:`PassportConv2d` (passport
``(1, in_channels, h, w)``). ``W`` gets gradients through all three paths
(``W x``, ``gamma``, ``beta``), which is what adapts the obfuscation to the
model. The replaced layer's bias is dropped: ``beta`` takes its place.
By default (``squash="tanh"``) gamma and beta pass through tanh, as in the
passport blocks of FATE's FedPass implementation: the printed formula lets
``W s`` grow with the passport range ``N`` and SGD diverge on models without
normalization layers; ``squash=None`` gives the formula as printed.

Passports are private to the party holding the layer and re-sampled at every
batch: element ``s[.., j, ..]`` of input channel ``j`` is drawn from
``N(mu_j, sigma^2)``, with ``mu_j ~ U(-N, 0)`` drawn once per layer and
passport (gamma and beta have their own means) when the layer is created.
The draws come from :class:`vflsec.kernels.NoiseGenerator` (cryptographically
secure unless a seed is given), one generator per party. At inference the
layer keeps the passports of the last training batch (buffers of the layer:
``state_dict()`` holds them, so a saved and reloaded model predicts with the
same passports). The generators are never copied or pickled (a copy would
repeat the passports): a copied, unpickled or loaded layer has none and cannot
draw new passports (RuntimeError), but predicts as the original did.

Placement (paper, Appendix A.4): the passive parties' **last** convolution (or
linear) layer and the active party's **first** fully connected layer.

Paper settings (Table 6; SGD, lr 1e-2, weight decay 4e-5, batch 64)::

    LeNet-MNIST      50 iterations   N in [1, 50]    sigma^2 in [1, 9]
    AlexNet-CIFAR10  100             N in [1, 200]   sigma^2 in [1, 64]
    ResNet-CIFAR10   100             N in [1, 100]   sigma^2 in [1, 25]
    LeNet-ModelNet   100             N in [1, 50]    sigma^2 in [1, 9]

Appendix B.2 recommends N = 100 and sigma^2 = 5 (accuracy within 0.5 % of
the unprotected model on AlexNet-CIFAR10); those are the defaults.
FedPass gives no differential-privacy guarantee: ``privacy_spent()`` is None.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from ..._arrays import check_positive_int, check_real
from .base import BatchInfo, Defense, DefenseContext, check_seed
from .registry import register_defense

# PassportConv2d / PassportLinear are served by the module __getattr__ below (torch is imported lazily).
__all__ = ["FEDPASS_PAPER_SETTINGS", "FedPass", "PassportConv2d", "PassportLinear"]  # noqa: F822

FEDPASS_PAPER_SETTINGS: Dict[str, Dict[str, Any]] = {
    "lenet_mnist": {"optimizer": "SGD", "lr": 1e-2, "weight_decay": 4e-5, "batch_size": 64, "iterations": 50,
                    "n_range": (1, 50), "sigma2": (1, 9)},
    "alexnet_cifar10": {"optimizer": "SGD", "lr": 1e-2, "weight_decay": 4e-5, "batch_size": 64,
                        "iterations": 100, "n_range": (1, 200), "sigma2": (1, 64)},
    "resnet_cifar10": {"optimizer": "SGD", "lr": 1e-2, "weight_decay": 4e-5, "batch_size": 64,
                       "iterations": 100, "n_range": (1, 100), "sigma2": (1, 25)},
    "lenet_modelnet": {"optimizer": "SGD", "lr": 1e-2, "weight_decay": 4e-5, "batch_size": 64,
                       "iterations": 100, "n_range": (1, 50), "sigma2": (1, 9)},
}
WHERE = ("passive", "active")


def _owner_generator(seed: Optional[int], owner: str):
    from ...kernels import NoiseGenerator

    if seed is None:
        return NoiseGenerator()
    return NoiseGenerator(f"vflsec.fedpass/{seed}/{owner}".encode())


def _check_passport_params(n_range: Any, sigma2: Any) -> Tuple[float, float]:
    n_range = check_real(n_range, "n_range", low=0.0, low_inclusive=False)
    sigma2 = check_real(sigma2, "sigma2", low=0.0, low_inclusive=False)
    return n_range, sigma2


SQUASHES = ("tanh", None)


def _check_squash(squash: Any) -> Optional[str]:
    if squash not in SQUASHES:
        raise ValueError(f"squash must be one of {SQUASHES}, got {squash!r}")
    return squash


def _torch_modules() -> Tuple[Any, Any]:
    """The passport layer classes, built on first use so torch stays optional."""
    global _CLASSES
    if _CLASSES is not None:
        return _CLASSES
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class _PassportMixin(nn.Module):
        """Passport state, sampling and the autoencoder shared by both layer kinds."""

        # For the type checker only (no class attributes are created): nn.Module's
        # __getattr__ types unknown attributes as Tensor | Module; these are set in
        # __init__ / _init_passports, and _apply_w is defined by each layer kind.
        weight: Any
        encoder: Any
        decoder: Any
        _passport_shape: Any
        passport_mean: Any
        _apply_w: Callable[[Any], Any]

        def _init_passports(self, out_channels: int, in_channels: int, n_range: float, sigma2: float,
                            squash: Optional[str], generator: Any, passport_shape: Optional[Tuple[int, ...]]) -> None:
            self.n_range, self.sigma2 = _check_passport_params(n_range, sigma2)
            self.squash = _check_squash(squash)
            hidden = max(1, out_channels // 4)
            # Built on the meta device (no draw from torch's global generator), then materialised.
            self.encoder = nn.Linear(out_channels, hidden, bias=False, device="meta",
                                     dtype=self.weight.dtype).to_empty(device=self.weight.device)
            self.decoder = nn.Linear(hidden, out_channels, bias=False, device="meta",
                                     dtype=self.weight.dtype).to_empty(device=self.weight.device)
            # Initialised from the party's own generator, not torch's global one: the
            # trainer wraps models inside party threads, where the global generator's
            # state depends on thread timing (runs would not be reproducible).
            init = torch.Generator(device="cpu").manual_seed(int(generator.random_raw(1)[0]) >> 1)
            with torch.no_grad():
                for w in (self.weight, self.encoder.weight, self.decoder.weight):
                    w.copy_(nn.init.kaiming_uniform_(torch.empty(w.shape, dtype=w.dtype), a=5 ** 0.5,
                                                     generator=init))
            self._generator = generator
            self._in_channels = in_channels
            self._passport_shape = passport_shape  # None: taken from the first input (conv)
            dtype = self.weight.dtype
            # mu_j ~ U(-N, 0), one per input channel, fixed for the layer's life.
            mu = -self.n_range * generator.random((2, in_channels))
            self.register_buffer("passport_mean", torch.as_tensor(mu, dtype=dtype))
            self.register_buffer("passport_gamma", None)
            self.register_buffer("passport_beta", None)
            if passport_shape is not None:
                self.resample()

        def resample(self) -> None:
            """Draw fresh passports ``s ~ N(mu_j, sigma^2)`` (called once per batch)."""
            if self._passport_shape is None:
                self._pending_resample = True
                return
            if self._generator is None:
                raise RuntimeError("this passport layer was copied, unpickled or loaded: its generator is not "
                                   "copied (a copy would repeat its passports), so it cannot draw new ones; "
                                   "train a new model to train further")
            shape = (2,) + tuple(self._passport_shape)
            z = self._generator.standard_normal(shape)
            s = torch.as_tensor(z, dtype=self.weight.dtype, device=self.weight.device)
            s = s * (self.sigma2 ** 0.5) + self._broadcast_mean(shape)
            self.passport_gamma, self.passport_beta = s[0], s[1]
            self._pending_resample = False

        def __getstate__(self) -> Dict[str, Any]:
            # The passport generator cannot (and must not) be copied: a copy would repeat the passports.
            state = dict(super().__getstate__())
            state["_generator"] = None
            return state

        def _load_from_state_dict(self, state_dict: Any, prefix: str, *args: Any) -> None:
            # Passports not drawn yet (a conv layer before its first input) are None buffers,
            # which load_state_dict skips: give them the saved shape first.
            for name in ("passport_gamma", "passport_beta"):
                saved = state_dict.get(prefix + name)
                if saved is not None and getattr(self, name) is None:
                    setattr(self, name, torch.empty(saved.shape, dtype=self.weight.dtype, device=self.weight.device))
            super()._load_from_state_dict(state_dict, prefix, *args)
            if self.passport_gamma is not None:  # loaded passports are the ones in use: no re-draw on the next input
                self._passport_shape = tuple(self.passport_gamma.shape)
                self._pending_resample = False

        def _broadcast_mean(self, shape: Tuple[int, ...]) -> Any:
            mean = self.passport_mean.to(self.weight.device)
            # channel axis: last for linear passports (rows, in), 1 for conv (1, in, h, w)
            if len(shape) == 3:
                return mean.view(2, 1, -1)
            return mean.view(2, 1, -1, 1, 1)

        def _affine(self, key: Any) -> Any:
            """``Avg(D(E(key)))`` with ``key`` shaped (positions, out_channels), squashed if asked."""
            out = self.decoder(F.leaky_relu(self.encoder(key))).mean(dim=0)
            return torch.tanh(out) if self.squash == "tanh" else out

        def passport_params(self) -> Tuple[Any, Any]:
            """(gamma, beta), each of shape ``(out_channels,)``."""
            if self.passport_gamma is None or getattr(self, "_pending_resample", False):
                raise RuntimeError("passports not sampled yet")
            return self._affine(self._apply_w(self.passport_gamma)), self._affine(self._apply_w(self.passport_beta))

    class PassportLinear(_PassportMixin):
        """``gamma * (x W^T) + beta`` with passports of shape ``(passport_rows, in_features)``."""

        def __init__(self, in_features: int, out_features: int, *, n_range: float = 100.0, sigma2: float = 5.0,
                     passport_rows: int = 1, squash: Optional[str] = "tanh", generator: Any = None,
                     device: Any = None, dtype: Any = None) -> None:
            super().__init__()
            from ...kernels import NoiseGenerator

            self.in_features = check_positive_int(in_features, "in_features")
            self.out_features = check_positive_int(out_features, "out_features")
            passport_rows = check_positive_int(passport_rows, "passport_rows")
            # nn.Linear's initialisation, drawn in _init_passports from the party's generator
            self.weight = nn.Parameter(torch.empty(self.out_features, self.in_features, device=device, dtype=dtype))
            self._init_passports(self.out_features, self.in_features, n_range, sigma2, squash,
                                 generator if generator is not None else NoiseGenerator(),
                                 (passport_rows, self.in_features))

        def _apply_w(self, s: Any) -> Any:
            return F.linear(s, self.weight)

        def forward(self, x: Any) -> Any:
            gamma, beta = self.passport_params()
            return gamma * F.linear(x, self.weight) + beta

        def extra_repr(self) -> str:
            return (f"in_features={self.in_features}, out_features={self.out_features}, "
                    f"n_range={self.n_range}, sigma2={self.sigma2}, passport_rows={self._passport_shape[0]}")

    class PassportConv2d(_PassportMixin):
        """``gamma * conv(x, W) + beta`` (per output channel) with passports of
        shape ``(1, in_channels, h, w)``; ``passport_size=None`` takes ``(h, w)``
        from the first input."""

        def __init__(self, in_channels: int, out_channels: int, kernel_size: Any, stride: Any = 1,
                     padding: Any = 0, dilation: Any = 1, groups: int = 1, *, n_range: float = 100.0,
                     sigma2: float = 5.0, passport_size: Union[int, Sequence[int], None] = None,
                     squash: Optional[str] = "tanh", generator: Any = None,
                     device: Any = None, dtype: Any = None) -> None:
            super().__init__()
            from ...kernels import NoiseGenerator

            # nn.Conv2d validates the geometry; only its weight's shape is kept (meta device:
            # no initialisation from torch's global generator).
            ref = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding,
                            dilation=dilation, groups=groups, bias=False, device="meta")
            self.in_channels, self.out_channels = ref.in_channels, ref.out_channels
            self.kernel_size, self.stride, self.padding = ref.kernel_size, ref.stride, ref.padding
            self.dilation, self.groups = ref.dilation, ref.groups
            self.weight = nn.Parameter(torch.empty(ref.weight.shape, device=device, dtype=dtype))
            shape = None
            if passport_size is not None:
                sizes: Any = passport_size  # an int stands for (int, int)
                if isinstance(passport_size, numbers.Integral):
                    sizes = (passport_size, passport_size)
                h, w = (check_positive_int(v, "passport_size") for v in sizes)
                shape = (1, self.in_channels, h, w)
            self._init_passports(self.out_channels, self.in_channels, n_range, sigma2, squash,
                                 generator if generator is not None else NoiseGenerator(), shape)

        def _conv(self, x: Any) -> Any:
            return F.conv2d(x, self.weight, None, self.stride, self.padding, self.dilation, self.groups)

        def _apply_w(self, s: Any) -> Any:
            out = self._conv(s)  # (1, out, h', w')
            return out.flatten(2).squeeze(0).transpose(0, 1)  # (positions, out)

        def forward(self, x: Any) -> Any:
            if self._passport_shape is None or getattr(self, "_pending_resample", False):
                if x.dim() != 4:
                    raise ValueError(f"PassportConv2d expects (N, C, H, W) input, got shape {tuple(x.shape)}")
                if self._passport_shape is None:
                    self._passport_shape = (1, self.in_channels, int(x.shape[2]), int(x.shape[3]))
                self.resample()
            gamma, beta = self.passport_params()
            return gamma.view(1, -1, 1, 1) * self._conv(x) + beta.view(1, -1, 1, 1)

        def extra_repr(self) -> str:
            return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                    f"stride={self.stride}, padding={self.padding}, n_range={self.n_range}, sigma2={self.sigma2}")

    # Named as the module serves them (its __getattr__), so pickle finds the classes by reference.
    for cls in (PassportLinear, PassportConv2d):
        cls.__qualname__ = cls.__name__
    _CLASSES = (PassportLinear, PassportConv2d)
    return _CLASSES


_CLASSES: Any = None


def __getattr__(name: str) -> Any:
    # PassportLinear / PassportConv2d are torch modules, created on first access.
    if name == "PassportLinear":
        return _torch_modules()[0]
    if name == "PassportConv2d":
        return _torch_modules()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _passport_from(layer: Any, *, n_range: float, sigma2: float, squash: Optional[str], generator: Any,
                   passport_rows: int) -> Any:
    """A passport layer initialised with ``layer``'s weight (its bias is replaced by beta)."""
    import torch.nn as nn

    PassportLinear, PassportConv2d = _torch_modules()
    w = layer.weight
    if isinstance(layer, nn.Linear):
        new = PassportLinear(layer.in_features, layer.out_features, n_range=n_range, sigma2=sigma2,
                             passport_rows=passport_rows, squash=squash, generator=generator, device=w.device,
                             dtype=w.dtype)
    elif isinstance(layer, nn.Conv2d):
        if layer.padding_mode != "zeros":
            raise ValueError(f"FedPass: Conv2d with padding_mode={layer.padding_mode!r} is not supported")
        if isinstance(layer.padding, str):
            raise ValueError("FedPass: Conv2d with string padding ('same'/'valid') is not supported")
        new = PassportConv2d(layer.in_channels, layer.out_channels, layer.kernel_size, layer.stride,
                             layer.padding, layer.dilation, layer.groups, n_range=n_range, sigma2=sigma2,
                             squash=squash, generator=generator, device=w.device, dtype=w.dtype)
    else:  # pragma: no cover - callers pass only these two
        raise TypeError(f"cannot make a passport layer from {type(layer).__name__}")
    with __import__("torch").no_grad():
        new.weight.copy_(w)
    return new


def _replace_layer(module: Any, *, last: bool, kinds: Tuple[type, ...], make: Any) -> Tuple[Any, str]:
    """Replace the first or last layer (in registration order) of the first of
    ``kinds`` that ``module`` has; returns the (possibly new) module and the
    replaced layer's name (``""`` when ``module`` itself is that layer)."""
    PassportLinear, PassportConv2d = _torch_modules()
    for kind in kinds:
        candidates = [(name, m) for name, m in module.named_modules()
                      if isinstance(m, kind) and not isinstance(m, (PassportLinear, PassportConv2d))]
        if candidates:
            break
    else:
        kinds_named = " or ".join(k.__name__ for k in kinds)
        raise ValueError(f"FedPass: the model has no {kinds_named} layer to turn into a passport layer")
    name, layer = candidates[-1] if last else candidates[0]
    new = make(layer)
    if name == "":
        return new, name
    parent_name, _, child = name.rpartition(".")
    parent = module.get_submodule(parent_name) if parent_name else module
    setattr(parent, child, new)
    return module, name


class FedPass(Defense):
    """FedPass passport layers in the passive bottoms and the active head.

    Parameters
    ----------
    n_range : float > 0, default 100
        ``N``: passport means ``mu_j ~ U(-N, 0)``.
    sigma2 : float > 0, default 5
        Passport variance ``sigma^2``.
    where : tuple of "passive" / "active", default both
        Which side gets passport layers: each passive party's last Conv2d
        layer (its last Linear layer when it has no convolution), the active
        party's first Linear layer.
    passport_rows : int >= 1, default 1
        Rows of a linear layer's passport (the ``h1`` of the paper's
        ``s in R^{c x h1}``; gamma and beta average over them).
    squash : "tanh" (default) or None
        ``tanh`` bounds gamma and beta to (-1, 1), as the passport blocks of
        the FATE implementation of FedPass do; without it (the formula as
        printed) ``W s`` grows with ``N`` (passport means reach ``-N``) and
        SGD diverges on models without normalization layers (measured: NaN
        loss at N = 100 on the DP-VFL split MLP with lr 0.1).
    seed : int >= 0 or None
        ``None``: passports from a cryptographically secure generator per
        party (the trainer's ``DefenseContext.seed`` is used if it gives one).

    Build each party's optimizer **after** ``wrap_bottom`` / ``wrap_head``: the
    passport layers bring new parameters (the autoencoders).

    Attributes: ``layers_`` maps each owner (party name, or ``"active"``) to
    the name of the replaced layer and the passport layer.
    """

    name = "fedpass"

    def __init__(self, *, n_range: float = 100.0, sigma2: float = 5.0, where: Sequence[str] = WHERE,
                 passport_rows: int = 1, squash: Optional[str] = "tanh", seed: Optional[int] = None) -> None:
        self.n_range = n_range
        self.sigma2 = sigma2
        self.where = where
        self.passport_rows = passport_rows
        self.squash = squash
        self.seed = seed

    def _where(self) -> Tuple[str, ...]:
        """``where`` as a tuple of sides (a single str names one side)."""
        where = self.where
        if isinstance(where, str):
            where = (where,)
        try:
            where = tuple(where)
        except TypeError:
            raise TypeError(f"where must be a sequence of {WHERE}, got {where!r}") from None
        if not where or any(w not in WHERE for w in where) or len(set(where)) != len(where):
            raise ValueError(f"where must be a non-empty subset of {WHERE} without repeats, got {where!r}")
        return where

    def check_params(self) -> None:
        _check_passport_params(self.n_range, self.sigma2)
        _check_squash(self.squash)
        self._where()
        check_positive_int(self.passport_rows, "passport_rows")
        check_seed(self.seed)

    @property
    def variant(self) -> str:  # type: ignore[override]
        return f"N={self.n_range:g},sigma2={self.sigma2:g}"

    def __getstate__(self) -> Dict[str, Any]:
        # Passport generators cannot (and must not) be copied: every copy starts its own.
        state = dict(self.__dict__)
        if "_generators" in state:
            state["_generators"] = {}
        return state

    def setup(self, context: DefenseContext) -> None:
        super().setup(context)
        self.where_ = self._where()
        self._passport_seed = check_seed(self.seed if self.seed is not None else context.seed)
        self._generators: Dict[str, Any] = {}
        self.layers_: Dict[str, Tuple[str, Any]] = {}

    def _generator(self, owner: str) -> Any:
        if not hasattr(self, "_generators"):
            raise RuntimeError("FedPass.setup(context) must be called before wrapping models")
        gen = self._generators.get(owner)
        if gen is None:
            gen = self._generators[owner] = _owner_generator(self._passport_seed, owner)
        return gen

    def _make(self, owner: str):
        def make(layer: Any) -> Any:
            return _passport_from(layer, n_range=float(self.n_range), sigma2=float(self.sigma2), squash=self.squash,
                                  generator=self._generator(owner), passport_rows=int(self.passport_rows))
        return make

    def _set_up_where(self) -> Tuple[str, ...]:
        if not hasattr(self, "where_"):
            raise RuntimeError("FedPass.setup(context) must be called before wrapping models")
        return self.where_

    def wrap_bottom(self, party: str, module: Any) -> Any:
        if "passive" not in self._set_up_where():
            return module
        import torch.nn as nn

        if party == "active":
            raise ValueError("FedPass: a passive party may not be named 'active' (that name is the head's)")
        # The paper's passive models are convolutional: their last conv layer; an MLP: its last linear layer.
        module, name = _replace_layer(module, last=True, kinds=(nn.Conv2d, nn.Linear), make=self._make(party))
        self.layers_[party] = (name, _find(module, name))
        return module

    def wrap_head(self, module: Any) -> Any:
        if "active" not in self._set_up_where():
            return module
        import torch.nn as nn

        module, name = _replace_layer(module, last=False, kinds=(nn.Linear,), make=self._make("active"))
        self.layers_["active"] = (name, _find(module, name))
        return module

    def on_batch_start(self, batch: BatchInfo) -> None:
        for _, layer in getattr(self, "layers_", {}).values():
            layer.resample()


def _find(module: Any, name: str) -> Any:
    return module if name == "" else module.get_submodule(name)


register_defense("fedpass", FedPass)
