"""``@evaluator``: turn a function or a class into a described, versioned evaluator.

Function form (record scope)::

    @evaluator(name="acme/shouty", version="1.0.0", requires=("output",))
    def shouty(record: Record, *, min_ratio: float = 0.5) -> bool:
        text = record.output.as_text()
        return sum(c.isupper() for c in text) >= min_ratio * max(len(text), 1)

``batch=True`` makes the function take a list of records and return one value per record.
A class is instantiated once per bind with the params as keyword arguments; it implements
``__call__(record)`` or ``evaluate_batch(records)`` for record scope, or ``map(record)`` and
``reduce(values)`` for dataset scope (map → reduce keeps memory to the mapped values).

Return values: a ``Score``, a list of scores, ``bool`` (pass/fail), a number, or a ``str``
(label). Raise ``Skip(reason)`` when a record cannot be judged (``NotMeasured(code, evidence)``
when a known cause kept it from being measured).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar, overload

from evalsi.core import (
    RECORD_FIELDS,
    USAGE_FIELDS,
    EvaluatorManifest,
    OutputSpec,
    OutputType,
    Scope,
    parse_ref,
)
from evalsi.evaluators._params import (
    ParamSpec,
    params_from_signature,
    params_schema,
    validate_params,
)

T = TypeVar("T")


class Skip(Exception):
    """Raise inside an evaluator: the record is SKIPPED with this reason, not scored."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotMeasured(Skip):
    """A ``Skip`` for a record the evaluator could not measure for a known cause (``code``,
    e.g. ``blocked_by_policy``): the reason reads ``not_measured(<code>): <evidence>``, so a
    report can tell "not measured" from "not applicable" and group by cause."""

    def __init__(self, code: str, evidence: str) -> None:
        super().__init__(f"not_measured({code}): {evidence}")
        self.code = code


class RecordError(Exception):
    """Return (or raise) for one record from a batch evaluator: that record is ERROR with
    ``reason`` exactly as given (a plugin's verdict arrives already worded)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Evaluator:
    """A described evaluator: its manifest, its declared params and the code behind it.

    Calling an ``Evaluator`` built from a function calls the function, so it stays testable.
    """

    def __init__(
        self,
        target: Callable[..., Any],
        manifest: EvaluatorManifest,
        params: tuple[ParamSpec, ...],
    ) -> None:
        self.target = target
        self.manifest = manifest
        self.params = params
        self.is_class = inspect.isclass(target)
        self.__doc__ = target.__doc__
        self.__wrapped__ = target
        # Where code loaded by reference came from (file and sha256, or module); stored with
        # every run's evaluator spec. None for evaluators registered by name.
        self.source: dict[str, str] | None = None

    @property
    def name(self) -> str:
        """The short name (``exact-match``), used as the default instance name."""
        return self.manifest.ref.name

    @property
    def ref(self) -> str:
        """The full reference, ``namespace/name@version``."""
        return str(self.manifest.ref)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.target(*args, **kwargs)

    def bind(self, params: Mapping[str, Any] | None = None, *, alias: str = "") -> BoundEvaluator:
        """Validate ``params`` and return an instance ready to run."""
        checked = validate_params(self.name, self.params, params or {})
        return BoundEvaluator(self, checked, alias or self.name)

    def __repr__(self) -> str:
        return f"<Evaluator {self.ref}>"


class BoundEvaluator:
    """An evaluator with validated params: what the runner executes."""

    def __init__(self, evaluator: Evaluator, params: dict[str, Any], name: str) -> None:
        self.evaluator = evaluator
        self.params = params
        self.name = name
        self.manifest = evaluator.manifest
        self.ref = evaluator.ref
        self.instance: Any = evaluator.target(**params) if evaluator.is_class else None

    @property
    def scope(self) -> Scope:
        return self.manifest.scope

    def record_fn(self) -> Callable[[Any], Any]:
        """The per-record callable (record scope, not batched)."""
        if self.instance is not None:
            return self.instance  # type: ignore[no-any-return]
        target = self.evaluator.target
        return _with_params(target, self.params) if self.params else target

    def batch_fn(self) -> Callable[[list[Any]], Any] | None:
        """The batched callable, or None when the evaluator works one record at a time."""
        if self.instance is not None:
            method = getattr(self.instance, "evaluate_batch", None)
            return method if callable(method) else None
        if not self.manifest.batchable:
            return None
        return _with_params(self.evaluator.target, self.params)

    def manifest_entry(self) -> dict[str, Any]:
        """What a run's manifest records of this evaluator: name, ref, version, params, and
        for code loaded by reference its origin (file and sha256, or module)."""
        entry: dict[str, Any] = {
            "name": self.name,
            "ref": self.ref,
            "version": self.manifest.version,
            "params": self.params,
        }
        if self.evaluator.source is not None:
            entry["source"] = dict(self.evaluator.source)
        return entry

    def spec(self) -> dict[str, Any]:
        """The full spec stored with every run: ref, version, params, instance name (and the
        code's origin for an evaluator loaded from a file or module)."""
        spec: dict[str, Any] = {"name": self.name, "ref": self.ref, "params": dict(self.params)}
        if self.evaluator.source is not None:
            spec["source"] = dict(self.evaluator.source)
        return spec


def _with_params(target: Callable[..., Any], params: dict[str, Any]) -> Callable[[Any], Any]:
    """``target`` with ``params`` bound, as a coroutine function when it is one."""
    if inspect.iscoroutinefunction(target):

        async def bound_async(arg: Any) -> Any:
            return await target(arg, **params)

        return bound_async
    return lambda arg: target(arg, **params)


@overload
def evaluator(target: T, /) -> Evaluator: ...


@overload
def evaluator(
    *,
    name: str | None = ...,
    version: str = ...,
    scope: Scope | str = ...,
    requires: Iterable[str] = ...,
    outputs: Iterable[OutputSpec | str] | None = ...,
    output: OutputType | None = ...,
    batch: bool = ...,
    description: str | None = ...,
    example: str = ...,
    pack: str = ...,
) -> Callable[[Any], Evaluator]: ...


def evaluator(
    target: Any = None,
    /,
    *,
    name: str | None = None,
    version: str = "0.0.0",
    scope: Scope | str = Scope.RECORD,
    requires: Iterable[str] = ("output",),
    outputs: Iterable[OutputSpec | str] | None = None,
    output: OutputType | None = None,
    batch: bool = False,
    description: str | None = None,
    example: str = "",
    pack: str = "",
) -> Any:
    """Declare an evaluator. See the module docstring for the function and class forms.

    Args:
        name: ``namespace/name`` or ``name`` (namespace ``local``); defaults to the function
            name with ``_`` → ``-``.
        version: semantic version; bump it whenever scores could change.
        scope: ``record`` or ``dataset`` (``span``, ``session``, ``comparative`` are declared
            but not runnable yet).
        requires: record fields a record must hold to be judged (else SKIPPED with a reason).
        outputs: the metrics it emits; a string is a metric name of type ``output``.
        output: the type of the single metric when ``outputs`` is not given.
        batch: the function takes and returns lists.
        description: one line for the catalog; defaults to the docstring's first line.
        example: a runnable example shown by ``evalsi catalog show``.
        pack: the pack it belongs to (built-ins only).

    Example:
        >>> @evaluator(name="acme/non-empty", version="1.0.0")
        ... def non_empty(record):
        ...     return bool(record.output.as_text().strip())
        >>> non_empty.ref
        'acme/non-empty@1.0.0'
    """

    def wrap(obj: Any) -> Evaluator:
        kind, needs = Scope(scope), tuple(requires)
        if not callable(obj):
            raise TypeError(f"@evaluator needs a function or a class, got {obj!r}")
        raw_name = name or obj.__name__.replace("_", "-").lower()
        ref = parse_ref(raw_name if "/" in raw_name else f"local/{raw_name}")
        ref = type(ref)(ref.namespace, ref.name, version)
        for field in needs:
            if field in RECORD_FIELDS or (field.startswith("metadata.") and len(field) > 9):
                continue
            if field.startswith("usage.") and field[6:] in USAGE_FIELDS:
                continue
            known = ", ".join(RECORD_FIELDS)
            usage = ", ".join(f"usage.{u}" for u in USAGE_FIELDS)
            raise TypeError(
                f"{ref}: requires names an unknown record field {field!r} (known: {known}, "
                f"{usage}, metadata.<key>)"
            )
        is_class = inspect.isclass(obj)
        if kind is Scope.DATASET and not (
            is_class
            and callable(getattr(obj, "map", None))
            and callable(getattr(obj, "reduce", None))
        ):
            raise TypeError(f"{ref}: a dataset-scope evaluator is a class with map() and reduce()")
        # The first positional parameter is the record (function) or self (class): not a param.
        params = params_from_signature(obj.__init__ if is_class else obj, skip_first=True)
        specs = _outputs(ref.name, outputs, output)
        doc = inspect.getdoc(obj) or ""
        manifest = EvaluatorManifest(
            ref=ref,
            scope=kind,
            requires=needs,
            outputs=specs,
            params_schema=params_schema(params),
            description=description if description is not None else doc.split("\n\n")[0].strip(),
            example=example,
            pack=pack,
            batchable=batch or (is_class and callable(getattr(obj, "evaluate_batch", None))),
        )
        return Evaluator(obj, manifest, params)

    return wrap(target) if target is not None else wrap


def _outputs(
    default_name: str, outputs: Iterable[OutputSpec | str] | None, output: OutputType | None
) -> tuple[OutputSpec, ...]:
    if outputs is None:
        if output is None:
            return ()
        rng = (0.0, 1.0) if output == "passed" else None
        return (OutputSpec(default_name, output, rng),)
    return tuple(
        o if isinstance(o, OutputSpec) else OutputSpec(o, output or "number") for o in outputs
    )
