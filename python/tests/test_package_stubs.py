"""The type stubs shipped with the package (``dexlake/__init__.pyi`` and
``dexlake/_dexlake.pyi``) say what the installed package does: the same names, parameters
(names, kinds, defaults) and annotations as the runtime, with a docstring on every definition.

The stubs are read from the installed package's folder, or from ``DEXLAKE_STUBS_DIR`` when it
is set (to check stubs not installed yet).
"""

from __future__ import annotations

import ast
import inspect
import os
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import pytest

import dexlake
import dexlake._dexlake as native
import dexlake.errors

STUBS = Path(os.environ.get("DEXLAKE_STUBS_DIR") or Path(dexlake.__file__).parent)

# (name, kind, default, annotation) of each parameter.
Params = List[Tuple[str, Any, Optional[ast.expr], Optional[ast.expr]]]


# --- reading the stubs -------------------------------------------------------------------


class Stub:
    """One parsed stub file: its top-level definitions and each class's members."""

    def __init__(self, name: str) -> None:
        self.path = STUBS / name
        assert self.path.is_file(), f"{self.path} is missing"
        self.tree = ast.parse(self.path.read_text(encoding="utf-8"), filename=str(self.path))
        self.names: Dict[str, ast.AST] = {}
        self.classes: Dict[str, Dict[str, ast.FunctionDef]] = {}
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                self._define(node.name, node)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self._define(node.target.id, node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self._define(target.id, node)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    # Only `from m import X as X` re-exports X from a stub.
                    if alias.asname == alias.name:
                        self._define(alias.name, node)
            if isinstance(node, ast.ClassDef):
                members: Dict[str, ast.FunctionDef] = {}
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        assert item.name not in members, f"{self.path.name}: {node.name}.{item.name} defined twice"
                        members[item.name] = item  # type: ignore[assignment]
                self.classes[node.name] = members

    def _define(self, name: str, node: ast.AST) -> None:
        assert name not in self.names, f"{self.path.name}: {name} defined twice"
        self.names[name] = node

    def function(self, name: str) -> ast.FunctionDef:
        node = self.names.get(name)
        assert isinstance(node, ast.FunctionDef), f"{self.path.name}: no function {name}"
        return node

    def member(self, cls: str, name: str) -> ast.FunctionDef:
        members = self.classes.get(cls)
        assert members is not None, f"{self.path.name}: no class {cls}"
        assert name in members, f"{self.path.name}: {cls} has no {name}"
        return members[name]


@pytest.fixture(scope="module")
def api_stub() -> Stub:
    return Stub("__init__.pyi")


@pytest.fixture(scope="module")
def native_stub() -> Stub:
    return Stub("_dexlake.pyi")


def decorators(node: ast.FunctionDef) -> set:
    return {ast.unparse(d) for d in node.decorator_list}


def stub_params(node: ast.FunctionDef) -> Params:
    """(name, kind, default, annotation) of the stub's parameters, in order."""
    a = node.args
    positional = [(p, inspect.Parameter.POSITIONAL_ONLY) for p in a.posonlyargs]
    positional += [(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in a.args]
    defaults: List[Optional[ast.expr]] = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out: Params = [(p.arg, kind, d, p.annotation) for (p, kind), d in zip(positional, defaults)]
    if a.vararg is not None:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, None, a.vararg.annotation))
    for p, d in zip(a.kwonlyargs, a.kw_defaults):
        out.append((p.arg, inspect.Parameter.KEYWORD_ONLY, d, p.annotation))
    if a.kwarg is not None:
        out.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, None, a.kwarg.annotation))
    return out


def literal(node: ast.expr, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        pytest.fail(f"{where}: the default {ast.unparse(node)} is not a literal")


def same_default(stub_default: Any, runtime_default: Any) -> bool:
    # 0, 0.0 and False are different defaults.
    return type(stub_default) is type(runtime_default) and stub_default == runtime_default


class _Unquote(ast.NodeTransformer):
    """Forward references ("Simulator", "os.PathLike[str]") as the expressions they name."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        if isinstance(node.value, str):
            return self.visit(ast.parse(node.value, mode="eval").body)
        return node


def annotation_text(annotation: Any) -> Optional[str]:
    """An annotation (source text or stub expression) as normalized source text."""
    if annotation is None or annotation is inspect.Parameter.empty:
        return None
    if isinstance(annotation, ast.AST):
        tree: ast.AST = annotation
    else:
        tree = ast.parse(annotation, mode="eval").body
    return ast.unparse(_Unquote().visit(tree))


def compare_signature(
    where: str,
    runtime: inspect.Signature,
    stub: ast.FunctionDef,
    *,
    drop_first: bool = False,
    constructor: bool = False,
    annotations: bool = True,
) -> None:
    """The stub's parameters are the runtime's: names, kinds, defaults (and annotations).
    `drop_first` leaves out both first parameters (`self`), `constructor` the stub's (`cls`
    or `self`, which the signature of a class has not)."""
    got = stub_params(stub)
    want = list(runtime.parameters.values())
    if drop_first or constructor:
        assert got and got[0][0] in ("self", "cls"), f"{where}: the stub has no self/cls parameter"
        got = got[1:]
    if drop_first:
        want = want[1:]
    assert [(n, k) for n, k, _, _ in got] == [(p.name, p.kind) for p in want], (
        f"{where}: the stub's parameters {[(n, k.description) for n, k, _, _ in got]} are not "
        f"the runtime's {[(p.name, p.kind.description) for p in want]}"
    )
    for (name, _, default, annotation), p in zip(got, want):
        if p.default is inspect.Parameter.empty:
            assert default is None, f"{where}: {name} has a default in the stub only"
        else:
            assert default is not None, f"{where}: {name} has no default in the stub (runtime: {p.default!r})"
            value = literal(default, f"{where}: {name}")
            assert same_default(value, p.default), (
                f"{where}: {name} defaults to {value!r} in the stub, {p.default!r} at runtime"
            )
        # The runtime module postpones annotations, so they are source text; other kinds of
        # annotation objects are not compared.
        if annotations and (p.annotation is inspect.Parameter.empty or isinstance(p.annotation, str)):
            assert annotation_text(annotation) == annotation_text(p.annotation), (
                f"{where}: {name} is annotated {annotation_text(annotation)} in the stub, "
                f"{annotation_text(p.annotation)} at runtime"
            )
    if annotations and isinstance(runtime.return_annotation, str):
        assert annotation_text(stub.returns) == annotation_text(runtime.return_annotation), (
            f"{where}: returns {annotation_text(stub.returns)} in the stub, "
            f"{annotation_text(runtime.return_annotation)} at runtime"
        )


def has_docstring(node: ast.AST) -> bool:
    doc = ast.get_docstring(node)  # type: ignore[arg-type]
    return bool(doc and doc.strip())


def all_definitions(tree: ast.AST):
    """Every class and function of a stub, with its qualified name."""
    for node in tree.body:  # type: ignore[attr-defined]
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.ClassDef)):
                        yield f"{node.name}.{item.name}", item


# --- the public API: dexlake/__init__.pyi -------------------------------------------------

# Attributes every class has, which are not part of its API.
CLASS_BOOKKEEPING = {"__module__", "__doc__", "__dict__", "__weakref__", "__annotations__", "__qualname__"}


def runtime_functions() -> Dict[str, types.FunctionType]:
    return {
        name: obj
        for name, obj in vars(dexlake).items()
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == dexlake.__name__
    }


def runtime_classes() -> Dict[str, type]:
    return {
        name: obj
        for name, obj in vars(dexlake).items()
        if not name.startswith("_") and inspect.isclass(obj) and obj.__module__ == dexlake.__name__
    }


def api_members(cls: type) -> Dict[str, Any]:
    """The class's own public methods and properties, and the special methods it defines."""
    out = {}
    for name, member in vars(cls).items():
        if name in CLASS_BOOKKEEPING:
            continue
        private = name.startswith("_") and not (name.startswith("__") and name.endswith("__"))
        if not private:
            out[name] = member
    return out


def test_every_exported_name_is_in_the_stub(api_stub):
    missing = [name for name in dexlake.__all__ if name not in api_stub.names]
    assert not missing, f"__init__.pyi does not define {missing}"
    for name in ("__version__", "Instant", "__all__"):
        assert name in api_stub.names, f"__init__.pyi does not define {name}"
    stub_all = ast.literal_eval(api_stub.names["__all__"].value)  # type: ignore[attr-defined]
    assert stub_all == dexlake.__all__


def test_the_exceptions_are_those_of_dexlake_errors(api_stub):
    for name in dexlake.errors.__all__:
        node = api_stub.names.get(name)
        if name in dexlake.__all__:
            assert isinstance(node, ast.ImportFrom), f"__init__.pyi: {name} is not re-exported"
        if isinstance(node, ast.ImportFrom):
            assert (node.module, node.level) == ("errors", 1), f"__init__.pyi: {name} is not from .errors"
            assert getattr(dexlake, name) is getattr(dexlake.errors, name)


def test_instant_and_version(api_stub):
    assert isinstance(dexlake.__version__, str) and dexlake.__version__ == native.__version__
    node = api_stub.names["__version__"]
    assert isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "str"
    # The stub's Instant, evaluated with the stub's own imports, is the runtime's.
    namespace: Dict[str, Any] = {}
    for statement in api_stub.tree.body:
        if isinstance(statement, ast.Import) or (isinstance(statement, ast.ImportFrom) and statement.level == 0):
            exec(compile(ast.Module(body=[statement], type_ignores=[]), str(api_stub.path), "exec"), namespace)
    instant = api_stub.names["Instant"]
    assert isinstance(instant, ast.Assign)
    assert eval(compile(ast.Expression(instant.value), str(api_stub.path), "eval"), namespace) == dexlake.Instant


def test_no_name_is_in_the_stub_only(api_stub):
    extra = [n for n in api_stub.names if not n.startswith("_") and not hasattr(dexlake, n)]
    assert not extra, f"__init__.pyi defines {extra}, which the package does not"
    for cls, members in api_stub.classes.items():
        if cls.startswith("_"):
            continue
        runtime = getattr(dexlake, cls)
        extra = [m for m in members if m not in vars(runtime)]
        assert not extra, f"__init__.pyi: {cls} has {extra}, which dexlake.{cls} does not"


@pytest.mark.parametrize("name", sorted(runtime_functions()))
def test_functions_have_the_runtime_signature(api_stub, name):
    function = runtime_functions()[name]
    compare_signature(name, inspect.signature(function), api_stub.function(name))


def class_member_cases():
    return [(c, m) for c, cls in sorted(runtime_classes().items()) for m in sorted(api_members(cls))]


@pytest.mark.parametrize("cls,name", class_member_cases())
def test_methods_and_properties_have_the_runtime_signature(api_stub, cls, name):
    member = vars(getattr(dexlake, cls))[name]
    stub = api_stub.member(cls, name)
    where = f"{cls}.{name}"
    if isinstance(member, property):
        assert "property" in decorators(stub), f"{where} is a property, not in the stub"
        compare_signature(where, inspect.signature(member.fget), stub)
    elif isinstance(member, staticmethod):
        assert "staticmethod" in decorators(stub), f"{where} is a staticmethod, not in the stub"
        compare_signature(where, inspect.signature(member.__func__), stub)
    elif isinstance(member, classmethod):
        assert "classmethod" in decorators(stub), f"{where} is a classmethod, not in the stub"
        compare_signature(where, inspect.signature(member.__func__), stub)
    else:
        assert inspect.isfunction(member), f"{where}: {type(member).__name__} is not checked"
        assert not decorators(stub) & {"property", "staticmethod", "classmethod"}, f"{where} is a method"
        compare_signature(where, inspect.signature(member), stub)


def test_the_runtime_api_has_docstrings():
    missing = [] if (dexlake.__doc__ or "").strip() else ["dexlake"]
    for name in dexlake.__all__:
        if not (getattr(dexlake, name).__doc__ or "").strip():
            missing.append(name)
    for cls_name, cls in runtime_classes().items():
        for name, member in api_members(cls).items():
            if name.startswith("_"):
                continue  # special methods: the stub documents them
            target = member.fget if isinstance(member, property) else member
            if not (getattr(target, "__doc__", None) or "").strip():
                missing.append(f"{cls_name}.{name}")
    assert not missing, f"no docstring: {missing}"


@pytest.mark.parametrize("file", ["__init__.pyi", "_dexlake.pyi"])
def test_every_stub_definition_has_a_docstring(file):
    stub = Stub(file)
    missing = [] if has_docstring(stub.tree) else ["the module"]
    missing += [name for name, node in all_definitions(stub.tree) if not has_docstring(node)]
    assert not missing, f"{file}: no docstring: {missing}"


# --- the native module: dexlake/_dexlake.pyi ----------------------------------------------


def native_names() -> List[str]:
    return sorted(n for n in dir(native) if not n.startswith("_")) + ["__version__"]


def native_classes() -> Dict[str, type]:
    return {n: getattr(native, n) for n in native_names() if inspect.isclass(getattr(native, n))}


def native_signature(obj: Any) -> Optional[inspect.Signature]:
    """The signature pyo3 gives `obj` (`__text_signature__`), or None when Python cannot
    introspect it; such callables (for example FrameStream, which has no constructor) are only
    checked by name."""
    try:
        return inspect.signature(obj)
    except (ValueError, TypeError):
        return None


def test_every_native_name_is_in_the_stub(native_stub):
    missing = [n for n in native_names() if n not in native_stub.names]
    assert not missing, f"_dexlake.pyi does not define {missing}"
    assert set(native.__all__) <= set(native_names())
    extra = [n for n in native_stub.names if not n.startswith("_") and not hasattr(native, n)]
    assert not extra, f"_dexlake.pyi defines {extra}, which the native module does not"


@pytest.mark.parametrize("name", [n for n in native_names() if callable(getattr(native, n)) and not inspect.isclass(getattr(native, n))])
def test_native_functions_have_the_runtime_parameters(native_stub, name):
    function = getattr(native, name)
    assert (function.__doc__ or "").strip(), f"_dexlake.{name} has no docstring"
    signature = native_signature(function)
    if signature is not None:
        compare_signature(f"_dexlake.{name}", signature, native_stub.function(name), annotations=False)


def native_member_cases():
    cases = []
    for cls_name, cls in sorted(native_classes().items()):
        for name in sorted(vars(cls)):
            # __new__ is pyo3's generic slot; the class's own signature is its constructor's.
            if name in CLASS_BOOKKEEPING or name == "__new__":
                continue
            cases.append((cls_name, name))
    return cases


@pytest.mark.parametrize("cls_name", sorted(native_classes()))
def test_native_constructors_have_the_runtime_parameters(native_stub, cls_name):
    cls = native_classes()[cls_name]
    assert (cls.__doc__ or "").strip(), f"_dexlake.{cls_name} has no docstring"
    signature = native_signature(cls)
    if signature is None:
        return  # not introspectable (FrameStream has no constructor)
    members = native_stub.classes[cls_name]
    constructor = members.get("__new__") or members.get("__init__")
    assert constructor is not None, f"_dexlake.pyi: {cls_name} has no constructor"
    compare_signature(f"_dexlake.{cls_name}()", signature, constructor, constructor=True, annotations=False)


@pytest.mark.parametrize("cls_name,name", native_member_cases())
def test_native_methods_and_properties_have_the_runtime_parameters(native_stub, cls_name, name):
    cls = native_classes()[cls_name]
    member = vars(cls)[name]
    stub = native_stub.member(cls_name, name)
    where = f"_dexlake.{cls_name}.{name}"
    if isinstance(member, types.GetSetDescriptorType):
        assert "property" in decorators(stub), f"{where} is a property, not in the stub"
        assert [n for n, _, _, _ in stub_params(stub)] == ["self"], f"{where}: a property takes self only"
        assert (member.__doc__ or "").strip(), f"{where} has no docstring"
        return
    if isinstance(member, staticmethod):
        assert "staticmethod" in decorators(stub), f"{where} is a staticmethod, not in the stub"
        signature = native_signature(member.__func__)
        drop_first = False
    else:
        assert not decorators(stub) & {"property", "staticmethod", "classmethod"}, f"{where} is a method"
        signature = native_signature(member)
        drop_first = True  # pyo3 marks `self` positional-only ($self); stubs name it plainly
    if not name.startswith("__"):
        assert (member.__doc__ or "").strip(), f"{where} has no docstring"
    if signature is not None:
        compare_signature(where, signature, stub, drop_first=drop_first, annotations=False)


def test_no_native_member_is_in_the_stub_only(native_stub):
    for cls_name, members in native_stub.classes.items():
        if cls_name.startswith("_"):
            continue  # the stub's own helper types
        runtime = getattr(native, cls_name)
        extra = [m for m in members if m not in ("__new__", "__init__") and m not in vars(runtime)]
        assert not extra, f"_dexlake.pyi: {cls_name} has {extra}, which the native class does not"
