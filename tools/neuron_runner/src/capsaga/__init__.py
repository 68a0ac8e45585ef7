"""capsaga: what a neuron's Python source may use, mirroring the Rust SDK (sdk/).

A neuron is Python source defining ``execute(args)`` (or ``execute(args, ctx)``),
and optionally ``dry_run`` and ``compensate``. ``args`` is a dict (already
checked by the host against the neuron's JSON Schema). A function returns any
JSON value (it becomes the output's ``data``) or a :class:`ToolOutput`, and
fails by raising :class:`ToolError`::

    import csv, statistics
    from capsaga import ToolError

    def execute(args):
        with open(args["path"], newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows:
            raise ToolError.invalid_args("the CSV has no rows",
                                         llm_hint="pass a CSV file with a header and data")
        values = [float(r[args["column"]]) for r in rows]
        return {"mean": statistics.fmean(values), "n": len(values)}

What exists inside the sandbox is what the operator granted, nothing else:
files only under the preopened directories (:func:`granted_dirs`), outgoing
HTTP only through :mod:`capsaga.http` (``wasi:http``, checked by the host's
net guard), ``os.environ`` holds only the call's ``env:`` grants. There are
no sockets, no subprocesses and no host environment; only the modules the
runner pre-imported at build time can be imported (:func:`available_modules`).
"""

from dataclasses import dataclass, field
from typing import Any, Optional

__all__ = [
    "ToolError",
    "ToolOutput",
    "Output",
    "CallContext",
    "ERROR_KINDS",
    "granted_dirs",
    "available_modules",
    "inputs",
    "scratch_dir",
    "trace",
    "debug",
    "info",
    "warn",
    "error",
]

#: The WIT ``error-kind`` names, in WIT order.
ERROR_KINDS = (
    "invalid-args",
    "not-found",
    "permission-denied",
    "network-error",
    "external-error",
    "quota-exceeded",
    "unsupported",
    "timeout",
    "unrevertible",
    "unknown",
)

#: The hint used when a ToolError gives none (the Rust SDK's default hints).
DEFAULT_HINTS = {
    "invalid-args": "fix the arguments so that they match the tool's argument schema, then call again",
    "not-found": "check the name or path; list the parent directory to see what exists",
    "permission-denied": "access was refused; use a path or resource inside what this tool was granted",
    "network-error": "a transient network failure; the same call may succeed if retried later",
    "external-error": "the remote service rejected the request; read the message and change the request",
    "quota-exceeded": "a size or quota limit was hit; ask for less (a smaller range, fewer items)",
    "unsupported": "the tool does not support this; try a different approach or another tool",
    "timeout": "the call ran out of time; try a smaller request, or retry later",
    "unrevertible": "the effect cannot be undone automatically; report it to the operator",
    "unknown": "an unexpected failure; do not repeat the same call unchanged",
}


def _kind_name(kind: str) -> str:
    k = str(kind).strip().lower().replace("_", "-")
    if k == "network":
        k = "network-error"
    elif k == "external":
        k = "external-error"
    return k if k in ERROR_KINDS else "unknown"


class ToolError(Exception):
    """A failure written for two readers: a human (``message``) and the model
    (``llm_hint``: what to try next). ``kind`` is a WIT ``error-kind`` name
    (``"invalid-args"``; ``"invalid_args"`` is accepted too; an unknown name
    becomes ``"unknown"``). ``details`` is any JSON value. ``retriable``
    defaults to True for network errors and timeouts, as in the Rust SDK.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        llm_hint: Optional[str] = None,
        details: Any = None,
        retriable: Optional[bool] = None,
    ):
        super().__init__(message)
        self.kind = _kind_name(kind)
        self.message = str(message)
        self.llm_hint = str(llm_hint) if llm_hint else DEFAULT_HINTS[self.kind]
        self.details = details
        self.retriable = (
            bool(retriable) if retriable is not None else self.kind in ("network-error", "timeout")
        )

    def __repr__(self) -> str:
        return f"ToolError({self.kind!r}, {self.message!r})"

    # One constructor per kind, as in the Rust SDK.
    @classmethod
    def invalid_args(cls, message, **kw):
        return cls("invalid-args", message, **kw)

    @classmethod
    def not_found(cls, message, **kw):
        return cls("not-found", message, **kw)

    @classmethod
    def permission_denied(cls, message, **kw):
        return cls("permission-denied", message, **kw)

    @classmethod
    def network(cls, message, **kw):
        return cls("network-error", message, **kw)

    @classmethod
    def external(cls, message, **kw):
        return cls("external-error", message, **kw)

    @classmethod
    def quota_exceeded(cls, message, **kw):
        return cls("quota-exceeded", message, **kw)

    @classmethod
    def unsupported(cls, message, **kw):
        return cls("unsupported", message, **kw)

    @classmethod
    def timeout(cls, message, **kw):
        return cls("timeout", message, **kw)

    @classmethod
    def unrevertible(cls, message, **kw):
        return cls("unrevertible", message, **kw)

    @classmethod
    def unknown(cls, message, **kw):
        return cls("unknown", message, **kw)


@dataclass
class ToolOutput:
    """What ``execute`` or ``dry_run`` returns when it says more than data:
    ``effects`` (human-readable, e.g. ``"wrote /w/a.txt (120 bytes)"``), a
    one-line ``summary`` (shown in approvals and logs) and ``next_hint``
    (``"validate"`` asks the host to move the saga to validation).
    ``compensate`` receives the output being undone in this form, with
    ``data`` parsed back from JSON.
    """

    data: Any = None
    effects: list = field(default_factory=list)
    summary: str = ""
    next_hint: Optional[str] = None


#: Alias of :class:`ToolOutput` (the Rust SDK calls it ``Output``).
Output = ToolOutput


@dataclass(frozen=True)
class CallContext:
    """Identity and limits of the call (WIT ``call-context``)."""

    saga_id: str
    step_seq: int
    idempotency_key: str
    #: Wall-clock deadline, milliseconds since the Unix epoch.
    deadline_ms: int
    #: True in a dry run: the host has removed write access.
    dry_run: bool

    def remaining_ms(self) -> Optional[int]:
        """Milliseconds left before the deadline (0 when passed), or None
        when the call has no deadline."""
        if not self.deadline_ms:
            return None
        import time

        return max(0, self.deadline_ms - int(time.time() * 1000))


#: Named input files of a ``code_run`` script: name -> absolute path
#: (empty for a neuron). Set by the runner at the start of every call.
inputs: dict = {}

#: Writable directory for a script's outputs (absolute path), or None.
scratch_dir: Optional[str] = None


def granted_dirs() -> list:
    """The directories preopened for this call (absolute paths), i.e. the
    call's ``fs:`` grants. Anything else does not exist for the neuron."""
    from . import _runtime

    return _runtime.granted_dirs()


def available_modules() -> list:
    """Names of the top-level modules a neuron can import (pre-imported when
    the runner was built; nothing else can be loaded at run time)."""
    from . import _lockdown

    return list(_lockdown.AVAILABLE)


def _log(level_name: str, message: str) -> None:
    from . import _runtime

    _runtime.log(level_name, message)


def trace(message: str) -> None:
    """Log ``message`` into the host's trace of this call (capped by the host)."""
    _log("trace", message)


def debug(message: str) -> None:
    """Log at debug level (see :func:`trace`)."""
    _log("debug", message)


def info(message: str) -> None:
    """Log at info level (see :func:`trace`)."""
    _log("info", message)


def warn(message: str) -> None:
    """Log at warn level (see :func:`trace`)."""
    _log("warn", message)


def error(message: str) -> None:
    """Log at error level (see :func:`trace`)."""
    _log("error", message)
