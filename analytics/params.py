"""Analysis parameters that document themselves: one place per knob.

A parameter record is a frozen dataclass whose fields are declared with :func:`knob`. Each knob
carries its help text, unit and bounds, so that

* :func:`check` validates a record (ValueError naming the first bad field and its range),
* :func:`add_arguments` generates the CLI flags (``--field-name``) with that help and those bounds,
* :func:`help_of` gives the widget help on a page,
* :func:`from_namespace` builds the record back from parsed CLI arguments,

and the help is written once (issue "one road from data to answer", item 3).

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Demo:
...     n_gpus: int = knob(8, "GPUs in the pool", lo=1, hi=100_000)
...     share: float = knob(0.5, "inference share of the pool", lo=0.0, hi=1.0)
>>> check(Demo(n_gpus=0))
Traceback (most recent call last):
...
ValueError: n_gpus = 0 is out of range [1, 100000]: GPUs in the pool
>>> help_of(Demo, "share")
'inference share of the pool (0 to 1)'
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import numbers
from typing import Any

_META = "headroom_knob"


@dataclasses.dataclass(frozen=True)
class Knob:
    """Help, unit and bounds of one parameter.

    Attributes
    ----------
    help : one sentence, shown as CLI help and widget help
    unit : unit shown after the value (``""`` when dimensionless)
    lo, hi : inclusive bounds (``None``: unbounded on that side)
    lo_open, hi_open : make the bound exclusive
    choices : allowed values for a categorical knob
    flag : CLI flag name when it differs from ``--field-name``
    aliases : extra (hidden) CLI spellings
    cli : False keeps the knob off the CLI (set by the program, e.g. a seed list)
    """

    help: str
    unit: str = ""
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple | None = None
    flag: str | None = None
    aliases: tuple[str, ...] = ()
    cli: bool = True

    def range_text(self) -> str:
        """``[lo, hi]`` / ``(lo, hi]`` etc., or ``""`` when unbounded."""
        if self.choices is not None:
            return "one of " + ", ".join(map(str, self.choices))
        if self.lo is None and self.hi is None:
            return ""
        lo = "-inf" if self.lo is None else f"{self.lo:g}"
        hi = "inf" if self.hi is None else f"{self.hi:g}"
        left = "(" if self.lo_open or self.lo is None else "["
        right = ")" if self.hi_open or self.hi is None else "]"
        return f"{left}{lo}, {hi}{right}"

    def violates(self, value: Any) -> bool:
        """True when ``value`` (not None) lies outside the bounds or choices."""
        if self.choices is not None:
            return value not in self.choices
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        if not math.isfinite(float(value)):
            return True
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return True
        return self.hi is not None and (value >= self.hi if self.hi_open else value > self.hi)


def knob(default: Any, help: str, unit: str = "", lo: float | None = None,
         hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False,
         choices: tuple | None = None, flag: str | None = None, aliases: tuple[str, ...] = (),
         cli: bool = True) -> Any:
    """A dataclass field with its help, unit and bounds (see :class:`Knob`)."""
    meta = {_META: Knob(help, unit, lo, hi, lo_open, hi_open, choices, flag, aliases, cli)}
    if isinstance(default, (list, dict, set)):
        raise TypeError("knob defaults must be immutable (use a tuple)")
    return dataclasses.field(default=default, metadata=meta)


def knobs(cls_or_obj) -> dict[str, Knob]:
    """``{field name: Knob}`` of a parameter record (fields without a knob are left out)."""
    return {f.name: f.metadata[_META] for f in dataclasses.fields(cls_or_obj)
            if _META in f.metadata}


def help_of(cls_or_obj, name: str) -> str:
    """Widget / CLI help of one field: the help sentence, the unit and the accepted range.

    Raises
    ------
    KeyError
        If ``name`` is not a knob of the record.
    """
    k = knobs(cls_or_obj)[name]
    bits = [k.unit] if k.unit else []
    if k.choices is None and k.lo is not None and k.hi is not None and not (k.lo_open or k.hi_open):
        bits.append(f"{k.lo:g} to {k.hi:g}")
    elif k.range_text():
        bits.append(k.range_text())
    return k.help + (f" ({'; '.join(bits)})" if bits else "")


def check(obj) -> None:
    """Raise ValueError naming the first field of ``obj`` outside its bounds or choices.

    ``None`` values are accepted (they mean "not set" / "use the default rule").
    """
    for name, k in knobs(obj).items():
        value = getattr(obj, name)
        if value is not None and k.violates(value):
            raise ValueError(f"{name} = {value!r} is out of range {k.range_text()}: {k.help}")


def _flag(name: str, k: Knob) -> str:
    return k.flag or "--" + name.replace("_", "-")


def _scalar_type(default: Any, annotation: Any):
    text = str(annotation)
    if isinstance(default, bool) or text.startswith("bool"):
        return None
    if isinstance(default, int) or text.startswith("int"):
        return int
    if isinstance(default, float) or "float" in text:
        return float
    return str


def _checked(convert, k: Knob):
    """argparse ``type`` that converts a value and refuses one outside the knob's bounds."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {convert.__name__}") from exc
        if k.violates(value):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range {k.range_text()}")
        return value
    parse.__name__ = convert.__name__
    return parse


def add_arguments(parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = ()) -> None:
    """Add one ``--field-name`` flag per CLI knob of ``cls`` (default: the field default, so
    an unset flag leaves the record's default). A value outside the knob's bounds is refused
    by argparse (exit 2, the message gives the range). Booleans become ``--x / --no-x``."""
    for f in dataclasses.fields(cls):
        k = f.metadata.get(_META)
        if k is None or not k.cli or f.name in skip:
            continue
        flag = _flag(f.name, k)
        names = [flag, *k.aliases]
        text = help_of(cls, f.name).replace("%", "%%")  # argparse formats help with %
        typ = _scalar_type(f.default, f.type)
        if typ is None:
            parser.add_argument(*names, dest=f.name, default=f.default, help=text,
                                action=argparse.BooleanOptionalAction)
            continue
        checked = typ if k.choices is not None else _checked(typ, k)
        parser.add_argument(names[0], dest=f.name, type=checked, default=f.default,
                            choices=k.choices, help=text)
        for alias in k.aliases:
            parser.add_argument(alias, dest=f.name, type=checked, help=argparse.SUPPRESS)


def from_namespace(cls, ns: argparse.Namespace, **overrides):
    """Build ``cls`` from the CLI knobs found on ``ns`` (plus ``overrides``) and :func:`check`
    it. Raises ValueError from :func:`check`."""
    values = {name: getattr(ns, name) for name in knobs(cls) if hasattr(ns, name)}
    values.update(overrides)
    obj = cls(**values)
    check(obj)
    return obj
