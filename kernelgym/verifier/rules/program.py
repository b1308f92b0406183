"""The name resolver: a Python program's imports, aliases, classes and definitions.

Holds:
    ClassInfo: one class of the program.
    PyProgram: the parsed program; resolves expressions to the dotted names they may denote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import tree_sitter

from kernelgym.verifier.rules.names import BUILTINS, JIT_DECORATORS, LOADERS, WRAPPERS
from kernelgym.verifier.rules.syntax import field_of, node_key, node_text, parser_for, string_lines, walk

# --------------------------------------------------------------------------------------------
# Python: the program model (imports, aliases, definitions)
# --------------------------------------------------------------------------------------------


@dataclass
class _ClassInfo:
    name: str
    node: tree_sitter.Node
    bases: list[tree_sitter.Node]
    methods: dict[str, tree_sitter.Node]
    attributes: dict[str, tree_sitter.Node]


_REFERENCE_SKIP_PARENTS = frozenset(
    ("import_statement", "import_from_statement", "global_statement", "nonlocal_statement")
)


class PyProgram:
    """A parsed candidate: imports, definitions, and aliases resolved to dotted names or markers.

    Resolution results are sets of strings: dotted external names (``"torch.matmul"``),
    or markers: ``<ext>`` (a compiled extension module), ``<ext>.f``, ``<func>f``,
    ``<jit>f`` (a Triton kernel), ``<class>C``, ``<inst>C``, ``<method>C.m``,
    ``<selfattr>m``, ``<xinst>torch.nn.Linear`` (an instance of an external class),
    ``<xattr>torch.nn.Linear.forward``, ``<lambda>N``, ``<ref>Model``, ``<dyn>``.
    """

    def __init__(self, code: str) -> None:
        self.source = code.encode("utf-8", "surrogatepass")
        self.root = parser_for("python").parse(self.source).root_node
        self.nodes: list[tuple[tree_sitter.Node, bool]] = list(self._walk_roles(self.root))
        self.imports: dict[str, str] = {}
        self.import_sites: list[tuple[str, tree_sitter.Node]] = []
        self.functions: dict[str, tree_sitter.Node] = {}
        self.classes: dict[str, _ClassInfo] = {}
        self.jit_names: set[str] = set()
        self.lambdas: dict[str, tree_sitter.Node] = {}
        self.assignments: list[tuple[str, tree_sitter.Node]] = []
        self.bound: set[str] = set()
        self.aliases: dict[str, set[str]] = {}
        self.ext_functions: set[str] = set()
        self.ext_entry_names: set[str] = set()
        self.docstrings: set[tuple[int, int, str]] = set()
        self._memo: dict[tuple[int, int, str], frozenset[str]] = {}
        self._depth = 0
        self._returns: dict[int, list[tree_sitter.Node]] = {}
        self._loader_calls: list[tree_sitter.Node] | None = None
        self.calls = [node for node, _ in self.nodes if node.type == "call"]
        self._collect()
        self._resolve_aliases()

    # -- traversal -------------------------------------------------------------------------

    @staticmethod
    def _walk_roles(
        root: tree_sitter.Node, prune: Callable[[tree_sitter.Node], bool] | None = None
    ) -> Iterator[tuple[tree_sitter.Node, bool]]:
        """Yield ``(node, is_reference)``; ``is_reference`` marks identifiers/attribute chains used as values.

        Attribute chains are references only at their outermost node; names being
        defined (def/class names, parameters, keyword names, attribute names) are not.
        Subtrees for which ``prune`` is true are skipped (their root is not yielded).
        """
        stack: list[tuple[tree_sitter.Node, bool]] = [(root, False)]
        while stack:
            node, inner = stack.pop()
            kind = node.type
            if kind in _REFERENCE_SKIP_PARENTS:
                yield node, False
                continue
            if prune is not None and node.id != root.id and prune(node):
                continue
            is_ref = not inner and kind in ("identifier", "attribute")
            yield node, is_ref
            children = node.children
            skip: set[int] = set()
            if kind == "attribute":
                obj = field_of(node, "object")
                attr = field_of(node, "attribute")
                if obj is not None and obj.type in ("identifier", "attribute"):
                    skip.add(obj.id)
                if attr is not None:
                    skip.add(attr.id)
            elif kind in ("function_definition", "class_definition", "keyword_argument"):
                name = field_of(node, "name")
                if name is not None:
                    skip.add(name.id)
            elif kind in ("parameters", "lambda_parameters"):
                for child in children:
                    if child.type == "identifier":
                        skip.add(child.id)
            elif kind in (
                "typed_parameter",
                "default_parameter",
                "typed_default_parameter",
                "list_splat_pattern",
                "dictionary_splat_pattern",
            ):
                name = field_of(node, "name")
                if name is not None:
                    skip.add(name.id)
                for child in children:
                    if child.type == "identifier" and kind in (
                        "typed_parameter",
                        "list_splat_pattern",
                        "dictionary_splat_pattern",
                    ):
                        skip.add(child.id)
            for child in reversed(children):
                stack.append((child, child.id in skip))

    # -- collection ------------------------------------------------------------------------

    def _collect(self) -> None:
        for node, _ in self.nodes:
            kind = node.type
            if kind == "import_statement":
                self._collect_import(node)
            elif kind == "import_from_statement":
                self._collect_from_import(node)
            elif kind == "class_definition":
                self._collect_class(node)
            elif kind in ("assignment", "augmented_assignment"):
                self._collect_assignment(field_of(node, "left"), field_of(node, "right"))
            elif kind == "named_expression":
                self._collect_assignment(field_of(node, "name"), field_of(node, "value"))
            elif kind == "function_definition":
                name = field_of(node, "name")
                if name is not None:
                    self.bound.add(node_text(name))
            elif kind == "lambda" and node.is_named:
                self.lambdas[str(node.start_byte)] = node
            elif kind in ("parameters", "lambda_parameters"):
                self.bound.update(node_text(c) for c in walk(node) if c.type == "identifier")
            elif kind in ("for_statement", "for_in_clause"):
                left = field_of(node, "left")
                if left is not None:
                    self.bound.update(node_text(c) for c in walk(left) if c.type == "identifier")
        for top in self._top_level_definitions(self.root):
            if top.type == "function_definition":
                name = node_text(field_of(top, "name"))
                self.functions[name] = top
                if self._is_jit(top):
                    self.jit_names.add(name)
        self._collect_docstrings()

    def _collect_docstrings(self) -> None:
        owners = [self.root] + [
            field_of(n, "body") for n, _ in self.nodes if n.type in ("function_definition", "class_definition")
        ]
        for owner in owners:
            if owner is None or not owner.named_children:
                continue
            first = owner.named_children[0]
            if first.type == "expression_statement" and first.named_child_count == 1:
                value = first.named_children[0]
                if value.type in ("string", "concatenated_string"):
                    self.docstrings.add(node_key(value))

    @staticmethod
    def _top_level_definitions(block: tree_sitter.Node) -> Iterator[tree_sitter.Node]:
        """Function/class definitions directly in ``block`` (also under decorators and module-level if/try)."""
        stack = list(reversed(block.named_children))
        while stack:
            node = stack.pop()
            if node.type == "decorated_definition":
                definition = field_of(node, "definition")
                if definition is not None:
                    yield definition
            elif node.type in ("function_definition", "class_definition"):
                yield node
            elif node.type in (
                "if_statement",
                "try_statement",
                "else_clause",
                "elif_clause",
                "except_clause",
                "finally_clause",
                "block",
                "with_statement",
            ):
                stack.extend(reversed(node.named_children))

    def _decorators(self, definition: tree_sitter.Node) -> list[tree_sitter.Node]:
        parent = definition.parent
        if parent is None or parent.type != "decorated_definition":
            return []
        return [c.named_children[0] for c in parent.children if c.type == "decorator" and c.named_children]

    def _is_jit(self, definition: tree_sitter.Node) -> bool:
        for decorator in self._decorators(definition):
            target = field_of(decorator, "function") if decorator.type == "call" else decorator
            if target is not None and self._dotted(target) in JIT_DECORATORS:
                return True
        return False

    def _dotted(self, node: tree_sitter.Node) -> str:
        """Resolve a plain name/attribute chain through imports only (no aliases)."""
        if node.type == "identifier":
            name = node_text(node)
            return self.imports.get(name, name)
        if node.type == "attribute":
            obj = field_of(node, "object")
            attr = field_of(node, "attribute")
            if obj is not None and attr is not None:
                return self._dotted(obj) + "." + node_text(attr)
        return ""

    def _collect_import(self, node: tree_sitter.Node) -> None:
        for child in node.named_children:
            if child.type == "dotted_name":
                module = node_text(child)
                root = module.split(".")[0]
                self.imports[root] = root
                self.bound.add(root)
                self.import_sites.append((module, node))
            elif child.type == "aliased_import":
                module = node_text(field_of(child, "name"))
                alias = node_text(field_of(child, "alias"))
                self.imports[alias] = module
                self.bound.add(alias)
                self.import_sites.append((module, node))

    def _collect_from_import(self, node: tree_sitter.Node) -> None:
        module_node = field_of(node, "module_name")
        module = node_text(module_node) if module_node is not None else ""
        if module_node is not None and module_node.type == "relative_import":
            self.import_sites.append(("." + module.lstrip("."), node))
            return
        if any(c.type == "wildcard_import" for c in node.children):
            self.import_sites.append((module + ".*", node))
            return
        for child in node.children_by_field_name("name"):
            if child.type == "aliased_import":
                name = node_text(field_of(child, "name"))
                alias = node_text(field_of(child, "alias"))
            else:
                name = alias = node_text(child)
            self.imports[alias] = f"{module}.{name}"
            self.bound.add(alias)
            self.import_sites.append((f"{module}.{name}", node))

    def _collect_class(self, node: tree_sitter.Node) -> None:
        name = node_text(field_of(node, "name"))
        supers = field_of(node, "superclasses")
        bases = [c for c in supers.named_children if c.type != "keyword_argument"] if supers is not None else []
        info = _ClassInfo(name, node, bases, {}, {})
        body = field_of(node, "body")
        if body is not None:
            for definition in self._top_level_definitions(body):
                if definition.type == "function_definition":
                    info.methods[node_text(field_of(definition, "name"))] = definition
            for statement in body.named_children:
                if statement.type == "expression_statement" and statement.named_children:
                    inner = statement.named_children[0]
                    if inner.type == "assignment":
                        left, right = field_of(inner, "left"), field_of(inner, "right")
                        if left is not None and right is not None and left.type == "identifier":
                            info.attributes[node_text(left)] = right
        self.classes[name] = info
        self.bound.add(name)

    def _collect_assignment(self, left: tree_sitter.Node | None, right: tree_sitter.Node | None) -> None:
        if left is None or right is None:
            return
        if left.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple"):
            targets = left.named_children
            values = right.named_children if right.type in ("expression_list", "tuple", "list") else []
            for index, target in enumerate(targets):
                if len(values) == len(targets):
                    self._collect_assignment(target, values[index])
                elif target.type == "identifier":
                    self.bound.add(node_text(target))
            return
        key = self._target_key(left)
        if key is not None:
            self.assignments.append((key, right))
            if left.type == "identifier":
                self.bound.add(key)

    def _target_key(self, node: tree_sitter.Node) -> str | None:
        if node.type == "identifier":
            return node_text(node)
        if node.type == "attribute":
            obj = field_of(node, "object")
            attr = field_of(node, "attribute")
            if obj is not None and attr is not None and obj.type == "identifier":
                owner = node_text(obj)
                if owner in ("self", "cls"):
                    return "self." + node_text(attr)
                return owner + "." + node_text(attr)
        return None

    # -- resolution ------------------------------------------------------------------------

    def _resolve_aliases(self) -> None:
        for _ in range(8):
            changed = False
            self._memo.clear()
            for key, value in self.assignments:
                found = self.resolve(value)
                current = self.aliases.setdefault(key, set())
                if not found <= current:
                    current |= found
                    changed = True
            for name, definition in list(self.functions.items()):
                if name not in self.ext_functions and self._returns_extension(definition):
                    self.ext_functions.add(name)
                    changed = True
            if not changed:
                break
        self._memo.clear()

    def _returns_extension(self, definition: tree_sitter.Node) -> bool:
        returns = self._returns.get(definition.id)
        if returns is None:
            returns = [
                n.named_children[0] for n in walk(definition) if n.type == "return_statement" and n.named_children
            ]
            self._returns[definition.id] = returns
        return any("<ext>" in self.resolve(value) for value in returns)

    def const_str(self, node: tree_sitter.Node | None, depth: int = 0) -> str | None:
        """The value of a constant string expression (literals, ``+``, ``join``, ``[::-1]``, names bound once)."""
        if node is None or depth > 10:
            return None
        kind = node.type
        if kind == "string":
            if any(c.type == "interpolation" for c in node.children):
                return None
            return "\n".join(text for text, _ in string_lines(node, self.source))
        if kind == "concatenated_string":
            parts = [self.const_str(c, depth + 1) for c in node.named_children]
            return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
        if kind == "parenthesized_expression" and node.named_children:
            return self.const_str(node.named_children[0], depth + 1)
        if kind == "binary_operator" and node_text(field_of(node, "operator")) == "+":
            left = self.const_str(field_of(node, "left"), depth + 1)
            right = self.const_str(field_of(node, "right"), depth + 1)
            return None if left is None or right is None else left + right
        if kind == "identifier":
            values = [v for k, v in self.assignments if k == node_text(node)]
            if len(values) == 1:
                return self.const_str(values[0], depth + 1)
            return None
        if kind == "subscript":
            index = field_of(node, "subscript")
            if index is not None and node_text(index).replace(" ", "") == "::-1":
                inner = self.const_str(field_of(node, "value"), depth + 1)
                return None if inner is None else inner[::-1]
            return None
        if kind == "call":
            function = field_of(node, "function")
            args = field_of(node, "arguments")
            if function is not None and function.type == "attribute" and args is not None:
                method = node_text(field_of(function, "attribute"))
                receiver = self.const_str(field_of(function, "object"), depth + 1)
                if method == "join" and receiver is not None and args.named_children:
                    items = args.named_children[0]
                    if items.type in ("list", "tuple"):
                        parts = [self.const_str(c, depth + 1) for c in items.named_children]
                        if all(p is not None for p in parts):
                            return receiver.join(p for p in parts if p is not None)
                if method in ("lower", "upper", "strip") and receiver is not None and not args.named_children:
                    return getattr(receiver, method)()
        return None

    def resolve(self, node: tree_sitter.Node | None) -> frozenset[str]:
        """What a Python expression may refer to (see the class docstring for the markers)."""
        if node is None:
            return frozenset()
        key = node_key(node)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if self._depth > 120:
            return frozenset()
        self._memo[key] = frozenset()
        self._depth += 1
        try:
            result = frozenset(self._resolve(node))
        finally:
            self._depth -= 1
        self._memo[key] = result
        return result

    def _resolve(self, node: tree_sitter.Node) -> set[str]:
        kind = node.type
        out: set[str] = set()
        if kind == "identifier":
            name = node_text(node)
            out |= self.aliases.get(name, set())
            if name in self.imports:
                out.add(self.imports[name])
            if name in self.functions:
                out.add(("<jit>" if name in self.jit_names else "<func>") + name)
            if name in self.classes:
                out.add("<class>" + name)
            if name == "Model":
                out.add("<ref>Model")
            if not out and name in BUILTINS and name not in self.bound:
                out.add("builtins." + name)
            if name == "__builtins__":
                out.add("builtins")
            return out
        if kind == "attribute":
            obj = field_of(node, "object")
            attr = node_text(field_of(node, "attribute"))
            if obj is None or not attr:
                return out
            if obj.type == "identifier" and node_text(obj) in ("self", "cls"):
                out |= self.aliases.get("self." + attr, set())
                out.add("<selfattr>" + attr)
                return out
            if obj.type == "identifier" and node_text(obj) + "." + attr in self.aliases:
                out |= self.aliases[node_text(obj) + "." + attr]
            return out | self._member(self.resolve(obj), attr)
        if kind == "call":
            return self._resolve_call(node)
        if kind in ("parenthesized_expression", "await") and node.named_children:
            return set(self.resolve(node.named_children[0]))
        if kind == "conditional_expression":
            for child in node.named_children[:1] + node.named_children[2:3]:
                out |= self.resolve(child)
            return out
        if kind == "boolean_operator":
            return set(self.resolve(field_of(node, "left"))) | set(self.resolve(field_of(node, "right")))
        if kind == "lambda":
            return {"<lambda>" + str(node.start_byte)}
        return out

    def _member(self, bases: Iterable[str], attr: str) -> set[str]:
        out: set[str] = set()
        for base in bases:
            if base == "<ext>":
                out.add("<ext>." + attr)
            elif base.startswith(("<class>", "<inst>")):
                out.add("<method>" + base.split(">", 1)[1] + "." + attr)
            elif base.startswith("<xinst>"):
                out.add("<xattr>" + base[len("<xinst>") :] + "." + attr)
            elif not base.startswith("<"):
                dotted = base + "." + attr
                out.add(dotted)
        return out

    def _resolve_call(self, node: tree_sitter.Node) -> set[str]:
        out: set[str] = set()
        function = field_of(node, "function")
        args = field_of(node, "arguments")
        positional = [c for c in args.named_children if c.type not in ("keyword_argument", "comment")] if args else []
        for target in self.resolve(function):
            if target in LOADERS:
                out.add("<ext>")
            elif target in ("builtins.getattr", "operator.attrgetter"):
                if len(positional) >= 2:
                    name = self.const_str(positional[1])
                    if name is None:
                        out.add("<dyn>")
                    else:
                        out |= self._member(self.resolve(positional[0]), name)
            elif target in ("builtins.__import__", "importlib.import_module"):
                name = self.const_str(positional[0]) if positional else None
                out.add(name if name else "<dyn>")
            elif target.startswith("<func>") and target[len("<func>") :] in self.ext_functions:
                out.add("<ext>")
            elif target.startswith("<class>"):
                out.add("<inst>" + target[len("<class>") :])
            elif target in JIT_DECORATORS:
                out.add("<jit>")
            elif target in WRAPPERS and positional:
                out |= self.resolve(positional[0])
            elif not target.startswith("<") and target.rsplit(".", 1)[-1][:1].isupper():
                out.add("<xinst>" + target)
        return out

    # -- queries ---------------------------------------------------------------------------

    def mro(self, name: str) -> list[_ClassInfo]:
        """In-file classes in the method resolution order of class ``name`` (depth-first, no repeats)."""
        order: list[_ClassInfo] = []
        stack = [name]
        while stack:
            current = stack.pop(0)
            info = self.classes.get(current)
            if info is None or info in order or len(order) > 50:
                continue
            order.append(info)
            for base in info.bases:
                stack.extend(t[len("<class>") :] for t in self.resolve(base) if t.startswith("<class>"))
        return order

    def method(self, class_name: str, name: str) -> tree_sitter.Node | None:
        for info in self.mro(class_name):
            if name in info.methods:
                return info.methods[name]
        return None

    def owner_class(self, definition: tree_sitter.Node) -> str | None:
        for info in self.classes.values():
            if definition in info.methods.values():
                return info.name
        return None

    def loader_calls(self) -> list[tree_sitter.Node]:
        """Calls of ``load_inline``/``load`` (however they are named)."""
        if self._loader_calls is None:
            self._loader_calls = [node for node in self.calls if self.resolve(field_of(node, "function")) & LOADERS]
        return self._loader_calls


