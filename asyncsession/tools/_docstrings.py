"""A function's docstring as a tool description and parameter descriptions, read by griffe.

Google, NumPy and Sphinx style are recognised: the docstring is read in each style and the
reading that finds the most sections wins (ties go to Google, the house style). Only the prose
before the first section and the parameter descriptions are used; the rest (``Returns:``,
``Raises:``, examples) is for developers, not for the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from griffe import Docstring, DocstringSection, DocstringSectionKind, Parser

__all__ = ["DescribedFunction", "describe"]

_STYLES: Final = (Parser.google, Parser.numpy, Parser.sphinx)


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedFunction:
    """What a docstring tells the model."""

    description: str
    """The prose before the first section, paragraphs kept."""
    parameters: dict[str, str] = field(default_factory=dict[str, str])
    """Each documented parameter's description, by parameter name."""


def _score(sections: list[DocstringSection]) -> tuple[bool, int]:
    has_parameters = any(s.kind is DocstringSectionKind.parameters for s in sections)
    return has_parameters, len(sections)


def describe(doc: str | None) -> DescribedFunction:
    """Read a docstring (already dedented, as `inspect.getdoc` returns it)."""
    if not doc or not doc.strip():
        return DescribedFunction(description="")
    # The leading line break lets a docstring open with its parameters section.
    docstring = Docstring(f"\n{doc}", lineno=1)
    # Each style in turn rather than griffe's style heuristics, which miss a docstring that
    # ends on its only Sphinx field. warnings=False: griffe would log every parameter that has
    # no type in the docstring, and here the types come from the signature.
    readings = [docstring.parse(style, warnings=False) for style in _STYLES]
    sections = max(readings, key=_score)  # max keeps the first of equals: Google
    description = ""
    parameters: dict[str, str] = {}
    for index, section in enumerate(sections):
        if section.kind is DocstringSectionKind.text and index == 0:
            description = str(section.value).strip()
        elif section.kind is DocstringSectionKind.parameters:
            for parameter in section.value:
                parameters[parameter.name.lstrip("*")] = str(parameter.description).strip()
    return DescribedFunction(description=description, parameters=parameters)
