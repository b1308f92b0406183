"""The task families of the kernel-writing corpus: each draws a reference ``Model`` and an honest Triton ``ModelNew``.

Holds:
    Op: one elementwise operation, written once for the PyTorch reference and once for a Triton kernel.
    UNARY_OPS: the elementwise operations compositions are made of.
    Drawn: what a family draws: the op composition, the task program and its Triton answer.
    FAMILIES: family name -> its drawing function ``(rng, ops=None, task_form=None) -> Drawn``.
    REDUCERS, NORMS, SOFTMAXES: the central ops of the reduction, normalization and softmax families.
    TASK_FORMS: the ways a task program is written out.

A composition is a tuple of names (``("relu", "scale")``, ``("square", "sum")``); its
signature ``family:name>name`` identifies it across shapes, constants and code style,
which is what the held-out split (:mod:`kernelgym.training.corpus`) is keyed on.
Every answer computes in its own kernels only: ``forward`` allocates the output and
launches. Shapes stay small, so a corpus is judged under Triton's interpreter on a CPU
as well as on a GPU; answers read every size at run time, so the judge's shape
variants hold too. Style varies per item (kernel and pointer names, block sizes,
comments, import style, one block per row or a loop over column blocks), never the math.
The task program's form varies too: about half the items write it as KernelBench's
level-1 files are laid out (typed ``forward`` with an Args/Returns docstring, inputs
built into named tensors), the others compactly; both forms of an item are the same
program to run (same ``Model``, parameters, constants and inputs). The form is drawn
last, so an item's composition, shapes, constants and answer do not depend on it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["FAMILIES", "NORMS", "REDUCERS", "SOFTMAXES", "TASK_FORMS", "UNARY_OPS", "Drawn", "Op"]


@dataclass(frozen=True)
class Op:
    """One elementwise operation of ``x``.

    Attributes:
        name: its name in compositions and signatures.
        torch: the reference's expression, with ``{x}`` and the constants ``{a}``, ``{b}``.
        triton: the kernel's expression, same placeholders.
        constants: the ``(a, b)`` an item may draw (``()``: no constant).
        words: how the reference's docstring names it.
        alternatives: other kernel expressions of the same value (an item draws one of them or ``triton``).
    """

    name: str
    torch: str
    triton: str
    constants: tuple[tuple[float, ...], ...] = ()
    words: str = ""
    alternatives: tuple[str, ...] = ()

    def draw(self, rng: random.Random) -> dict[str, str]:
        """The constants of one use, as literals for both programs."""
        values = rng.choice(self.constants) if self.constants else ()
        return {key: repr(float(v)) for key, v in zip("ab", values, strict=False)}

    def write(self, template: str, x: str, constants: dict[str, str]) -> str:
        """The expression with ``x`` and the drawn constants put in."""
        return template.format(x=x, **constants)


UNARY_OPS: dict[str, Op] = {op.name: op for op in (
    Op("relu", "torch.relu({x})", "tl.maximum({x}, 0.0)", words="a ReLU",
       alternatives=("tl.where({x} > 0.0, {x}, 0.0)",)),
    Op("leaky_relu", "F.leaky_relu({x}, negative_slope={a})", "tl.where({x} >= 0.0, {x}, {x} * {a})",
       ((0.01,), (0.05,), (0.1,), (0.2,)), "a leaky ReLU"),
    Op("sigmoid", "torch.sigmoid({x})", "1.0 / (1.0 + tl.exp(-{x}))", words="a sigmoid",
       alternatives=("tl.sigmoid({x})",)),
    Op("tanh", "torch.tanh({x})", "2.0 / (1.0 + tl.exp(-2.0 * {x})) - 1.0", words="a tanh",
       alternatives=("1.0 - 2.0 / (tl.exp(2.0 * {x}) + 1.0)",)),
    Op("silu", "F.silu({x})", "{x} / (1.0 + tl.exp(-{x}))", words="a SiLU (swish)",
       alternatives=("{x} * tl.sigmoid({x})",)),
    Op("gelu", "F.gelu({x})", "0.5 * {x} * (1.0 + tl.math.erf({x} * 0.7071067811865476))", words="an exact GELU"),
    Op("softplus", "F.softplus({x})", "tl.where({x} > 20.0, {x}, tl.log(1.0 + tl.exp({x})))", words="a softplus"),
    Op("softsign", "F.softsign({x})", "{x} / (1.0 + tl.abs({x}))", words="a softsign"),
    Op("elu", "F.elu({x}, alpha={a})", "tl.where({x} > 0.0, {x}, {a} * (tl.exp({x}) - 1.0))",
       ((1.0,), (0.5,)), "an ELU"),
    Op("selu", "F.selu({x})",
       "tl.where({x} > 0.0, 1.0507009873554805 * {x}, 1.7580993408473766 * (tl.exp({x}) - 1.0))", words="a SELU"),
    Op("hardtanh", "F.hardtanh({x}, min_val={a}, max_val={b})", "tl.minimum(tl.maximum({x}, {a}), {b})",
       ((-1.0, 1.0), (-0.5, 0.5), (-2.0, 2.0)), "a hardtanh clamp"),
    Op("hardsigmoid", "F.hardsigmoid({x})", "tl.minimum(tl.maximum({x} / 6.0 + 0.5, 0.0), 1.0)",
       words="a hard sigmoid", alternatives=("tl.minimum(tl.maximum(({x} + 3.0) / 6.0, 0.0), 1.0)",)),
    Op("scale", "{x} * {a}", "{x} * {a}", ((0.5,), (2.0,), (1.5,), (-1.0,), (0.25,), (3.0,)), "a scaling"),
    Op("shift", "{x} + {a}", "{x} + {a}", ((-0.5,), (0.1,), (1.0,), (0.25,)), "a constant shift"),
    Op("square", "{x} * {x}", "{x} * {x}", words="a square"),
    Op("abs", "torch.abs({x})", "tl.abs({x})", words="an absolute value",
       alternatives=("tl.where({x} >= 0.0, {x}, -{x})",)),
)}

# Ops whose value at 0 is not 0 matter for reductions: masked lanes are reset after them in every answer.
_EPILOGUE_OPS = ("relu", "sigmoid", "tanh", "gelu", "silu", "scale", "shift", "leaky_relu", "hardtanh")
REDUCERS = {"sum": ("torch.sum", "0.0"), "mean": ("torch.mean", "0.0"),
             "max": ("torch.amax", 'float("-inf")'), "min": ("torch.amin", 'float("inf")')}
NORMS = ("layernorm", "rmsnorm", "l2norm")
SOFTMAXES = ("softmax", "log_softmax")
TASK_FORMS = ("compact", "kernelbench")
"""How a task program is written: ``compact``, or ``kernelbench`` (laid out as KernelBench's level-1 files are)."""
_INIT_PARAMETER_DOCS = {
    "dim": "Number of features in each row of the input.",
    "in_features": "Number of features in each input row.",
    "out_features": "Number of features in each output row.",
}


@dataclass(frozen=True)
class Drawn:
    """One drawn item of a family.

    Attributes:
        ops: the op composition (names, in order).
        task_source: the KernelBench-format reference program.
        answer_source: its honest Triton ``ModelNew``.
    """

    ops: tuple[str, ...]
    task_source: str
    answer_source: str


@dataclass(frozen=True)
class _Style:
    """The code style of one answer: names, block sizes, comments, import form."""

    kernel: str
    src: str
    dst: str
    block_name: str
    nn_import: str
    comments: bool
    warps: int

    @classmethod
    def draw(cls, rng: random.Random, stem: str) -> _Style:
        kernel = rng.choice(("{s}_kernel", "_{s}_fwd", "fused_{s}", "{s}_triton_kernel")).format(s=stem)
        src, dst = rng.choice((("x_ptr", "out_ptr"), ("in_ptr", "y_ptr"), ("src_ptr", "dst_ptr")))
        return cls(kernel, src, dst, rng.choice(("BLOCK", "BLOCK_SIZE")),
                   rng.choice(("from torch import nn", "import torch.nn as nn")), rng.random() < 0.5,
                   rng.choice((4, 8)))

    def header(self) -> str:
        return "\n".join(("import torch", self.nn_import, "import triton", "import triton.language as tl")) + "\n"

    def note(self, text: str, indent: int = 4) -> str:
        return f"{' ' * indent}# {text}\n" if self.comments else ""


def _sentence(ops: Sequence[str]) -> str:
    words = [UNARY_OPS[o].words if o in UNARY_OPS else o for o in ops]
    return ", then ".join(words)


def _shape(names: Sequence[str]) -> str:
    return f"({', '.join(names)}{',' if len(names) == 1 else ''})"


@dataclass(frozen=True)
class _Reference:
    """One task program before it is written out in one of :data:`TASK_FORMS`.

    Attributes:
        action: what ``forward`` does, as a phrase (``"applies a ReLU elementwise"``).
        steps: ``forward``'s statements, each ``x = <expression>``; ``x`` is returned.
        constants: the module's size constants, in order.
        input_shape: the input's shape in constants' names; ``get_inputs`` draws it with ``torch.randn``.
        output_shape: the output's shape in constants' names (``None``: the input's).
        init_params: ``__init__``'s parameters, which ``get_init_inputs`` returns as the constants of those names.
        init_body: ``__init__``'s statements after ``super().__init__()``, indented.
        functional: whether the steps use ``F`` (``torch.nn.functional``).
        compact_doc: the class docstring of the compact form ("": the action, as a sentence).
    """

    action: str
    steps: tuple[str, ...]
    constants: dict[str, int]
    input_shape: tuple[str, ...]
    output_shape: tuple[str, ...] | None = None
    init_params: tuple[str, ...] = ()
    init_body: str = ""
    functional: bool = False
    compact_doc: str = ""

    def render(self, form: str) -> str:
        """The program in ``form`` (one of :data:`TASK_FORMS`)."""
        if form == "compact":
            return self._compact()
        if form == "kernelbench":
            return self._kernelbench()
        raise ValueError(f"task form must be one of {TASK_FORMS}, not {form!r}")

    def _imports(self) -> str:
        return "import torch\nimport torch.nn as nn\n" + ("import torch.nn.functional as F\n" if self.functional else "")

    def _summary(self) -> str:
        return f"{self.action[0].upper()}{self.action[1:]}."

    def _constant_lines(self) -> str:
        return "".join(f"{name} = {value}\n" for name, value in self.constants.items())

    def _compact(self) -> str:
        init = (f"    def __init__(self{''.join(f', {p}' for p in self.init_params)}):\n        super().__init__()\n"
                f"{self.init_body}")
        forward = "".join(f"        {line}\n" for line in (*self.steps, "return x"))
        return (
            f'{self._imports()}\n\nclass Model(nn.Module):\n    """{self.compact_doc or self._summary()}"""\n\n{init}\n'
            f"    def forward(self, x):\n{forward}\n\n{self._constant_lines()}\n\n"
            f"def get_inputs():\n    return [torch.randn({', '.join(self.input_shape)})]\n\n\n"
            f"def get_init_inputs():\n    return [{', '.join(self.init_params)}]\n"
        )

    def _kernelbench(self) -> str:
        init_doc = ""
        if self.init_params:
            args = "".join(f"            {p} (int): {_INIT_PARAMETER_DOCS[p]}\n" for p in self.init_params)
            init_doc = f'        """\n        Initializes the model\'s parameters.\n\n        Args:\n{args}        """\n'
        init = (f"    def __init__(self{''.join(f', {p}: int' for p in self.init_params)}):\n{init_doc}"
                f"        super(Model, self).__init__()\n{self.init_body}")
        output = ("Output tensor of the same shape as the input." if self.output_shape is None
                  else f"Output tensor of shape {_shape(self.output_shape)}.")
        forward_doc = (f'        """\n        {self._summary()}\n\n        Args:\n'
                       f"            x (torch.Tensor): Input tensor of shape {_shape(self.input_shape)}.\n\n"
                       f'        Returns:\n            torch.Tensor: {output}\n        """\n')
        # The last step is returned directly, as KernelBench's files write a one-op forward.
        *steps, last = self.steps
        forward = "".join(f"        {line}\n" for line in (*steps, f"return {last.removeprefix('x = ')}"))
        init_inputs = (f"[{', '.join(self.init_params)}]" if self.init_params
                       else "[]  # No special initialization inputs needed")
        return (
            f'{self._imports()}\nclass Model(nn.Module):\n    """\n    A model that {self.action}.\n    """\n{init}\n'
            f"    def forward(self, x: torch.Tensor) -> torch.Tensor:\n{forward_doc}{forward}\n{self._constant_lines()}\n"
            f"def get_inputs():\n    x = torch.randn({', '.join(self.input_shape)})\n    return [x]\n\n"
            f"def get_init_inputs():\n    return {init_inputs}\n"
        )


def _drawn(rng: random.Random, ops: tuple[str, ...], reference: _Reference, answer: str, task_form: str | None) -> Drawn:
    """The item, its task written in ``task_form`` (``None``: drawn, after every other draw of the item)."""
    return Drawn(ops, reference.render(task_form or rng.choice(TASK_FORMS)), answer)


def _chain(ops: Sequence[str], rng: random.Random, var: str, indent: int) -> tuple[list[str], list[str]]:
    """The reference lines and the kernel lines applying ``ops`` to ``var`` (same constants in both)."""
    ref, ker = [], []
    for name in ops:
        op = UNARY_OPS[name]
        constants = op.draw(rng)
        ref.append(f"x = {op.write(op.torch, 'x', constants)}")
        template = rng.choice((op.triton, *op.alternatives))
        ker.append(" " * indent + f"{var} = {op.write(template, var, constants)}")
    return ref, ker


def _needs_functional(ops: Sequence[str]) -> bool:
    return any("F." in UNARY_OPS[o].torch for o in ops if o in UNARY_OPS)


def _draw_unary(rng: random.Random, low: int, high: int, pool: Sequence[str] = tuple(UNARY_OPS)) -> tuple[str, ...]:
    return tuple(rng.choice(pool) for _ in range(rng.randint(low, high)))


def elementwise(rng: random.Random, ops: tuple[str, ...] | None = None, task_form: str | None = None) -> Drawn:
    """A chain of 1-3 elementwise ops on a 2-D input, optionally with a learned per-column bias (``bias``)."""
    if ops is None:
        ops = _draw_unary(rng, 1, 3, (*UNARY_OPS, "bias"))
    style = _Style.draw(rng, rng.choice(("elementwise", "pointwise", "chain", "act")))
    rows, cols = rng.choice((4, 8, 16, 32)), rng.choice((96, 128, 200, 256, 384, 500))
    block = rng.choice((128, 256, 512, 1024))
    has_bias = "bias" in ops
    ref, ker = [], []
    for name in ops:
        if name == "bias":
            ref.append("x = x + self.bias")
            ker.append("    v = v + tl.load(bias_ptr + offsets % n_cols, mask=mask, other=0.0)")
        else:
            r, k = _chain([name], rng, "v", 4)
            ref += r
            ker += k
    init_body = "        self.bias = nn.Parameter(torch.randn(dim) * 0.1)\n" if has_bias else ""
    task = _Reference(f"applies {_sentence(ops)} elementwise", tuple(ref), {"batch_size": rows, "dim": cols},
                      ("batch_size", "dim"), init_params=("dim",) if has_bias else (), init_body=init_body,
                      functional=_needs_functional(ops))
    b = style.block_name
    params = f"{style.src}, " + ("bias_ptr, " if has_bias else "") + f"{style.dst}, n_elements, " + \
        ("n_cols, " if has_bias else "") + f"{b}: tl.constexpr"
    kernel = (
        f"@triton.jit\ndef {style.kernel}({params}):\n"
        + style.note("each program handles one contiguous block of the flattened tensor")
        + f"    pid = tl.program_id(axis=0)\n    offsets = pid * {b} + tl.arange(0, {b})\n"
        f"    mask = offsets < n_elements\n    v = tl.load({style.src} + offsets, mask=mask, other=0.0)\n"
        + "\n".join(ker) + f"\n    tl.store({style.dst} + offsets, v, mask=mask)\n"
    )
    launch_args = "x, " + ("self.bias, " if has_bias else "") + "out, n, " + ("x.shape[-1], " if has_bias else "")
    answer = _answer(style, kernel, ", dim" if has_bias else "", init_body, [
        "out = torch.empty_like(x)", "n = x.numel()", f"grid = (triton.cdiv(n, {block}),)",
        f"{style.kernel}[grid]({launch_args}{b}={block})", "return out"])
    return _drawn(rng, ops, task, answer, task_form)


def _answer(style: _Style, kernel: str, init_args: str, init_body: str, forward: Sequence[str]) -> str:
    """The answer program: imports, the kernel, and ``ModelNew`` whose ``forward`` allocates and launches."""
    lines = "".join(f"        {line}\n" for line in ("x = x.contiguous()", *forward))
    return (f"{style.header()}\n\n{kernel}\n\nclass ModelNew(nn.Module):\n    def __init__(self{init_args}):\n"
            f"        super().__init__()\n{init_body}\n    def forward(self, x):\n{lines}")


def _row_kernel_head(style: _Style, params: str, note: str) -> str:
    return (f"@triton.jit\ndef {style.kernel}({style.src}, {params}{style.dst}, n_cols, {style.block_name}: tl.constexpr):\n"
            + style.note(f"one program per row; {note}")
            + "    row = tl.program_id(0).to(tl.int64)\n    cols = tl.arange(0, " + style.block_name + ")\n")


def _row_launch(style: _Style, launch_params: str) -> list[str]:
    """``forward``'s lines for a kernel that holds a whole row in one block."""
    return ["out = torch.empty_like(x)", "rows, n_cols = x.shape", "block = triton.next_power_of_2(n_cols)",
            f"{style.kernel}[(rows,)](x, {launch_params}out, n_cols, {style.block_name}=block, num_warps={style.warps})",
            "return out"]


def reduction(rng: random.Random, ops: tuple[str, ...] | None = None, task_form: str | None = None) -> Drawn:
    """An optional elementwise op, a reduction of the last dimension (sum, mean, max, min), an optional epilogue op."""
    if ops is None:
        pre = _draw_unary(rng, 0, 1, ("abs", "square", "relu", "sigmoid", "tanh", "scale"))
        ops = (*pre, rng.choice(tuple(REDUCERS)), *_draw_unary(rng, 0, 1, _EPILOGUE_OPS))
    reducer = next(o for o in ops if o in REDUCERS)
    pre, post = ops[:ops.index(reducer)], ops[ops.index(reducer) + 1:]
    torch_fn, identity = REDUCERS[reducer]
    style = _Style.draw(rng, f"row_{reducer}")
    rows, cols = rng.choice((8, 16, 32, 64)), rng.choice((64, 100, 256, 300, 512, 1000))
    ref_pre, ker_pre = _chain(pre, rng, "v", 8)
    ref_post, ker_post = _chain(post, rng, "acc", 4)
    keepdim = rng.random() < 0.5
    steps = (*ref_pre, f"x = {torch_fn}(x, dim=-1{', keepdim=True' if keepdim else ''})", *ref_post)
    task = _Reference(f"applies {_sentence(ops)} over the last dimension", steps, {"batch_size": rows, "dim": cols},
                      ("batch_size", "dim"), ("batch_size", "1") if keepdim else ("batch_size",),
                      functional=_needs_functional((*pre, *post)))
    b = style.block_name
    combine = {"sum": "acc_v = acc_v + v", "mean": "acc_v = acc_v + v",
               "max": "acc_v = tl.maximum(acc_v, v)", "min": "acc_v = tl.minimum(acc_v, v)"}[reducer]
    final = {"sum": "tl.sum(acc_v, axis=0)", "mean": "tl.sum(acc_v, axis=0) / n_cols",
             "max": "tl.max(acc_v, axis=0)", "min": "tl.min(acc_v, axis=0)"}[reducer]
    kernel = (
        _row_kernel_head(style, "", "the row is read in blocks of columns")
        + f"    acc_v = tl.full([{b}], {identity}, tl.float32)\n"
        + f"    for start in range(0, n_cols, {b}):\n        idx = start + cols\n        mask = idx < n_cols\n"
        + f"        v = tl.load({style.src} + row * n_cols + idx, mask=mask, other=0.0)\n"
        + "".join(line + "\n" for line in ker_pre)
        + style.note("lanes past the row end must not count", 8)
        + f"        v = tl.where(mask, v, {identity})\n        {combine}\n"
        + f"    acc = {final}\n" + "".join(line + "\n" for line in ker_post)
        + f"    tl.store({style.dst} + row, acc)\n"
    )
    block = rng.choice((64, 128, 256))
    shape = "(rows, 1)" if keepdim else "(rows,)"
    answer = _answer(style, kernel, "", "", [
        "rows, n_cols = x.shape", f"out = torch.empty({shape}, device=x.device, dtype=x.dtype)",
        f"{style.kernel}[(rows,)](x, out, n_cols, {b}={block})", "return out"])
    return _drawn(rng, ops, task, answer, task_form)


def normalization(rng: random.Random, ops: tuple[str, ...] | None = None, task_form: str | None = None) -> Drawn:
    """An optional op, a row normalization (layernorm, rmsnorm with a learned scale, L2 normalize), an optional op."""
    if ops is None:
        ops = (*_draw_unary(rng, 0, 1, _EPILOGUE_OPS), rng.choice(NORMS), *_draw_unary(rng, 0, 1, _EPILOGUE_OPS))
    norm = next(o for o in ops if o in NORMS)
    pre, post = ops[:ops.index(norm)], ops[ops.index(norm) + 1:]
    style = _Style.draw(rng, norm)
    rows, cols = rng.choice((8, 16, 32)), rng.choice((64, 128, 200, 256, 384, 512))
    eps = rng.choice((1e-5, 1e-6))
    ref_pre, ker_pre = _chain(pre, rng, "v", 4)
    ref_post, ker_post = _chain(post, rng, "y", 4)
    params, init_body, ref, math, launch_params = "", "", "", "", ""
    if norm == "layernorm":
        init_body = "        self.weight = nn.Parameter(torch.ones(dim))\n        self.bias = nn.Parameter(torch.zeros(dim))\n"
        ref = f"x = F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, eps={eps})"
        math = ("    mean = tl.sum(v, axis=0) / n_cols\n    d = tl.where(mask, v - mean, 0.0)\n"
                f"    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + {eps})\n"
                "    w = tl.load(w_ptr + cols, mask=mask, other=0.0)\n    b = tl.load(b_ptr + cols, mask=mask, other=0.0)\n"
                "    y = d * rstd * w + b\n")
        params, launch_params = "w_ptr, b_ptr, ", "self.weight, self.bias, "
    elif norm == "rmsnorm":
        init_body = "        self.weight = nn.Parameter(torch.ones(dim))\n"
        ref = f"x = x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + {eps}) * self.weight"
        math = (f"    rms = tl.sqrt(tl.sum(v * v, axis=0) / n_cols + {eps})\n"
                "    w = tl.load(w_ptr + cols, mask=mask, other=0.0)\n    y = v / rms * w\n")
        params, launch_params = "w_ptr, ", "self.weight, "
    else:
        ref = "x = F.normalize(x, p=2.0, dim=-1)"
        math = "    norm = tl.sqrt(tl.sum(v * v, axis=0))\n    y = v / tl.maximum(norm, 1e-12)\n"
    has_params = norm != "l2norm"
    task = _Reference(f"applies {_sentence(ops)} to each row", (*ref_pre, ref, *ref_post),
                      {"batch_size": rows, "dim": cols}, ("batch_size", "dim"),
                      init_params=("dim",) if has_params else (), init_body=init_body, functional=True)
    kernel = (
        _row_kernel_head(style, params, "the whole row fits in one block")
        + f"    mask = cols < n_cols\n    v = tl.load({style.src} + row * n_cols + cols, mask=mask, other=0.0)\n"
        + "".join(line + "\n" for line in ker_pre)
        + "    v = tl.where(mask, v, 0.0)\n" + math + "".join(line + "\n" for line in ker_post)
        + f"    tl.store({style.dst} + row * n_cols + cols, y, mask=mask)\n"
    )
    answer = _answer(style, kernel, ", dim" if has_params else "", init_body, _row_launch(style, launch_params))
    return _drawn(rng, ops, task, answer, task_form)


def softmax(rng: random.Random, ops: tuple[str, ...] | None = None, task_form: str | None = None) -> Drawn:
    """An optional op (a temperature, a shift, ...), a softmax or log-softmax of each row, an optional op."""
    if ops is None:
        pre = _draw_unary(rng, 0, 1, ("scale", "shift", "tanh", "relu", "abs"))
        ops = (*pre, rng.choice(SOFTMAXES), *_draw_unary(rng, 0, 1, ("scale", "shift", "square")))
    kind = next(o for o in ops if o in SOFTMAXES)
    pre, post = ops[:ops.index(kind)], ops[ops.index(kind) + 1:]
    style = _Style.draw(rng, kind)
    rows, cols = rng.choice((8, 16, 32)), rng.choice((64, 100, 128, 256, 500, 1024))
    ref_pre, ker_pre = _chain(pre, rng, "v", 4)
    ref_post, ker_post = _chain(post, rng, "y", 4)
    fn = "torch.softmax" if kind == "softmax" else "torch.log_softmax"
    task = _Reference(f"applies {_sentence(ops)} over the last dimension", (*ref_pre, f"x = {fn}(x, dim=-1)", *ref_post),
                      {"batch_size": rows, "dim": cols}, ("batch_size", "dim"),
                      functional=_needs_functional((*pre, *post)))
    out = ("    y = e / denom\n" if kind == "softmax" else "    y = z - tl.log(denom)\n")
    kernel = (
        _row_kernel_head(style, "", "the whole row fits in one block")
        + f"    mask = cols < n_cols\n    v = tl.load({style.src} + row * n_cols + cols, mask=mask, other=0.0)\n"
        + "".join(line + "\n" for line in ker_pre)
        + style.note("padding lanes get -inf so they add nothing to the sum")
        + "    v = tl.where(mask, v, float(\"-inf\"))\n    z = v - tl.max(v, axis=0)\n"
        + "    e = tl.exp(z)\n    denom = tl.sum(e, axis=0)\n" + out + "".join(line + "\n" for line in ker_post)
        + f"    tl.store({style.dst} + row * n_cols + cols, y, mask=mask)\n"
    )
    answer = _answer(style, kernel, "", "", _row_launch(style, ""))
    return _drawn(rng, ops, task, answer, task_form)


def matmul(rng: random.Random, ops: tuple[str, ...] | None = None, task_form: str | None = None) -> Drawn:
    """A linear layer (with or without bias) and 0-2 elementwise ops fused into the matmul's epilogue."""
    if ops is None:
        ops = (rng.choice(("linear", "linear_nobias")), *_draw_unary(rng, 0, 2, _EPILOGUE_OPS))
    has_bias = ops[0] == "linear"
    style = _Style.draw(rng, rng.choice(("linear", "matmul", "gemm")))
    m, k, n = rng.choice((8, 16, 32, 48)), rng.choice((32, 64, 96, 128)), rng.choice((16, 32, 64, 80))
    ref_post, ker_post = _chain(ops[1:], rng, "acc", 4)
    init_body = f"        self.linear = nn.Linear(in_features, out_features, bias={has_bias})\n"
    then = _sentence(ops[1:])
    task = _Reference(f"applies a linear layer{f', then {then}' if then else ''}", ("x = self.linear(x)", *ref_post),
                      {"batch_size": m, "in_features": k, "out_features": n}, ("batch_size", "in_features"),
                      ("batch_size", "out_features"), ("in_features", "out_features"), init_body,
                      _needs_functional(ops[1:]), f"A linear layer, then {then or 'nothing else'}.")
    bm, bn, bk = rng.choice((16, 32)), rng.choice((16, 32)), rng.choice((16, 32))
    bias_param, bias_arg = ("bias_ptr, ", "self.linear.bias, ") if has_bias else ("", "")
    bias_line = "    acc = acc + tl.load(bias_ptr + rn, mask=rn < N, other=0.0)[None, :]\n" if has_bias else ""
    kernel = (
        f"@triton.jit\ndef {style.kernel}(a_ptr, w_ptr, {bias_param}c_ptr, M, N, K,\n"
        f"        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):\n"
        + style.note("C = A @ W^T: W is (N, K) row-major, as nn.Linear stores it")
        + "    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)\n"
        "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n    rk = tl.arange(0, BLOCK_K)\n"
        "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n    for k0 in range(0, K, BLOCK_K):\n"
        "        ks = k0 + rk\n"
        "        a = tl.load(a_ptr + rm[:, None] * K + ks[None, :], mask=(rm[:, None] < M) & (ks[None, :] < K), other=0.0)\n"
        "        w = tl.load(w_ptr + rn[None, :] * K + ks[:, None], mask=(rn[None, :] < N) & (ks[:, None] < K), other=0.0)\n"
        + style.note("full fp32 products, as the fp32 reference", 8)
        + "        acc += tl.dot(a, w, input_precision=\"ieee\")\n" + bias_line
        + "".join(line + "\n" for line in ker_post)
        + "    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))\n"
    )
    answer = _answer(style, kernel, ", in_features, out_features", init_body, [
        "m, k = x.shape", "n = self.linear.weight.shape[0]", "out = torch.empty((m, n), device=x.device, dtype=x.dtype)",
        f"grid = (triton.cdiv(m, {bm}), triton.cdiv(n, {bn}))",
        f"{style.kernel}[grid](x, self.linear.weight, {bias_arg}out, m, n, k, BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk})",
        "return out"])
    return _drawn(rng, ops, task, answer, task_form)


FAMILIES: dict[str, Callable[..., Drawn]] = {
    "elementwise": elementwise, "reduction": reduction, "normalization": normalization, "softmax": softmax,
    "matmul": matmul,
}
