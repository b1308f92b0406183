"""The C++/CUDA rules over one native source.

Holds:
    CppRules: LibTorch compute, processes, files, streams, timers, Python calls, vendor libraries, L2 persistence.
"""

from __future__ import annotations

import re

import tree_sitter

from kernelgym.verifier.rules.catalogue import Findings, rule
from kernelgym.verifier.rules.cpp_names import (
    CPP_ALLOWED_NAMESPACES,
    CPP_CALL_ONLY,
    CPP_INCLUDE_RULES,
    CPP_LIBRARY,
    CPP_MESSAGES,
    CPP_NAME_RULES,
    CPP_SCALAR_METHODS,
    CPP_TORCH_ALLOWED,
    CUDA_BLANK,
    GOOD_STREAM,
    INTERPOSABLE,
    LAUNCH,
    blank_out,
)
from kernelgym.verifier.rules.forward import method_computes
from kernelgym.verifier.rules.names import ARITH_OPS, COMPARE_OPS, TENSOR_RETURNING
from kernelgym.verifier.rules.sources import CUDA_HINT, NativeSource
from kernelgym.verifier.rules.syntax import field_of, node_text, parser_for


class CppRules:
    """Runs the C++/CUDA rules over one native source."""

    def __init__(
        self, source: NativeSource, findings: Findings, half_ok: bool, depth: int = 0, row_offset: int = 0
    ) -> None:
        self.source = source
        self.findings = findings
        self.half_ok = half_ok
        self.depth = depth
        self.row_offset = row_offset
        self.tensor_names: dict[int, set[str]] = {}
        self.other_names: dict[int, set[str]] = {}
        self.scope: dict[int, int] = {}
        self.using_namespaces: set[str] = set()
        self.namespace_alias: dict[str, str] = {}
        self.using_names: dict[str, str] = {}
        self.defined_functions: set[str] = set()

    def add(self, rule: str, row: int, name: str) -> None:
        if rule == "precision-downgrade" and self.half_ok:
            return
        line = self.source.code_line(row + self.row_offset)
        self.findings.add(rule, line, CPP_MESSAGES[rule].format(name=f"`{name}`"), "cpp")

    @rule("native-stream", "the C++/CUDA source creates or launches on a non-default stream", stage="native")
    def run(self) -> None:
        text = self.source.text
        if len(text) > 2_000_000:
            return
        if self.source.language == "cuda" or CUDA_HINT.search(text):
            for match in LAUNCH.finditer(text):
                parts = _split_top_level(match.group(1))
                if len(parts) >= 4 and not self._default_stream(parts[3].strip(), text):
                    self.add("native-stream", text.count("\n", 0, match.start()), f"<<<..., {parts[3].strip()}>>>")
            text = blank_out(blank_out(text, LAUNCH), CUDA_BLANK)
        root = parser_for("cpp").parse(text.encode("utf-8", "replace")).root_node
        nodes = self._scoped_nodes(root)
        self._declarations(nodes)
        for node in nodes:
            self._check(node)

    def _scoped_nodes(self, root: tree_sitter.Node) -> list[tree_sitter.Node]:
        """All nodes; records for each the function definition it is in (``-1``: file scope)."""
        nodes: list[tree_sitter.Node] = []
        stack: list[tuple[tree_sitter.Node, int]] = [(root, -1)]
        while stack:
            node, scope = stack.pop()
            if node.type == "function_definition":
                scope = node.start_byte
            nodes.append(node)
            self.scope[node.id] = scope
            stack.extend((child, scope) for child in reversed(node.children))
        return nodes

    def _declared(self, name: str, node: tree_sitter.Node) -> str | None:
        """``"tensor"``, ``"other"`` or ``None`` (undeclared) for ``name`` as seen from ``node``."""
        for scope in (self.scope.get(node.id, -1), -1):
            if name in self.tensor_names.get(scope, ()):
                return "tensor"
            if name in self.other_names.get(scope, ()):
                return "other"
        return None

    @staticmethod
    def _default_stream(arg: str, text: str) -> bool:
        compact = re.sub(r"\s+", "", arg)
        if GOOD_STREAM.match(compact):
            return True
        if re.fullmatch(r"\w+", compact):
            decl = re.search(rf"\b{re.escape(compact)}\s*=\s*([^;]*);", text)
            return (
                decl is not None
                and re.search(r"getCurrent(CUDA|MUSA)Stream|getDefault(CUDA|MUSA)Stream", decl.group(1)) is not None
            )
        return False

    # -- declarations (which names hold tensors) ----------------------------------------------

    def _declarations(self, nodes: list[tree_sitter.Node]) -> None:
        decls: list[tuple[str, tree_sitter.Node | None, str, int]] = []
        for node in nodes:
            kind = node.type
            scope = self.scope.get(node.id, -1)
            if kind in ("declaration", "parameter_declaration", "optional_parameter_declaration", "field_declaration"):
                type_text = node_text(field_of(node, "type"))
                for declarator in node.children_by_field_name("declarator"):
                    name, value = _declarator_name(declarator)
                    if name:
                        decls.append((name, value, type_text, scope))
            elif kind == "for_range_loop":
                name, _ = _declarator_name(field_of(node, "declarator"))
                if name:
                    decls.append((name, field_of(node, "right"), "auto-element", scope))
            elif kind == "function_declarator":
                inner = field_of(node, "declarator")
                if inner is not None:
                    self.defined_functions.add(node_text(inner).split("::")[-1])
            elif kind == "using_declaration":
                self._using(node)
            elif kind == "namespace_alias_definition":
                name = field_of(node, "name")
                target = [c for c in node.named_children if c.id != (name.id if name else -1)]
                if name is not None and target:
                    self.namespace_alias[node_text(name)] = re.sub(r"\s+", "", node_text(target[-1])).lstrip(":")
        for _ in range(3):
            for name, value, type_text, scope in decls:
                tensors = self.tensor_names.setdefault(scope, set())
                others = self.other_names.setdefault(scope, set())
                if re.search(r"\bTensor\b", type_text):
                    tensors.add(name)
                elif type_text in ("auto", "auto-element", "decltype(auto)") or type_text.startswith("const auto"):
                    if value is not None and self._is_tensor(value):
                        tensors.add(name)
                    elif value is not None:
                        others.add(name)
                else:
                    others.add(name)
        for scope, others in self.other_names.items():
            others -= self.tensor_names.get(scope, set())

    def _using(self, node: tree_sitter.Node) -> None:
        text = re.sub(r"\s+", " ", node_text(node)).strip().rstrip(";")
        if text.startswith("using namespace "):
            self.using_namespaces.add(self._qualify(text[len("using namespace ") :].replace(" ", "")).split("::")[0])
        elif text.startswith("using "):
            target = self._qualify(text[len("using ") :].replace(" ", ""))
            if "::" in target:
                self.using_names[target.rsplit("::", 1)[-1]] = target

    def _qualify(self, name: str) -> str:
        """Normalize a qualified name: no spaces/templates/leading ``::``, namespace aliases expanded."""
        name = re.sub(r"\s+", "", name)
        for _ in range(5):
            stripped = re.sub(r"<[^<>]*>", "", name)
            if stripped == name:
                break
            name = stripped
        name = name.lstrip(":")
        head, sep, rest = name.partition("::")
        if head in self.namespace_alias:
            name = self.namespace_alias[head] + (sep + rest if sep else "")
        return name

    def _is_tensor(self, node: tree_sitter.Node | None, depth: int = 0) -> bool:
        if node is None or depth > 25:
            return False
        kind = node.type
        if kind == "identifier":
            return self._declared(node_text(node), node) == "tensor"
        if kind in ("parenthesized_expression", "unary_expression", "pointer_expression") and node.named_children:
            return self._is_tensor(node.named_children[-1], depth + 1)
        if kind == "subscript_expression":
            return self._is_tensor(field_of(node, "argument"), depth + 1)
        if kind == "conditional_expression":
            return self._is_tensor(field_of(node, "consequence"), depth + 1) or self._is_tensor(
                field_of(node, "alternative"), depth + 1
            )
        if kind == "binary_expression":
            return self._is_tensor(field_of(node, "left"), depth + 1) or self._is_tensor(field_of(node, "right"), depth + 1)
        if kind == "call_expression":
            function = field_of(node, "function")
            if function is None:
                return False
            if function.type in ("qualified_identifier", "template_function"):
                name = self._qualify(node_text(function))
                if name.split("::")[0] in ("torch", "at"):
                    last = name.rsplit("::", 1)[-1]
                    return (
                        last
                        in (
                            "empty",
                            "empty_like",
                            "empty_strided",
                            "zeros",
                            "zeros_like",
                            "ones",
                            "ones_like",
                            "full",
                            "full_like",
                            "from_blob",
                        )
                        or last not in CPP_TORCH_ALLOWED
                    )
            if function.type == "field_expression":
                method = _method_name(function)
                if method in TENSOR_RETURNING or method_computes(method):
                    return self._is_tensor(field_of(function, "argument"), depth + 1)
        return False

    # -- rules -----------------------------------------------------------------------------

    @rule("native-file", "the C++/CUDA source opens files, maps memory or reads /dev/shm", stage="native")
    @rule("native-timer-patch", "the C++/CUDA source interposes or reads timers (dlsym, LD_PRELOAD, cudaEventElapsedTime)", stage="native")
    def _check(self, node: tree_sitter.Node) -> None:
        kind = node.type
        row = node.start_point.row
        if (
            kind in ("identifier", "type_identifier", "field_identifier", "namespace_identifier", "primitive_type")
            and node.child_count == 0
        ):
            self._name(node, node_text(node))
        elif kind == "qualified_identifier" and (node.parent is None or node.parent.type != "qualified_identifier"):
            self._qualified(node)
        elif kind == "call_expression":
            self._call(node)
        elif (
            kind in ("string_literal", "raw_string_literal", "system_lib_string")
            and node.parent is not None
            and node.parent.type != "preproc_include"
        ):
            value = node_text(node)
            for marker, rule in (
                ("/dev/shm", "native-file"),
                ("/proc/", "native-file"),
                ("LD_PRELOAD", "native-timer-patch"),
            ):
                if marker in value:
                    self.add(rule, row, marker)
        elif kind == "preproc_include":
            path = node_text(field_of(node, "path")).strip('<>"')
            for pattern, rule in CPP_INCLUDE_RULES:
                if pattern.search(path):
                    self.add(rule, row, f"#include <{path}>")
                    break
        elif kind in ("preproc_def", "preproc_function_def"):
            self._macro(node)
        elif kind == "function_definition":
            self._function_definition(node)
        elif kind == "binary_expression":
            op = node_text(field_of(node, "operator"))
            if op in ARITH_OPS | COMPARE_OPS and (
                self._is_tensor(field_of(node, "left")) or self._is_tensor(field_of(node, "right"))
            ):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind == "assignment_expression":
            op = node_text(field_of(node, "operator"))
            if op != "=" and self._is_tensor(field_of(node, "left")):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind == "unary_expression":
            op = node_text(field_of(node, "operator"))
            if op in ("-", "~", "!") and self._is_tensor(field_of(node, "argument")):
                self.add("native-torch-compute", row, f"Tensor operator {op}")
        elif kind in ("attribute_specifier", "attribute_declaration") and "constructor" in node_text(node):
            self.add("native-timer-patch", row, "__attribute__((constructor))")

    @rule("native-library", "the C++/CUDA source calls a vendor library (cuBLAS, cuDNN, BLAS, MKL, oneDNN)", stage="native")
    @rule("native-process", "the C++/CUDA source starts processes or threads (fork, system, std::thread, ...)", stage="native")
    @rule("native-python-call", "the C++/CUDA source calls back into Python", stage="native")
    @rule("l2-persist", "the C++/CUDA source sets an L2 persisting-access window", stage="native")
    def _name(self, node: tree_sitter.Node, name: str) -> None:
        rule = CPP_NAME_RULES.get(name)
        if rule is not None and name in CPP_CALL_ONLY:
            rule = rule if _is_called(node) else None
        bare = node.parent is None or node.parent.type != "qualified_identifier"
        if rule is None and bare and "std" in self.using_namespaces and (node.type == "type_identifier" or _is_called(node)):
            # ``using namespace std; thread t(work);``: a type or a call spelled without ``std::``
            rule = CPP_NAME_RULES.get(f"std::{name}")
        if (
            rule is None
            and name in ("half", "half2", "bfloat16", "nv_bfloat16")
            and node.type == "type_identifier"
            and not any(name in names for names in (*self.other_names.values(), *self.tensor_names.values()))
        ):
            rule = "precision-downgrade"
        if rule is None and name == "tf32" and node.parent is not None and "precision" in node_text(node.parent):
            rule = "precision-downgrade"
        if rule is None and CPP_LIBRARY.match(name):
            rule = "native-library"
        if rule is not None:
            self.add(rule, node.start_point.row, name)

    def _qualified(self, node: tree_sitter.Node) -> None:
        name = self._qualify(node_text(node))
        row = node.start_point.row
        rule = CPP_NAME_RULES.get(name)
        if rule is None and name.startswith("std::filesystem"):
            rule = "native-file"
        if rule is not None:
            self.add(rule, row, name)
            return
        root = name.split("::")[0]
        last = name.rsplit("::", 1)[-1]
        if root not in ("torch", "at") or name.startswith(CPP_ALLOWED_NAMESPACES):
            return
        final = node
        while final.type == "qualified_identifier" and field_of(final, "name") is not None:
            final = field_of(final, "name")
        if "::nn::" in name or "::jit::" in name or "::native::" in name or "::autograd::" in name:
            if last not in CPP_TORCH_ALLOWED:
                self.add("native-torch-compute", row, name)
            return
        if final.type in ("type_identifier", "template_type"):
            return
        if last in CPP_NAME_RULES:
            self.add(CPP_NAME_RULES[last], row, name)
        elif last in CPP_TORCH_ALLOWED or re.fullmatch(r"k[A-Z]\w*", last):
            return
        else:
            self.add("native-torch-compute", row, name)

    @rule("native-torch-compute", "the C++/CUDA source calls ATen/LibTorch compute ops or tensor arithmetic", stage="native")
    def _call(self, node: tree_sitter.Node) -> None:
        function = field_of(node, "function")
        if function is None:
            return
        row = node.start_point.row
        if function.type == "identifier":
            name = node_text(function)
            target = self.using_names.get(name)
            if target is not None and target.split("::")[0] in ("torch", "at"):
                if name not in CPP_TORCH_ALLOWED:
                    self.add("native-torch-compute", row, target)
            elif (
                self.using_namespaces & {"torch", "at"}
                and method_computes(name)
                and name not in self.defined_functions
                and any(self._is_tensor(a) for a in _cpp_arguments(node))
            ):
                self.add("native-torch-compute", row, f"{name} (via using namespace)")
        elif function.type == "field_expression":
            method = _method_name(function)
            receiver = field_of(function, "argument")
            if (method_computes(method) or method == "forward") and receiver is not None:
                receiver_name = node_text(receiver) if receiver.type == "identifier" else None
                declared = self._declared(receiver_name, receiver) if receiver_name is not None else "other"
                called = receiver.type == "call_expression" and not self._non_tensor_call(receiver)
                if self._is_tensor(receiver) or declared != "other" or called:
                    self.add("native-torch-compute", row, f".{method}()")

    def _non_tensor_call(self, node: tree_sitter.Node) -> bool:
        function = field_of(node, "function")
        if function is None:
            return True
        if function.type == "field_expression":
            return _method_name(function) in CPP_SCALAR_METHODS or not self._is_tensor(node)
        return not self._is_tensor(node)

    def _macro(self, node: tree_sitter.Node) -> None:
        value = field_of(node, "value")
        body = node_text(value)
        row = node.start_point.row
        if "##" in body and re.search(r"\b(torch|at)\s*::", body):
            self.add("native-torch-compute", row, "token pasting with torch::/at:: names")
        if self.depth == 0 and body.strip() and value is not None:
            nested = NativeSource(
                self.source.language,
                "void __kg_macro() { " + body.replace("\\\n", "  \n") + "; }",
                self.source.line,
                self.source.lines,
            )
            rules = CppRules(
                nested, self.findings, self.half_ok, self.depth + 1, value.start_point.row + self.row_offset
            )
            rules.tensor_names = {-1: set().union(*self.tensor_names.values())}
            rules.run()

    def _function_definition(self, node: tree_sitter.Node) -> None:
        declarator = field_of(node, "declarator")
        while (
            declarator is not None
            and declarator.type not in ("function_declarator",)
            and field_of(declarator, "declarator") is not None
        ):
            declarator = field_of(declarator, "declarator")
        if declarator is None:
            return
        name_node = field_of(declarator, "declarator")
        name = self._qualify(node_text(name_node)) if name_node is not None else ""
        row = node.start_point.row
        if name in ("TORCH_LIBRARY_IMPL", "TORCH_LIBRARY_FRAGMENT", "TORCH_LIBRARY"):
            params = field_of(declarator, "parameters")
            first = params.named_children[0] if params is not None and params.named_children else None
            if first is not None and node_text(first).strip() in ("aten", "prims", "_", "c10d"):
                self.add("monkey-patching", row, f"{name}({node_text(first).strip()}, ...)")
        elif INTERPOSABLE.match(name.rsplit("::", 1)[-1]):
            self.add("native-timer-patch", row, f"a definition of {name}()")


def _cpp_arguments(call: tree_sitter.Node) -> list[tree_sitter.Node]:
    arguments = field_of(call, "arguments")
    return list(arguments.named_children) if arguments is not None else []


def _split_top_level(text: str) -> list[str]:
    """Split a launch configuration on commas outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _declarator_name(node: tree_sitter.Node | None) -> tuple[str, tree_sitter.Node | None]:
    """Declared name and initial value of a C++ declarator (``""`` when none)."""
    value = None
    for _ in range(10):
        if node is None:
            return "", value
        if node.type == "init_declarator":
            value = field_of(node, "value")
            if value is not None and value.type in ("argument_list", "initializer_list") and value.named_children:
                value = value.named_children[0] if len(value.named_children) == 1 else None
        if node.type in ("identifier", "field_identifier"):
            return node_text(node), value
        inner = field_of(node, "declarator")
        if inner is None:
            named = [c for c in node.named_children if c.type in ("identifier", "field_identifier")]
            return (node_text(named[0]), value) if named else ("", value)
        node = inner
    return "", value


def _method_name(field_expression: tree_sitter.Node) -> str:
    field = field_of(field_expression, "field")
    if field is None:
        return ""
    if field.type == "template_method":
        inner = field_of(field, "name")
        return node_text(inner) if inner is not None else node_text(field).split("<")[0]
    return node_text(field)


def _is_called(node: tree_sitter.Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in ("qualified_identifier", "template_function"):
        node, parent = parent, parent.parent
    return parent is not None and parent.type == "call_expression" and field_of(parent, "function") == node


