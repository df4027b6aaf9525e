"""Runner side of building the model: which keyword arguments its `__init__` gets.

Loaded by path by runner/ inside the user's interpreter: standard library here, torch and
transformers only when the model's own code already uses them.

- Arguments given (`--init`, the `# torchdoctor: init=` comment) are passed as keywords.
- An argument whose annotation is a transformers `PretrainedConfig` subclass (or a parameter
  named `config` of a `PreTrainedModel` subclass, through its `config_class`) is built as that
  config class: with its defaults when the argument is not given, from the keywords when a
  JSON object is given. Every other missing argument without a default is reported by name.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

MAX_DESCRIPTION = 120


@dataclass
class ArgumentPlan:
    kwargs: dict[str, Any] = field(default_factory=dict)
    """What `__init__` is called with."""
    shown: dict[str, str] = field(default_factory=dict)
    """The same, as short text for the report (a config as `GPT2Config(n_layer=2)`)."""
    missing: list[str] = field(default_factory=list)
    """Required parameters nothing supplies."""
    unknown: list[str] = field(default_factory=list)
    """Given names `__init__` does not take (it has no **kwargs)."""


def is_library_config_class(value: Any) -> TypeGuard[type]:
    """A transformers `PretrainedConfig` subclass, recognised without importing transformers."""
    if not isinstance(value, type):
        return False
    return any(
        base.__name__ in ("PretrainedConfig", "PreTrainedConfig")
        and base.__module__.startswith("transformers")
        for base in value.__mro__
    )


def init_parameters(cls: type[Any]) -> list[inspect.Parameter]:
    """The keyword-capable parameters of `cls.__init__`, without `self`."""
    try:
        signature = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return []
    parameters = list(signature.parameters.values())[1:]
    return parameters


def annotation_of(cls: type[Any], parameter: inspect.Parameter) -> Any:
    """The parameter's annotation as an object; string annotations are resolved in the
    module that wrote them (a failure leaves it unknown)."""
    annotation = parameter.annotation
    if isinstance(annotation, str):
        try:
            hints = typing.get_type_hints(cls.__init__)
        except Exception:  # noqa: BLE001 - an unresolvable annotation is just unknown
            return None
        return hints.get(parameter.name)
    return None if annotation is inspect.Parameter.empty else annotation


def config_class_for(cls: type, parameter: inspect.Parameter) -> type | None:
    annotation = annotation_of(cls, parameter)
    for candidate in typing.get_args(annotation) or (annotation,):
        if is_library_config_class(candidate) and candidate.__name__ not in (
            "PretrainedConfig", "PreTrainedConfig"
        ):
            return candidate
    if parameter.name == "config":
        declared = getattr(cls, "config_class", None)
        if is_library_config_class(declared):
            return declared
    return None


def plan_arguments(cls: type, given: dict[str, Any]) -> ArgumentPlan:
    plan = ArgumentPlan()
    parameters = init_parameters(cls)
    by_name = {p.name: p for p in parameters}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    for name, value in given.items():
        parameter = by_name.get(name)
        if parameter is None and not takes_any:
            plan.unknown.append(name)
            continue
        config_class = config_class_for(cls, parameter) if parameter is not None else None
        if config_class is not None and isinstance(value, dict):
            plan.kwargs[name] = config_class(**value)
            plan.shown[name] = describe_call(config_class.__name__, value)
        else:
            plan.kwargs[name] = value
            plan.shown[name] = short_text(repr(value))
    for parameter in parameters:
        if parameter.name in plan.kwargs or parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        config_class = config_class_for(cls, parameter)
        if config_class is not None:
            plan.kwargs[parameter.name] = config_class()
            plan.shown[parameter.name] = f"{config_class.__name__}() (its defaults)"
        else:
            plan.missing.append(parameter.name)
    return plan


def call_with(factory: Callable[..., Any], plan: ArgumentPlan) -> Any:
    """Keyword arguments only; a positional-only parameter gets its value by position."""
    positional: list[Any] = []
    keywords = dict(plan.kwargs)
    if isinstance(factory, type):
        for parameter in init_parameters(factory):
            if parameter.kind is inspect.Parameter.POSITIONAL_ONLY and parameter.name in keywords:
                positional.append(keywords.pop(parameter.name))
    return factory(*positional, **keywords)


def import_factory(module_name: str, attribute: str) -> Callable[..., Any]:
    """`module:attribute` imported as the project sees it (the file's folder is on sys.path)."""
    owner: object = importlib.import_module(module_name)
    for part in attribute.split("."):
        owner = getattr(owner, part)
    if not callable(owner):
        raise TypeError(f"{module_name}:{attribute} is a {type(owner).__name__}, not callable")
    return owner


def describe_call(name: str, keywords: dict[str, Any]) -> str:
    inner = ", ".join(f"{k}={v!r}" for k, v in keywords.items())
    return short_text(f"{name}({inner})")


def short_text(text: str) -> str:
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 3] + "..."
