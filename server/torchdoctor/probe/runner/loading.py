"""Loading the user's file and building the model (constructor arguments, factories, where
each parameter and submodule was made).
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import re
import sys
import tokenize
import types
from collections.abc import Iterator
from typing import Any

from .companions import companion_module
from .events import ProbeFailure
from .user_code import Location, UserCode, user_code_phase

_load_counter = 0


def package_name_for(path: str) -> tuple[str, str] | None:
    """(sys.path root, dotted module name) when the file sits inside a package, so relative
    imports work; None for a plain script."""
    directory, filename = os.path.split(path)
    parts = [os.path.splitext(filename)[0]]
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        directory, package = os.path.split(directory)
        parts.append(package)
    if len(parts) == 1:
        return None
    return directory, ".".join(reversed(parts))


def import_user_file(path: str, user: UserCode, origin: str | None = None) -> types.ModuleType:
    """Import the file fresh under a private name: never as __main__, so a training script's
    `if __name__ == "__main__":` block does not run. When `path` is a copy of the unsaved text
    of `origin`, the copy is imported as a module of `origin`'s package, so that its relative
    imports resolve as the user's file's would."""
    global _load_counter
    _load_counter += 1
    is_copy = origin is not None and os.path.abspath(origin) != path
    package = package_name_for(os.path.abspath(origin) if is_copy and origin else path)
    what = f"importing {os.path.basename(origin if is_copy and origin else path)}"
    with user_code_phase("import", what, user, fallback=(path, 1)):
        parent = ""
        if package is not None:
            root, dotted = package
            if root not in sys.path:
                sys.path.insert(0, root)
            if not is_copy:
                return importlib.import_module(dotted)
            parent = dotted.rpartition(".")[0]
            importlib.import_module(parent)
        stem = re.sub(r"\W", "_", os.path.basename(path))
        name = f"torchdoctor_probe_{_load_counter}_{stem}"
        if parent:
            name = f"{parent}.{name}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ProbeFailure("file", f"cannot load {path} as a Python module", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    raise AssertionError("unreachable")  # pragma: no cover - the phase always raises or returns


def defined_in(obj: Any, module: types.ModuleType, path: str) -> bool:
    """True for a class or function the file itself defines (not one it imported)."""
    if isinstance(obj, types.MethodType):  # a classmethod factory, read off its class
        obj = obj.__func__
    if isinstance(obj, type):
        return getattr(obj, "__module__", None) == module.__name__
    if isinstance(obj, types.FunctionType):
        filename = obj.__code__.co_filename
        return os.path.realpath(filename) == os.path.realpath(path)
    return False


def resolve_target(module: types.ModuleType, target: str, path: str) -> Any:
    """The class or factory function `target` names. Only what the file defines can be a
    target: `os.abort` or an imported class would run code the user never asked to probe."""
    obj: Any = module
    parts = target.split(".")
    for index, part in enumerate(parts):
        if not hasattr(obj, part):
            import torch

            candidates = sorted(
                name
                for name, value in vars(module).items()
                if isinstance(value, type)
                and issubclass(value, torch.nn.Module)
                and getattr(value, "__module__", None) == module.__name__
            )
            hint = f"; nn.Module classes in the file: {', '.join(candidates)}" if candidates else ""
            raise ProbeFailure("target", f"{target!r} is not defined in {path}{hint}", path, None)
        obj = inspect_attribute(obj, part)
        last = index == len(parts) - 1
        if not defined_in(obj, module, path) or (not last and not isinstance(obj, type)):
            raise ProbeFailure(
                "target",
                f"{target!r} is not a class or factory function defined in {path}",
                path,
                None,
            )
    return obj


def inspect_attribute(owner: Any, name: str) -> Any:
    """`owner.name` without running a property or a descriptor of the user's (a target is a
    name, and looking it up must not execute anything)."""
    if isinstance(owner, types.ModuleType):
        return vars(owner)[name] if name in vars(owner) else getattr(owner, name)
    for klass in getattr(owner, "__mro__", (type(owner),)):
        if name in vars(klass):
            raw = vars(klass)[name]
            if isinstance(raw, (staticmethod, classmethod)):
                return getattr(owner, name)  # binding these runs no user code
            return raw
    return getattr(owner, name)


def definition_line(obj: Any, path: str) -> int | None:
    """Line of `class X` / `def f` in the user's file, from the AST (works without inspect)."""
    try:
        tree = ast.parse(read_source(path))
    except SyntaxError:
        return None
    name = getattr(obj, "__name__", None)
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node.lineno
    return None


def read_source(path: str) -> str:
    with tokenize.open(path) as handle:
        return handle.read()


class OriginRecorder:
    """Records where each module and parameter was created in the user's code.

    While the model is being built, nn.Module.__init__ and register_parameter are wrapped so
    that every module/parameter remembers the first user frame outside its own constructor:
    the line that says `self.conv1 = nn.Conv2d(...)` or `nn.Linear(...)` inside a Sequential.
    """

    def __init__(self, user: UserCode) -> None:
        self.user = user
        self.modules: dict[int, Location] = {}
        self.params: dict[int, Location] = {}
        self._keep_alive: list[Any] = []
        # buffers, tensor attributes and containers (build_origins.py)
        self.sites = companion_module("build_origins").BuildOrigins(user.innermost_frame)

    def _creation_site(self, obj: Any) -> Location | None:
        frame: types.FrameType | None = sys._getframe(2)
        while frame is not None:
            code = frame.f_code
            # Skip the object's own __init__ chain: we want the caller's line, not the
            # `super().__init__()` inside the class body.
            if self.user.is_user_code(code) and frame.f_locals.get("self") is not obj:
                return (code.co_filename, frame.f_lineno)
            frame = frame.f_back
        return None

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        import torch

        module_cls = torch.nn.Module
        original_init = module_cls.__init__
        original_register = module_cls.register_parameter
        recorder = self

        def recording_init(module: Any, *args: Any, **kwargs: Any) -> None:
            original_init(module, *args, **kwargs)
            where = recorder._creation_site(module)
            if where is not None:
                recorder.modules.setdefault(id(module), where)
                recorder._keep_alive.append(module)

        def recording_register(module: Any, name: str, param: Any) -> None:
            original_register(module, name, param)
            if param is not None and id(param) not in recorder.params:
                # Innermost user frame: `self.scale = nn.Parameter(...)` in the user's own
                # __init__, or the `nn.Linear(...)` line for a library layer's weight.
                where = recorder.user.innermost_frame(sys._getframe(1))
                if where is not None:
                    recorder.params[id(param)] = where
                    recorder._keep_alive.append(param)

        module_cls.__init__ = recording_init  # type: ignore[method-assign, assignment]  # patched while the model is built
        module_cls.register_parameter = recording_register  # type: ignore[method-assign, assignment]  # patched while the model is built
        try:
            with self.sites.recording(torch):
                yield
        finally:
            module_cls.__init__ = original_init  # type: ignore[method-assign]  # restored after the build
            module_cls.register_parameter = original_register  # type: ignore[method-assign]  # restored after the build

    def release(self) -> None:
        """Forget the objects that were built but are not part of the model (ids may reuse)."""
        self._keep_alive.clear()
        self.sites.release()


def build_model(
    target_obj: Any,
    target: str,
    path: str,
    user: UserCode,
    origins: OriginRecorder,
    init: dict[str, Any] | None = None,
    factory_spec: str | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The model and how it was built (the report's `construction`): a `--factory`, the
    class's `example_model()`, or the class called with `--init`, the `# torchdoctor: init=`
    comment or nothing, config arguments of known libraries filled in (construct.py)."""
    import torch

    construct = companion_module("construct")
    def_line = definition_line(target_obj, path)
    factory = target_obj
    what = f"building {target}"
    given: dict[str, Any] = dict(init or {})
    method, detail = ("init", "keyword arguments from --init") if init else ("default", "")
    if factory_spec is not None:
        module_name, attribute = companion_module("init_args").parse_factory(factory_spec)
        with user_code_phase("import", f"importing the factory {factory_spec}", user):
            factory = construct.import_factory(module_name, attribute)
        method, detail, what = "factory", f"{factory_spec}()", f"{factory_spec}() raised"
    elif isinstance(target_obj, type):
        if not issubclass(target_obj, torch.nn.Module):
            raise ProbeFailure(
                "target", f"{target} is a class but not a torch.nn.Module", path, def_line
            )
        hook = getattr(target_obj, "example_model", None)
        if callable(hook) and not init:
            factory = hook
            method, detail = "example_model", f"{target}.example_model()"
            what = detail
        else:
            what = f"{target}() raised in __init__"
            if not init:
                comment = init_from_comment(path, target_obj.__name__)
                if comment is not None:
                    given, line = comment
                    method, detail = "comment", f"keyword arguments from the comment on line {line}"
    elif not callable(target_obj):
        raise ProbeFailure("target", f"{target} is neither a class nor a function", path, def_line)

    torch.manual_seed(0)
    with origins.recording(), user_code_phase("init", what, user, fallback=(path, def_line or 1)):
        if factory is target_obj and isinstance(target_obj, type):
            plan = construct.plan_arguments(target_obj, given)
            refuse_unmet_arguments(plan, target, path, def_line)
        else:
            plan = construct.ArgumentPlan(dict(given), {k: repr(v) for k, v in given.items()})
        try:
            model = construct.call_with(factory, plan)
        except TypeError as exc:
            # A TypeError raised by the call itself (no user frame below us) means the
            # constructor needs arguments we cannot invent.
            if user.innermost_in_traceback(exc.__traceback__) is None:
                raise ProbeFailure(
                    "target",
                    f"{target}() cannot be called with the arguments it was given ({exc}); "
                    + HOW_TO_PASS_ARGUMENTS,
                    path,
                    def_line,
                ) from None
            raise
    if not isinstance(model, torch.nn.Module):
        raise ProbeFailure(
            "target", f"{target}() returned {type(model).__name__}, not an nn.Module", path,
            def_line,
        )
    if not detail and plan.shown:
        detail = "defaults, with library configs built from their defaults"
    construction = {"method": method, "detail": detail or "no arguments", "arguments": plan.shown}
    return model, construction


HOW_TO_PASS_ARGUMENTS = (
    "pass them with --init '{\"name\": value}', a `# torchdoctor: init={...}` comment on or "
    "above the class line, --factory module:function, or a `@classmethod example_model(cls)`"
)


def refuse_unmet_arguments(plan: Any, target: str, path: str, def_line: int | None) -> None:
    if plan.unknown:
        raise ProbeFailure(
            "target",
            f"{target}.__init__ takes no argument named {', '.join(map(repr, plan.unknown))}",
            path,
            def_line,
        )
    if plan.missing:
        raise ProbeFailure(
            "target",
            f"{target}() needs arguments it has no defaults for: {', '.join(plan.missing)}; "
            + HOW_TO_PASS_ARGUMENTS,
            path,
            def_line,
        )


def init_from_comment(path: str, class_name: str) -> tuple[dict[str, Any], int] | None:
    init_args = companion_module("init_args")
    try:
        source = read_source(path)
    except (OSError, SyntaxError, UnicodeDecodeError):
        return None
    try:
        found = init_args.init_comment(source, class_name)
    except init_args.InitArgumentError as exc:
        raise ProbeFailure("target", str(exc), path, exc.line) from None
    return (found.arguments, found.line) if found is not None else None
