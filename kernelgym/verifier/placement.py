"""Where the reference's parameters and buffers go in ``ModelNew``, and which of them it holds constant.

Holds:
    transfer_state: copy the reference's state into ``ModelNew``: by name, then by shape and role.
    tensor_role / ROLE_WORDS: the role (weight, bias, running_mean, ...) a tensor's name gives it.
    declared_constants: the entries of ``ModelNew.constant_weights`` (the reference state it holds fixed).
    covered_names: the reference's names those entries cover.
    host_state: a model's parameters and buffers copied to the host (what a candidate process is sent).

``transfer_state`` and ``declared_constants`` run in the candidate's process (on its model);
``covered_names`` runs on the trusted side, on the names the candidate reported.
"""

from __future__ import annotations

import re

import torch

__all__ = ["ROLE_WORDS", "covered_names", "declared_constants", "host_state", "tensor_role", "transfer_state"]

ROLE_WORDS = {"weight": "weight", "w": "weight", "gamma": "weight", "g": "weight", "scale": "weight",
              "bias": "bias", "b": "bias", "beta": "bias", "shift": "bias",
              "mean": "running_mean", "var": "running_var", "variance": "running_var"}
"""The words of a tensor's name that say its role (``w1`` is ``w``: trailing digits are dropped), and the role each says."""


def tensor_role(name: str) -> str | None:
    """The role the last component of a parameter's or buffer's name gives it (:data:`ROLE_WORDS`), if exactly one.

    The component is split into words at underscores and camel-case humps.

    Example:
        >>> [tensor_role(n) for n in ("ln.weight", "bn.running_var", "in_proj_bias", "b1", "lnGamma", "beta_shift")]
        ['weight', 'running_var', 'bias', 'bias', 'weight', 'bias']
        >>> [tensor_role(n) for n in ("biases.0", "scale_bias", "steps")]
        [None, None, None]
    """
    last = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.rsplit(".", 1)[-1]).lower()
    roles = {ROLE_WORDS.get(word.rstrip("0123456789")) for word in last.split("_")} - {None}
    return roles.pop() if len(roles) == 1 else None


def transfer_state(model: torch.nn.Module, state: dict[str, torch.Tensor],
                   differed: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Copy the reference's ``state`` into ``model``; return what found no place, and what received nothing.

    ``differed``, where given, gains the name of each tensor of ``state`` whose value differed from the one it
    replaced: what ``model``'s own ``__init__`` made differs from the reference's there.

    A tensor goes to the one of the same name and shape. The rest go by shape and role: first, in
    ``state``'s order, each to the first tensor not yet filled of equal shape and dtype in ``model``'s
    ``state_dict`` (registration order) whose name gives it the same role (:func:`tensor_role`: a
    ``weight``, ``bias``, ``running_mean``, ...); then each still waiting to the first such tensor of
    any role. An answer that holds ``self.weight`` where the reference holds ``self.conv.weight`` gets
    it, and a LayerNorm holding ``self.b`` before ``self.g`` gets the bias in ``b``; among names that
    give no role (``self.p``, ``self.q``) registration order decides.

    Returns:
        The names in ``state`` that found no place, and the tensors of ``model`` that received
        nothing: ``state_dict`` entries left unfilled and tensors held as plain attributes.

    Example:
        >>> class Renamed(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.b = torch.nn.Parameter(torch.zeros(3))
        ...         self.g = torch.nn.Parameter(torch.zeros(3))
        >>> reference, model = torch.nn.LayerNorm(3), Renamed()
        >>> with torch.no_grad():
        ...     _ = reference.bias.fill_(2.0)
        >>> transfer_state(model, reference.state_dict()), model.b.tolist(), model.g.tolist()
        (([], []), [2.0, 2.0, 2.0], [1.0, 1.0, 1.0])
        >>> model.g_t = model.g.detach().t()
        >>> transfer_state(model, {"scale": torch.ones(4)})
        (['scale'], ['b', 'g', 'g_t'])
    """
    free = dict(model.state_dict())  # own tensors not yet filled, in registration order
    waiting: list[str] = []

    def place(key: str, own: torch.Tensor, value: torch.Tensor) -> None:
        if differed is not None and not _equal(own, value):
            differed.append(key)
        own.copy_(value)

    with torch.no_grad():
        for key, value in state.items():
            if key in free and free[key].shape == value.shape:
                place(key, free.pop(key), value)
            else:
                waiting.append(key)
        for same_role in (True, False):
            unplaced: list[str] = []
            for key in waiting:
                value, role = state[key], tensor_role(key)
                match = next((name for name, own in free.items() if own.shape == value.shape and own.dtype == value.dtype
                              and (not same_role or (role is not None and tensor_role(name) == role))), None)
                if match is None:
                    unplaced.append(key)
                else:
                    place(key, free.pop(match), value)
            waiting = unplaced
    held = [f"{prefix}{'.' if prefix else ''}{name}" for prefix, module in model.named_modules()
            for name, value in vars(module).items() if isinstance(value, torch.Tensor)]
    return waiting, [*free, *held]


def _equal(own: torch.Tensor, value: torch.Tensor) -> bool:
    """Whether ``own`` holds ``value`` already (``value`` as the copy would put it: on ``own``'s device, in its dtype);
    unknown counts as no."""
    try:
        return bool(torch.equal(own, value.to(own.device, own.dtype)))
    except Exception:  # a tensor subclass or a device that cannot compare: counted as differing
        return False


def declared_constants(model: torch.nn.Module) -> list[str]:
    """The entries of ``model``'s ``constant_weights``: the reference's state it holds fixed (see :func:`covered_names`).

    Raises:
        TypeError: ``constant_weights`` is not a tuple or list of strings.

    Example:
        >>> class Fixed(torch.nn.Module):
        ...     constant_weights = ("weight", "bias")
        >>> declared_constants(Fixed()), declared_constants(torch.nn.ReLU())
        (['weight', 'bias'], [])
    """
    declared = getattr(model, "constant_weights", ())
    if not isinstance(declared, (tuple, list)) or not all(isinstance(entry, str) for entry in declared):
        raise TypeError("ModelNew.constant_weights must be a tuple of the reference's parameter and buffer names, "
                        f"not {type(declared).__name__}")
    return list(declared)


def covered_names(entries: list[str], names: list[str]) -> list[str]:
    """The names among ``names`` some entry covers: the name itself, a dotted tail of it, or a module above it.

    Example:
        >>> names = ["ln.weight", "ln.bias", "fc.weight", "fc.bias"]
        >>> covered_names(["bias"], names), covered_names(["ln"], names), covered_names(["fc.weight", "eight"], names)
        (['ln.bias', 'fc.bias'], ['ln.weight', 'ln.bias'], ['fc.weight'])
    """
    return [name for name in names
            if any(name == entry or name.endswith(f".{entry}") or name.startswith(f"{entry}.") for entry in entries)]


def host_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s parameters and buffers, copied to the host (what a candidate process is sent)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
