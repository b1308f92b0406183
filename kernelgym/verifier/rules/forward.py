"""The Python rules over ``ModelNew.forward`` and the code it reaches.

Holds:
    ForwardRules: the reach walk (torch compute, fallbacks, output caches, kernel calls); a base of PythonRules.
    walk_args, method_computes: helpers shared with the other rule modules.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Iterator

import tree_sitter

from kernelgym.verifier.rules.catalogue import rule, rule_message
from kernelgym.verifier.rules.names import (
    ARITH_OPS,
    CACHE_METHODS,
    COMPARE_OPS,
    COMPUTE_METHODS,
    ENTRY_METHODS,
    LITERALS,
    META_METHODS,
    OPERATOR_NON_COMPUTE,
    SCALAR_ANNOTATIONS,
    TENSOR_CLASSES,
    TENSOR_RETURNING,
    TORCH_ALLOC,
    is_compute_name,
    rule_for_name,
)
from kernelgym.verifier.rules.syntax import field_of, node_key, node_text, walk

_BUILTIN_NAMES = frozenset(vars(builtins))


class ForwardRules:
    """The rules over ModelNew.forward and the code it reaches (a base of the Python rules)."""

    def _self_tensors(self) -> set[str]:
        found: set[str] = set()
        for key, value in self.p.assignments:
            if key.startswith("self.") and self._is_tensor(value, frozenset()):
                found.add(key)
        for node, _ in self.p.nodes:
            if node.type == "call":
                function = field_of(node, "function")
                if (
                    function is not None
                    and function.type == "attribute"
                    and node_text(field_of(function, "attribute")) in ("register_buffer", "register_parameter")
                ):
                    args = field_of(node, "arguments")
                    name = (
                        self.p.const_str(args.named_children[0]) if args is not None and args.named_children else None
                    )
                    if name:
                        found.add("self." + name)
        return found

    def _is_tensor(self, node: tree_sitter.Node | None, taint: frozenset[str], depth: int = 0) -> bool:
        """Whether an expression is known to be a tensor (so operators on it dispatch ATen ops)."""
        if node is None or depth > 25:
            return False
        kind = node.type
        if kind == "identifier":
            return node_text(node) in taint
        if kind == "attribute":
            obj = field_of(node, "object")
            attr = node_text(field_of(node, "attribute"))
            if obj is not None and obj.type == "identifier" and node_text(obj) in ("self", "cls"):
                return "self." + attr in getattr(self, "self_tensors", ())
            return attr in ("T", "mT", "H", "mH", "data", "grad", "real", "imag") and self._is_tensor(
                obj, taint, depth + 1
            )
        if kind == "subscript":
            return self._is_tensor(field_of(node, "value"), taint, depth + 1)
        if kind in ("parenthesized_expression", "unary_operator") and node.named_children:
            return self._is_tensor(node.named_children[-1], taint, depth + 1)
        if kind == "conditional_expression":
            return any(self._is_tensor(c, taint, depth + 1) for c in node.named_children[:1] + node.named_children[2:3])
        if kind == "binary_operator":
            return self._is_tensor(field_of(node, "left"), taint, depth + 1) or self._is_tensor(
                field_of(node, "right"), taint, depth + 1
            )
        if kind != "call":
            return False
        function = field_of(node, "function")
        if function is None or function.type == "subscript":
            return False
        for target in self.p.resolve(function):
            if target.startswith("<ext>.") or target.startswith("<xinst>torch.nn.") or target in TENSOR_CLASSES:
                return True
            if target.startswith("torch.") and (
                target in TORCH_ALLOC or (is_compute_name(target) and not target.rsplit(".", 1)[-1][:1].isupper())
            ):
                return True
        if function.type == "attribute":
            method = node_text(field_of(function, "attribute"))
            if method in TENSOR_RETURNING or method_computes(method):
                return self._is_tensor(field_of(function, "object"), taint, depth + 1)
        return False

    def _local_taint(self, body: tree_sitter.Node, seeds: frozenset[str]) -> frozenset[str]:
        pairs: list[tuple[tree_sitter.Node, tree_sitter.Node]] = []
        for node in walk(body):
            if node.type in ("assignment", "for_statement", "for_in_clause"):
                left, right = field_of(node, "left"), field_of(node, "right")
                if left is not None and right is not None:
                    pairs.append((left, right))
        taint = set(seeds)
        for _ in range(4):
            before = len(taint)
            frozen = frozenset(taint)
            for left, right in pairs:
                if left.type == "identifier":
                    if self._is_tensor(right, frozen):
                        taint.add(node_text(left))
                elif left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
                    values = right.named_children if right.type in ("expression_list", "tuple") else []
                    targets = left.named_children
                    for index, target in enumerate(targets):
                        value = values[index] if len(values) == len(targets) else right
                        if target.type == "identifier" and self._is_tensor(value, frozen):
                            taint.add(node_text(target))
            if len(taint) == before:
                break
        return frozenset(taint)

    @staticmethod
    def _parameters(definition: tree_sitter.Node) -> list[tuple[str, bool]]:
        """Parameter names in order (``self``/``cls`` dropped), each with "could be a tensor input"."""
        params = field_of(definition, "parameters")
        out: list[tuple[str, bool]] = []
        if params is None:
            return out
        for child in params.named_children:
            kind = child.type
            if kind == "identifier":
                out.append((node_text(child), True))
            elif kind in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
                names = [c for c in child.named_children if c.type == "identifier"]
                annotation = node_text(field_of(child, "type"))
                if names:
                    out.append((node_text(names[0]), annotation.split("[")[0] not in SCALAR_ANNOTATIONS))
            elif kind in ("default_parameter", "typed_default_parameter"):
                value = field_of(child, "value")
                annotation = node_text(field_of(child, "type"))
                tensorish = (value is None or value.type == "none") and annotation.split("[")[
                    0
                ] not in SCALAR_ANNOTATIONS
                out.append((node_text(field_of(child, "name")), tensorish))
        if out and out[0][0] in ("self", "cls"):
            out = out[1:]
        return out

    @rule("kernel-not-called", "forward never calls the compiled extension or launches a kernel", stage="python")
    def _reach(self) -> None:
        if "ModelNew" not in self.p.classes:
            return
        mro = [info.name for info in self.p.mro("ModelNew")]
        work: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        forward = None
        for name in ENTRY_METHODS:
            definition = self.p.method("ModelNew", name)
            if definition is not None:
                inputs = frozenset(n for n, tensorish in self._parameters(definition) if tensorish)
                work.append((definition, self.p.owner_class(definition), inputs))
                forward = forward or (definition if name == "forward" else None)
            for cls in mro:
                value = self.p.classes[cls].attributes.get(name)
                if value is not None:
                    work.append((value, "ModelNew", frozenset()))
        entry_keys = {f"self.{n}" for n in ENTRY_METHODS} | {f"{c}.{n}" for c in mro for n in ENTRY_METHODS}
        work.extend((value, "ModelNew", frozenset()) for key, value in self.p.assignments if key in entry_keys)
        work.extend((seed, "ModelNew", frozenset()) for seed in self.hook_seeds)
        seen: dict[tuple[int, int, str], frozenset[str]] = {}
        while work and len(seen) < 400:
            node, cls, taint = work.pop()
            key = node_key(node)
            if key in seen and taint <= seen[key]:
                continue
            taint = taint | seen.get(key, frozenset())
            seen[key] = taint
            work.extend(self._scan(node, cls, taint))
        if forward is not None and self.kernel_uses == 0:
            self.add(
                "kernel-not-called",
                forward,
                "forward never calls your compiled extension or launches your "
                "kernel; the output must be computed by the kernel you wrote, called from forward.",
            )

    def _callee(self, target: str, cls: str | None) -> tuple[tree_sitter.Node, str | None] | None:
        if target.startswith("<func>"):
            definition = self.p.functions.get(target[len("<func>") :])
            return (definition, None) if definition is not None else None
        if target.startswith("<method>"):
            owner, _, name = target[len("<method>") :].rpartition(".")
            definition = self.p.method(owner, name)
            if definition is None and name == "apply":
                definition = self.p.method(owner, "forward")  # torch.autograd.Function.apply runs forward
            return (definition, self.p.owner_class(definition)) if definition is not None else None
        if target.startswith("<selfattr>") and cls is not None:
            definition = self.p.method(cls, target[len("<selfattr>") :])
            return (definition, self.p.owner_class(definition)) if definition is not None else None
        if target.startswith("<lambda>"):
            lam = self.p.lambdas.get(target[len("<lambda>") :])
            return (lam, cls) if lam is not None else None
        return None

    @rule("try-except-fallback", "try/except or contextlib.suppress in forward or code it reaches (a silent fallback path)", stage="python")
    def _scan(
        self, root: tree_sitter.Node, cls: str | None, seeds: frozenset[str]
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        """Apply the reach rules to one function, lambda or expression; return the callees it reaches."""
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        taint = self._local_taint(root, seeds) if root.type in ("function_definition", "lambda") else seeds
        self._identity_names = self._identity_keys(root)

        def prune(node: tree_sitter.Node) -> bool:
            return node.type == "function_definition" and self.p._is_jit(node)

        for node, is_ref in self.p._walk_roles(root, prune):
            kind = node.type
            if is_ref:
                out.extend(self._reference_in_reach(node, cls))
            if kind == "call":
                out.extend(self._call_in_reach(node, cls, taint))
            elif kind == "binary_operator":
                op = node_text(field_of(node, "operator"))
                if op in ARITH_OPS and (
                    self._is_tensor(field_of(node, "left"), taint) or self._is_tensor(field_of(node, "right"), taint)
                ):
                    self._operator(node, op)
            elif kind == "comparison_operator":
                ops = [node_text(c) for c in node.children_by_field_name("operators")]
                if any(op in COMPARE_OPS for op in ops) and any(
                    self._is_tensor(c, taint) for c in node.named_children
                ):
                    self._operator(node, next(op for op in ops if op in COMPARE_OPS))
            elif kind == "unary_operator":
                op = node_text(field_of(node, "operator"))
                if op in ("-", "~") and self._is_tensor(field_of(node, "argument"), taint):
                    self._operator(node, op)
            elif kind == "augmented_assignment":
                op = node_text(field_of(node, "operator"))
                if self._is_tensor(field_of(node, "left"), taint) or self._is_tensor(field_of(node, "right"), taint):
                    self._operator(node, op)
            elif kind == "identifier" and is_ref and node_text(node) in self._identity_names:
                self._data_ptr_use(node)
            elif kind == "try_statement":
                self.add(
                    "try-except-fallback",
                    node,
                    "try/except in forward (or code it reaches) hides a fallback "
                    "path; remove it and let errors surface: the kernel must always run.",
                )
            elif kind == "with_item":
                value = field_of(node, "value")
                inner = value.named_children[0] if value is not None and value.type == "as_pattern" else value
                if (
                    inner is not None
                    and inner.type == "call"
                    and "contextlib.suppress" in self.p.resolve(field_of(inner, "function"))
                ):
                    self.add(
                        "try-except-fallback",
                        node,
                        "contextlib.suppress in forward hides a fallback path; remove it and let errors surface.",
                    )
        return out

    def _operator(self, node: tree_sitter.Node, op: str) -> None:
        self.add(
            "torch-compute-in-forward",
            node,
            f"the Python operator `{op}` on tensors in forward runs a PyTorch "
            "op; fuse this arithmetic into your kernel.",
        )

    def _reference_in_reach(
        self, node: tree_sitter.Node, cls: str | None
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        text = node_text(node)
        for target in self.p.resolve(node):
            if not target.startswith("<"):
                if rule_for_name(target) is None and is_compute_name(target):
                    shown = f"`{text}`" if text == target else f"`{text}` (`{target}`)"
                    if target.startswith("numpy."):
                        message = f"{shown} computes with NumPy in forward; compute it in your kernel."
                    else:
                        message = (
                            f"{shown} in forward runs a PyTorch op; compute it in your kernel (forward may "
                            "only allocate outputs, e.g. torch.empty_like, reshape/view and call the kernel)."
                        )
                    self.add("torch-compute-in-forward", node, message)
                elif target.startswith("torch.ops."):
                    self.kernel_uses += 1
                continue
            if target.startswith(("<ext>.", "<jit>")):
                self.kernel_uses += 1
            elif target.startswith(("<class>", "<inst>")):
                owner = target.split(">", 1)[1]
                for name in ("__init__",) + ENTRY_METHODS if target.startswith("<class>") else ENTRY_METHODS:
                    definition = self.p.method(owner, name)
                    if definition is not None:
                        out.append((definition, self.p.owner_class(definition), frozenset()))
            else:
                callee = self._callee(target, cls)
                if callee is not None:
                    out.append((callee[0], callee[1], frozenset()))
        return out

    @rule("torch-compute-in-forward", "forward (or code it reaches) computes with PyTorch/NumPy ops, nn submodules or tensor arithmetic instead of the candidate's own kernel", stage="python")
    def _call_in_reach(
        self, node: tree_sitter.Node, cls: str | None, taint: frozenset[str]
    ) -> list[tuple[tree_sitter.Node, str | None, frozenset[str]]]:
        out: list[tuple[tree_sitter.Node, str | None, frozenset[str]]] = []
        function = field_of(node, "function")
        args = field_of(node, "arguments")
        arg_nodes = args.named_children if args is not None else []
        if function is None:
            return out
        if function.type == "subscript":
            self._subscript_call(node, function)
            return out
        targets = self.p.resolve(function)
        known = bool(targets - {t for t in targets if t.startswith("<selfattr>")})
        for target in targets:
            if (
                target.startswith("<xinst>torch.nn.")
                or target.startswith("<xattr>torch.nn.")
                and target.endswith((".forward", ".__call__", "._call_impl"))
            ):
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"calling the PyTorch module `{node_text(function)}` in "
                    "forward runs PyTorch's kernel; pass its parameters (e.g. self.linear.weight, "
                    "self.linear.bias) to your own kernel instead.",
                )
            elif target in ("builtins.id", "builtins.hash"):
                self.add(
                    "output-cache",
                    node,
                    f"`{node_text(function)}()` in forward suggests caching outputs by object "
                    "identity; compute the output from the inputs on every call.",
                )
            elif target in (
                "builtins.abs",
                "builtins.sum",
                "builtins.max",
                "builtins.min",
                "builtins.pow",
                "builtins.round",
                "builtins.divmod",
            ) or (target.startswith("operator.") and target not in OPERATOR_NON_COMPUTE):
                if not any(self._is_tensor(a, taint) for a in walk_args(arg_nodes)):
                    continue
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"`{node_text(function)}()` on a tensor runs a PyTorch op; compute it in your kernel.",
                )
            elif target == "builtins.getattr":
                positional = [a for a in arg_nodes if a.type != "keyword_argument"]
                name = self.p.const_str(positional[1]) if len(positional) > 1 else None
                receiver = positional[0] if positional else None
                if (
                    receiver is not None
                    and node_text(receiver) not in ("self", "cls")
                    and not any(t == "<ext>" or t.startswith(("<class>", "<inst>")) for t in self.p.resolve(receiver))
                ):
                    if name is None:
                        self.add("dynamic-code", node, rule_message("dynamic-code", node_text(node)))
                    elif method_computes(name):
                        self.add(
                            "torch-compute-in-forward",
                            node,
                            f"`{node_text(node)}` looks up the tensor method "
                            f"`{name}`, which runs a PyTorch op; compute it in your kernel.",
                        )
            callee = self._callee(target, cls)
            if callee is not None:
                out.append((callee[0], callee[1], self._argument_taint(callee[0], arg_nodes, taint)))
        if function.type == "attribute":
            self._method_call(node, function, targets, known, taint)
        elif function.type == "identifier" and not known:
            self._unresolved_call(node, function)
        if function.type == "attribute" and node_text(field_of(function, "attribute")) == "data_ptr":
            self._data_ptr_use(node)
        return out

    @rule("unresolved-call", "forward (or code it reaches) calls something the judge cannot resolve: an element of a "
          "container, or a name bound at run time (an allow-list: only calls that resolve are admitted)", stage="python")
    def _subscript_call(self, node: tree_sitter.Node, function: tree_sitter.Node) -> None:
        """``kernel[grid](...)`` launches a Triton kernel; a call of any other subscript calls whatever it holds."""
        value = field_of(function, "value")
        held = self.p.resolve(value)
        if any(t.startswith(("<jit>", "<ext>")) for t in held):
            self.kernel_uses += 1
            return
        self.add("unresolved-call", node, rule_message("unresolved-call", node_text(function)))

    def _unresolved_call(self, node: tree_sitter.Node, function: tree_sitter.Node) -> None:
        """A call of a plain name that resolves to nothing the judge knows (a parameter, a name bound at run time)."""
        if node_text(function) in _BUILTIN_NAMES:  # raise ValueError(...), len(...), range(...): Python's own
            return
        if node_text(function) in self._nested_functions():  # a helper defined inside a method; its body is in reach
            return
        self.add("unresolved-call", node, rule_message("unresolved-call", node_text(function)))

    def _nested_functions(self) -> frozenset[str]:
        """Names of every function the program defines (nested ones included)."""
        if not hasattr(self, "_defined_names"):
            self._defined_names = frozenset(
                node_text(field_of(node, "name")) for node, _ in self.p.nodes if node.type == "function_definition"
            )
        return self._defined_names

    def _method_call(
        self,
        node: tree_sitter.Node,
        function: tree_sitter.Node,
        targets: frozenset[str],
        known: bool,
        taint: frozenset[str],
    ) -> None:
        method = node_text(field_of(function, "attribute"))
        receiver = field_of(function, "object")
        if receiver is None:
            return
        receiver_targets = {t for t in self.p.resolve(receiver) if not t.startswith("<selfattr>")}
        if node_text(receiver) in ("self", "cls") or receiver.type in LITERALS:
            return
        if receiver_targets and all(
            not t.startswith("<xinst>")
            and (
                not t.startswith("<")
                or t == "<ext>"
                or t.startswith(("<class>", "<inst>", "<func>", "<jit>", "<lambda>", "<ext>", "<method>"))
            )
            for t in receiver_targets
        ):
            if "<ext>" in receiver_targets:
                self.kernel_uses += 1
            return
        if method_computes(method):
            if self._is_tensor(receiver, taint) or method not in self.p.ext_entry_names:
                self.add(
                    "torch-compute-in-forward",
                    node,
                    f"`.{method}()` on a tensor runs a PyTorch op; do this computation inside your kernel.",
                )
            else:
                self.kernel_uses += 1
        elif method not in TENSOR_RETURNING and method not in META_METHODS and not known:
            self.kernel_uses += 1

    def _argument_taint(
        self, callee: tree_sitter.Node, args: list[tree_sitter.Node], taint: frozenset[str]
    ) -> frozenset[str]:
        params = (
            [name for name, _ in self._parameters(callee)]
            if callee.type == "function_definition"
            else [
                node_text(c)
                for c in (field_of(callee, "parameters").named_children if field_of(callee, "parameters") else [])
                if c.type == "identifier"
            ]
        )
        found: set[str] = set()
        positional = 0
        for arg in args:
            if arg.type == "keyword_argument":
                if self._is_tensor(field_of(arg, "value"), taint):
                    found.add(node_text(field_of(arg, "name")))
            elif arg.type == "list_splat":
                continue
            else:
                if positional < len(params) and self._is_tensor(arg, taint):
                    found.add(params[positional])
                positional += 1
        return frozenset(found)

    def _identity_keys(self, root: tree_sitter.Node) -> set[str]:
        """Local names assigned from ``x.data_ptr()`` or ``id(x)`` (candidate cache keys)."""
        names: set[str] = set()
        for node in walk(root):
            if node.type != "assignment":
                continue
            left, right = field_of(node, "left"), field_of(node, "right")
            if left is None or right is None or left.type != "identifier" or right.type != "call":
                continue
            function = field_of(right, "function")
            if function is None:
                continue
            if (function.type == "attribute" and node_text(field_of(function, "attribute")) == "data_ptr") or (
                self.p.resolve(function) & {"builtins.id", "builtins.hash"}
            ):
                names.add(node_text(left))
        return names

    @rule("output-cache", "outputs are cached by data_ptr()/id() across calls", stage="python")
    def _data_ptr_use(self, node: tree_sitter.Node) -> None:
        """Flag ``data_ptr()``/``id()`` values used as keys, compared, or kept on ``self``."""
        parent = node.parent
        child = node
        while parent is not None and parent.type in ("tuple", "expression_list", "parenthesized_expression"):
            child, parent = parent, parent.parent
        if parent is not None and _is_key_position(parent, child):
            self.add(
                "output-cache",
                node,
                "`data_ptr()`/`id()` used as a cache key or stored across calls suggests "
                "caching outputs; compute the output from the inputs on every call.",
            )


def _is_key_position(parent: tree_sitter.Node, child: tree_sitter.Node) -> bool:
    """Whether ``child`` is used as a key: an index, a dict key, compared, a cache-method argument, or stored."""
    if parent.type in ("comparison_operator", "pair"):
        return True
    if parent.type == "subscript":
        return field_of(parent, "subscript") is not None and field_of(parent, "value") != child
    if parent.type == "argument_list" and parent.parent is not None:
        function = field_of(parent.parent, "function")
        return (
            function is not None
            and function.type == "attribute"
            and node_text(field_of(function, "attribute")) in CACHE_METHODS
        )
    if parent.type == "assignment":
        left = field_of(parent, "left")
        return left is not None and node_text(left).startswith(("self.", "cls."))
    return False


def method_computes(method: str) -> bool:
    if method.startswith("__"):
        return method in COMPUTE_METHODS
    return method in COMPUTE_METHODS or method.rstrip("_") in COMPUTE_METHODS


def walk_args(args: Iterable[tree_sitter.Node]) -> Iterator[tree_sitter.Node]:
    """Argument values, with keyword values and list/tuple elements flattened."""
    stack = list(args)
    while stack:
        node = stack.pop()
        if node.type == "keyword_argument":
            value = field_of(node, "value")
            if value is not None:
                stack.append(value)
        elif node.type in ("list", "tuple", "parenthesized_expression"):
            stack.extend(node.named_children)
        else:
            yield node


