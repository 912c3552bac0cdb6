"""The error reference, docs/errors.md, generated from `asyncsession.exceptions` itself.

The part between ``<!-- generated:start -->`` and ``<!-- generated:end -->`` is the tree of
every public error class (multiple bases shown), each class's one-line docstring, the HTTP
status the FastAPI example answers it with (its own table, `ERROR_STATUSES`), the exit code the
`asyncsession` command line gives it (computed by the CLI's own mapping,
`asyncsession.cli._errors.failure_of`) and what a user should do (`ADVICE` below). Errors of
private classes that users meet under public names (the MongoDB memory store's outage error is
both a `MemoryStoreError` and a `StorageUnavailable`) are shown by what they are (`HIDDEN`
below) and what users catch them as, never by their private names. An error that never reaches
the caller (`NEVER_RAISED`) shows "—" as its HTTP status and exit code.

Run `python tests/errors_page.py` after changing an error class; `tests/test_docs_errors.py`
fails while the page is out of date.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType

from pymongo.errors import OperationFailure, ServerSelectionTimeoutError

import asyncsession
from asyncsession import exceptions
from asyncsession._pymongo_errors import storage_errors
from asyncsession.cli._errors import failure_of

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "errors.md"
EXAMPLE = ROOT / "examples" / "fastapi_app.py"
START = "<!-- generated:start: run python tests/errors_page.py to update -->\n"
END = "<!-- generated:end -->\n"
BASE = exceptions.AsyncSessionError
CLI_URI = "mongodb://db:27017"

ADVICE: dict[str, str] = {
    "AsyncSessionError": "Catch it to handle every error of ours in one place.",
    "UsageError": "Fix the call: the message names the argument and what it expected. "
    "Retrying cannot help.",
    "RequestIdReused": "Answer 422: a retry must send the same message, a new request a new "
    "request id.",
    "UnknownToolCall": "Answer 422: send results only for calls the model made, and decisions "
    "only for the calls `pending_approvals` listed; `.call_ids` names the others.",
    "AccessDenied": "Answer 403 (or 404, to hide that the session exists). Retrying as the "
    "same user cannot help.",
    "TurnInProgress": "Answer 409 with `Retry-After: error.retry_after`; the retry runs then, "
    "or gets the stored reply of its request.",
    "SessionNotFound": "Create the session first, or answer 404.",
    "SessionExists": "Use the session that exists (`find_by_id`), or choose another id.",
    "EventIdConflict": "Event ids are unique across sessions: let the store choose them, or "
    "derive them from the session id too.",
    "EventTooLarge": "Store less in one event (keep large payloads elsewhere and store a "
    "reference); `.size` and `.limit` are in bytes.",
    "StorageError": "Log it with its cause (the driver's error); retry if the operation may "
    "be repeated.",
    "StorageUnavailable": "Answer 503 and retry later; retry a write with the same event ids "
    "(`event_id=`, `event_ids=`), so a write that did land is not stored twice.",
    "CompactionError": "Log it: the log is unchanged, and the next compaction tries again.",
    "EncryptionError": "Log it with its cause: check that the key service can be reached and "
    "that the master key is the one the content was encrypted under.",
    "ContentErased": "The user was erased: treat their content as gone (answer 410). If nobody "
    "was erased, check the key vault namespace of the setting.",
    "ChatError": "Look at `.status_code`: retry 429 and 5xx with a backoff, fix the request "
    "for other 4xx; retry a stream that broke off (no status).",
    "ChatTimeout": "Retry, or give the OpenAI client a longer timeout.",
    "ToolLoopLimitExceeded": "Raise `max_rounds`, or look at what the tools answer: the "
    "model kept asking for more.",
    "ToolError": "Raise it in a tool to send the model an error text; it never reaches you.",
    "MemoryStoreError": "Act on `.reason`: `conflict`: read the file again and retry; "
    "`not_found`/`exists`: the path is free or taken; `too_large`: write less or raise the "
    "limit; `backend`: log the cause and retry later. The memory tools send the message to "
    "the model instead.",
}


HIDDEN: dict[str, str] = {
    "asyncsession.memory.mongo._MemoryStoreUnavailable": "the MongoDB memory store's outage error",
    "asyncsession.encryption._keys._KeyVaultUnavailable": "the key vault's outage error",
}
"""What each private error class is, in the reader's words, by its qualified name."""

NEVER_RAISED: frozenset[str] = frozenset({"ToolError"})
"""Public errors the library catches itself before they reach the caller."""


@dataclass(frozen=True, slots=True)
class Hidden:
    """A private error class users meet: what they catch it as."""

    cls: type[BaseException]
    public: tuple[type[BaseException], ...]  # its public error bases, in base order

    @property
    def what(self) -> str:
        """What the class is, in the reader's words (`HIDDEN`)."""
        return HIDDEN[f"{self.cls.__module__}.{self.cls.__qualname__}"]


def public_errors() -> list[type[BaseException]]:
    """Every public error class, in `asyncsession.exceptions.__all__` order."""
    return [getattr(exceptions, name) for name in exceptions.__all__]


def _import_all() -> None:
    """Import every module of the package, so every error subclass is defined."""
    for info in pkgutil.walk_packages(asyncsession.__path__, "asyncsession."):
        if info.name != "asyncsession.__main__":
            importlib.import_module(info.name)


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def hidden_errors() -> list[Hidden]:
    """The error classes defined outside `asyncsession.exceptions` (all private), sorted."""
    _import_all()
    public = set(public_errors())
    found = {
        cls
        for cls in _subclasses(BASE)
        if cls not in public and cls.__module__.startswith("asyncsession")
    }
    return sorted(
        (Hidden(cls, tuple(b for b in cls.__bases__ if b in public)) for cls in found),
        key=lambda hidden: (hidden.cls.__module__, hidden.cls.__qualname__),
    )


def _public_parent(cls: type[BaseException]) -> type[BaseException] | None:
    """The base a public class hangs under in the tree: its first base of ours."""
    return next((b for b in cls.__bases__ if issubclass(b, BASE)), None)


def _other_bases(cls: type[BaseException]) -> list[str]:
    parent = _public_parent(cls)
    return [b.__name__ for b in cls.__bases__ if b is not parent and b is not Exception]


def _summary(cls: type[BaseException]) -> str:
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def _dummy(annotation: str) -> object:
    if annotation.startswith("Iterable"):
        return ("event-1",)
    return {"int": 1, "float": 1.0}.get(annotation.split(" |")[0], "x")


def sample(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` as the library raises it: a store error through the store's own
    translation of a driver error (an outage chained to the driver's connection failure)."""
    if issubclass(cls, exceptions.StorageUnavailable):
        return _translated(ServerSelectionTimeoutError("no server answered"))
    if cls is exceptions.StorageError:
        return _translated(OperationFailure("refused"))
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for parameter in parameters:
        if parameter.default is not inspect.Parameter.empty:
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            if not args:
                args.append("x")
            continue
        value = _dummy(str(parameter.annotation))
        if parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


def _translated(driver_error: Exception) -> BaseException:
    try:
        with storage_errors("read the session"):
            raise driver_error
    except exceptions.StorageError as error:
        return error
    raise AssertionError("storage_errors translated nothing")  # pragma: no cover


@cache
def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_errors_page_example", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def http_status(cls: type[BaseException]) -> int:
    """The HTTP status the FastAPI example answers an error of ``cls`` with: the first match
    in its `ERROR_STATUSES`, else 500."""
    statuses: tuple[tuple[type[BaseException], int], ...] = _example().ERROR_STATUSES
    error = sample(cls)
    return next((status for kind, status in statuses if isinstance(error, kind)), 500)


def exit_code(cls: type[BaseException]) -> int | None:
    """The exit code the command line gives an error of ``cls``, by the CLI's own mapping."""
    failure = failure_of(sample(cls), uri=CLI_URI, timeout=2)
    return None if failure is None else failure.code


def _tree() -> list[str]:
    hidden = hidden_errors()
    children: dict[type[BaseException] | None, list[type[BaseException]]] = {}
    for cls in public_errors():
        children.setdefault(None if cls is BASE else _public_parent(cls), []).append(cls)
    lines: list[str] = []

    def label(cls: type[BaseException]) -> str:
        others = _other_bases(cls)
        return cls.__name__ + (f" (also {', '.join(others)})" if others else "")

    def walk(cls: type[BaseException], prefix: str) -> None:
        kids: list[tuple[str, type[BaseException] | None]] = [
            (label(kid), kid) for kid in children.get(cls, [])
        ]
        for found in hidden:
            if cls in found.public:
                also = [b.__name__ for b in found.public if b is not cls]
                text = f"· {found.what}" + (f" (also a {', '.join(also)})" if also else "")
                kids.append((text, None))
        for index, (text, kid) in enumerate(kids):
            last = index == len(kids) - 1
            lines.append(f"{prefix}{'└── ' if last else '├── '}{text}")
            if kid is not None:
                walk(kid, prefix + ("    " if last else "│   "))

    lines.append(label(BASE))
    walk(BASE, "")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_block() -> str:
    """The generated part of the page, markers included."""
    out = [START, "\n", "```text\n", *(f"{line}\n" for line in _tree()), "```\n", "\n"]
    out += [
        "| Error | Bases | What it means | HTTP | CLI exit | What to do |\n",
        "|---|---|---|---|---|---|\n",
    ]
    for cls in public_errors():
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__ if b is not Exception)
        code = None if cls.__name__ in NEVER_RAISED else exit_code(cls)
        shown = "—" if code is None else f"`{code}`"
        status = "—" if cls.__name__ in NEVER_RAISED else f"`{http_status(cls)}`"
        advice = ADVICE[cls.__name__]
        row = [f"`{cls.__name__}`", bases or "—", _summary(cls), status, shown, advice]
        out.append("| " + " | ".join(_cell(cell) for cell in row) + " |\n")
    hidden = hidden_errors()
    if hidden:
        out += ["\n", "Errors you meet under more than one public name:\n", "\n"]
        for found in hidden:
            names = " and ".join(f"`{b.__name__}`" for b in found.public)
            what = found.what[0].upper() + found.what[1:]
            out.append(f"- {what} is both {names}: catch it as either.\n")
    out += ["\n", END]
    return "".join(out)


def generated_part(text: str) -> str:
    """The generated part of ``text``, markers included ("" when the markers are missing)."""
    if START not in text or END not in text:
        return ""
    start = text.index(START)
    return text[start : text.index(END, start) + len(END)]


def write() -> None:
    """Rewrite the generated part of docs/errors.md from the package."""
    text = PAGE.read_text(encoding="utf-8")
    current = generated_part(text)
    if not current:
        sys.exit(f"{PAGE} has no generated part: add the markers {START.strip()} / {END.strip()}")
    PAGE.write_text(text.replace(current, render_block()), encoding="utf-8")


if __name__ == "__main__":
    write()
