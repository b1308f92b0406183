"""The Python rules over the whole program (module-level code runs too).

Holds:
    PythonRules: imports, references, calls, assignments, strings, classes and kernel presence, plus the forward rules.
"""

from __future__ import annotations

import tree_sitter

from kernelgym.verifier.rules.catalogue import Findings, rule, rule_message
from kernelgym.verifier.rules.forward import ForwardRules, walk_args
from kernelgym.verifier.rules.names import (
    ALLOWED_IMPORTS,
    BUILD_ENV,
    ENV_WRITERS,
    HOOK_METHODS,
    INTROSPECTION_ATTRS,
    LIBRARY_FLAGS,
    LOADERS,
    PATH_LITERAL,
    rule_for_name,
)
from kernelgym.verifier.rules.program import PyProgram
from kernelgym.verifier.rules.sources import CPP_HINT
from kernelgym.verifier.rules.syntax import field_of, line_of, node_key, node_text


class PythonRules(ForwardRules):
    """Runs every Python rule of a parsed program into a :class:`Findings`."""

    def __init__(
        self,
        program: PyProgram,
        backend: str,
        half_ok: bool,
        native_keys: set[tuple[int, int, str]],
        findings: Findings,
    ) -> None:
        self.p = program
        self.backend = backend
        self.half_ok = half_ok
        self.native_keys = native_keys
        self.findings = findings
        self.hook_seeds: list[tree_sitter.Node] = []
        self.kernel_uses = 0
        self._identity_names: set[str] = set()
        self.self_tensors = self._self_tensors()

    def add(self, rule: str, node: tree_sitter.Node | int, message: str) -> None:
        if rule == "precision-downgrade" and self.half_ok:
            return
        line = node if isinstance(node, int) else line_of(node)
        self.findings.add(rule, line, message)

    def run(self) -> None:
        self._imports()
        self._everywhere()
        self._classes()
        self._reach()
        self._kernel_presence()

    # -- imports ---------------------------------------------------------------------------

    @rule("forbidden-import", "an import outside the allowed set (torch, triton, math, numpy, typing, ...)", stage="python")
    @rule("threading", "threads, processes, async tasks or fork", stage="python")
    @rule("network", "network access", stage="python")
    @rule("subprocess", "child processes or shell commands", stage="python")
    def _imports(self) -> None:
        for module, node in self.p.import_sites:
            if module.endswith(".*"):
                self.add(
                    "forbidden-import",
                    node,
                    f"`from {module[:-2]} import *` hides where names come from; import the names you use explicitly.",
                )
                continue
            if module.startswith("."):
                self.add("forbidden-import", node, "relative imports are not available; the answer is one file.")
                continue
            rule = rule_for_name(module)
            if rule is not None:
                self.add(rule, node, rule_message(rule, module))
            elif not self._import_allowed(module):
                self.add("forbidden-import", node, rule_message("forbidden-import", module))

    @staticmethod
    def _import_allowed(module: str) -> bool:
        parts = module.split(".")
        if parts[0] in ("torch", "triton"):
            return True
        return any(".".join(parts[:i]) in ALLOWED_IMPORTS for i in range(1, len(parts) + 1))

    # -- names, calls, assignments, strings anywhere ---------------------------------------

    @rule("harness-introspection", "the call stack, frames, gc, sys.modules or other harness state is inspected", stage="python")
    @rule("dynamic-code", "eval/exec/compile/__import__/importlib/globals() or getattr on a module with a computed name", stage="python")
    def _everywhere(self) -> None:
        for node, is_ref in self.p.nodes:
            kind = node.type
            if is_ref:
                self._reference_anywhere(node)
            if kind == "attribute":
                attr = node_text(field_of(node, "attribute"))
                if attr in INTROSPECTION_ATTRS:
                    self.add("harness-introspection", node, rule_message("harness-introspection", attr))
                elif attr == "__dict__" and any(not t.startswith("<") for t in self.p.resolve(field_of(node, "object"))):
                    self.add("dynamic-code", node, rule_message("dynamic-code", node_text(node)))
            elif kind == "call":
                self._call_anywhere(node)
            elif kind in ("assignment", "augmented_assignment"):
                self._assignment_target(field_of(node, "left"))
            elif kind == "delete_statement":
                for target in node.named_children:
                    for item in target.named_children if target.type in ("expression_list", "tuple") else [target]:
                        self._assignment_target(item)
            elif kind in ("string", "concatenated_string") and (
                node.parent is None or node.parent.type != "concatenated_string"
            ):
                self._string_anywhere(node)

    @rule("uses-reference-model", "the reference `Model` is referenced or instantiated", stage="python")
    @rule("extra-stream", "work is put on a non-default CUDA stream from Python", stage="python")
    @rule("torch-compiler", "torch.compile, TorchScript, CUDA graphs or other PyTorch compilers generate the kernel", stage="python")
    @rule("private-torch-api", "private torch internals (torch._C, torch._ops, ...) are used", stage="python")
    @rule("private-torch-compute", "PyTorch operators are reached through a private module (torch._C._nn, ...)", stage="python")
    def _reference_anywhere(self, node: tree_sitter.Node) -> None:
        text = node_text(node)
        if node.type == "identifier":
            if text == "Model" and not self._is_class_base(node):
                self.add(
                    "uses-reference-model",
                    node,
                    "The answer must not use the reference `Model` (no instance, "
                    "call or reference); implement ModelNew's computation in your own kernel.",
                )
            if text == "__builtins__":
                self.add("harness-introspection", node, rule_message("harness-introspection", text))
        for target in self.p.resolve(node):
            if target.startswith("<"):
                continue
            rule = rule_for_name(target)
            if rule is not None:
                self.add(rule, node, rule_message(rule, text, target))

    @staticmethod
    def _is_class_base(node: tree_sitter.Node) -> bool:
        parent = node.parent
        return (
            parent is not None
            and parent.type == "argument_list"
            and parent.parent is not None
            and parent.parent.type == "class_definition"
        )

    @rule("global-flags", "process-wide settings are changed (backend flags, thread counts, matmul precision, RNG seeds, env)", stage="python")
    @rule("uses-task-inputs", "get_inputs()/get_init_inputs() is called to precompute results", stage="python")
    @rule("precision-downgrade", "fp16/bf16/TF32 is used in a task whose reference is fp32", stage="python")
    def _call_anywhere(self, node: tree_sitter.Node) -> None:
        function = field_of(node, "function")
        args = field_of(node, "arguments")
        arg_nodes = args.named_children if args is not None else []
        positional = [a for a in arg_nodes if a.type not in ("keyword_argument", "comment")]
        targets = self.p.resolve(function)
        fname = node_text(function)
        if function is not None and function.type == "identifier" and fname in ("get_inputs", "get_init_inputs"):
            self.add(
                "uses-task-inputs",
                node,
                f"`{fname}()` must not be called by the answer (it would precompute "
                "results from the harness's inputs); compute from the arguments forward receives.",
            )
        for target in targets:
            if target in (
                "builtins.setattr",
                "builtins.delattr",
                "builtins.object.__setattr__",
                "builtins.type.__setattr__",
                "builtins.object.__delattr__",
            ):
                for base in self.p.resolve(positional[0]) if positional else ():
                    if not base.startswith("<"):
                        name = self.p.const_str(positional[1]) if len(positional) > 1 else None
                        full = f"{base}.{name}" if name else base
                        rule = "global-flags" if full.startswith("torch.backends.") else "monkey-patching"
                        self.add(rule, node, rule_message(rule, f"{fname}({full}, ...)"))
            elif target == "builtins.getattr" and len(positional) >= 2 and self.p.const_str(positional[1]) is None:
                if any(not b.startswith("<") for b in self.p.resolve(positional[0])):
                    self.add("dynamic-code", node, rule_message("dynamic-code", "getattr(<module>, <computed name>)"))
            elif target in ENV_WRITERS:
                key = self.p.const_str(positional[0]) if positional else None
                if key not in BUILD_ENV:
                    self.add("global-flags", node, rule_message("global-flags", fname))
            elif target.startswith("torch.library."):
                if any((self.p.const_str(a) or "").startswith(("aten", "prims")) for a in walk_args(arg_nodes)):
                    self.add(
                        "monkey-patching",
                        node,
                        "Re-registering ATen/prims operators changes what the "
                        "reference computes; register your own namespace or call your extension directly.",
                    )
            elif target in LOADERS:
                for arg in walk_args(arg_nodes):
                    flag = self.p.const_str(arg)
                    if flag is not None and LIBRARY_FLAGS.match(flag.strip()):
                        self.add(
                            "native-library",
                            arg,
                            f"linking `{flag.strip()}` pulls in a vendor library; "
                            "write the computation in your own kernel.",
                        )
        if function is not None and function.type == "attribute":
            method = node_text(field_of(function, "attribute"))
            receiver = field_of(function, "object")
            if method in ("half", "bfloat16") and not any(not t.startswith("<") for t in self.p.resolve(receiver)):
                self.add("precision-downgrade", node, rule_message("precision-downgrade", f".{method}()"))
            if method in ("as_subclass", "_make_subclass", "_make_wrapper_subclass"):
                self.add("tensor-subclass", node, rule_message("tensor-subclass", f".{method}()"))
            if method in HOOK_METHODS and positional:
                self.hook_seeds.append(positional[0])
        for arg in arg_nodes:
            if arg.type != "keyword_argument":
                continue
            key = node_text(field_of(arg, "name"))
            value = field_of(arg, "value")
            if key in ("allow_tf32", "allow_fp16_reduced_precision_reduction") and node_text(value) == "True":
                self.add("precision-downgrade", arg, rule_message("precision-downgrade", f"{key}=True"))
            elif key in ("input_precision", "dtype", "out_dtype") and (self.p.const_str(value) or "").lower() in (
                "tf32",
                "tf32x3",
                "bf16x3",
                "float16",
                "half",
                "bfloat16",
                "fp16",
                "bf16",
            ):
                self.add("precision-downgrade", arg, rule_message("precision-downgrade", node_text(arg)))

    @rule("monkey-patching", "attributes of torch/time/triton/builtins or other modules are replaced, or ATen ops re-registered", stage="python")
    def _assignment_target(self, target: tree_sitter.Node | None) -> None:
        if target is None:
            return
        if target.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple"):
            for item in target.named_children:
                self._assignment_target(item)
            return
        if target.type == "attribute":
            attr = node_text(field_of(target, "attribute"))
            for base in self.p.resolve(field_of(target, "object")):
                if base.startswith("<"):
                    continue
                full = f"{base}.{attr}"
                rule = "global-flags" if full.startswith("torch.backends.") else "monkey-patching"
                self.add(rule, target, rule_message(rule, f"{node_text(target)} = ..."))
        elif target.type == "subscript":
            value = field_of(target, "value")
            bases = self.p.resolve(value)
            text = node_text(value)
            if "os.environ" in bases:
                if self.p.const_str(field_of(target, "subscript")) not in BUILD_ENV:
                    self.add("global-flags", target, rule_message("global-flags", f"{node_text(target)} = ..."))
            elif "sys.modules" in bases or text.endswith("__dict__") or text == "__builtins__" or "builtins" in bases:
                self.add("monkey-patching", target, rule_message("monkey-patching", f"{node_text(target)} = ..."))

    @rule("file-access", "files, pickles, /dev/shm or the OS are accessed", stage="python")
    def _string_anywhere(self, node: tree_sitter.Node) -> None:
        key = node_key(node)
        if key in self.native_keys or key in self.p.docstrings:
            return
        value = self.p.const_str(node)
        if value is None:
            value = node_text(node)
        if "LD_PRELOAD" in value:
            self.add("monkey-patching", node, "LD_PRELOAD interposes library functions; remove it.")
        match = PATH_LITERAL.search(value)
        if match and len(value) < 500 and not CPP_HINT.search(value):
            self.add("file-access", node, rule_message("file-access", value.strip()[:60]))

    # -- classes ---------------------------------------------------------------------------

    @rule("inherits-model", "a class derives from the reference `Model`", stage="python")
    @rule("tensor-subclass", "tensor subclasses or __torch_function__/__torch_dispatch__ overrides", stage="python")
    def _classes(self) -> None:
        derived: set[str] = set()
        for _ in range(len(self.p.classes) + 1):
            before = len(derived)
            for info in self.p.classes.values():
                for base in info.bases:
                    targets = self.p.resolve(base)
                    if "<ref>Model" in targets or any(t.startswith("<class>") and t[7:] in derived for t in targets):
                        derived.add(info.name)
            if len(derived) == before:
                break
        for name in derived:
            self.add(
                "inherits-model",
                self.p.classes[name].node,
                f"`class {name}` derives from the reference "
                "`Model`; derive from nn.Module and implement forward with your own kernel.",
            )
        for info in self.p.classes.values():
            for base in info.bases:
                targets = self.p.resolve(base)
                if targets & {"torch.Tensor", "torch._C.TensorBase", "torch._C._TensorBase"}:
                    self.add("tensor-subclass", info.node, rule_message("tensor-subclass", f"class {info.name}"))
            for name in ("__torch_function__", "__torch_dispatch__"):
                if name in info.methods or name in info.attributes:
                    self.add("tensor-subclass", info.methods.get(name, info.node), rule_message("tensor-subclass", name))

    # -- presence of a native kernel ---------------------------------------------------------

    @rule("no-native-kernel", "the program builds no native kernel for the backend (no load_inline / @triton.jit)", stage="python")
    def _kernel_presence(self) -> None:
        has_loader = bool(self.p.loader_calls())
        has_jit = bool(self.p.jit_names) or any("<jit>" in v for v in self.p.aliases.values())
        if self.backend == "triton":
            ok, wanted = has_jit, "a Triton kernel (@triton.jit) launched from forward"
        elif self.backend in ("cpp", "cuda", "musa"):
            ok, wanted = has_loader, "a native extension built with torch.utils.cpp_extension.load_inline"
        else:
            ok, wanted = has_loader or has_jit, "a native kernel (load_inline or @triton.jit)"
        if not ok:
            info = self.p.classes.get("ModelNew")
            self.add(
                "no-native-kernel",
                info.node if info else 0,
                f"The answer builds no kernel for the {self.backend!r} backend; it must contain {wanted}.",
            )

    # -- forward and everything it reaches ---------------------------------------------------

