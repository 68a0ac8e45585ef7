"""Per-call machinery of the runner: fetch the definition from the host,
compile and run the neuron source, and turn what happened into the tool
world's records.

Every export call goes through :func:`call`. It
1. asks the host for the neuron's definition (``neuron-host.definition``);
2. prepares the call: ``sys.stdout``/``sys.stderr`` become a capture bounded by
   the call's output cap, ``os.environ`` is refilled from the call's WASI
   environment (only its ``env:`` grants), ``random`` is reseeded (the build
   snapshot would otherwise give every instance the same sequence), and
   ``capsaga.inputs``/``capsaga.scratch_dir`` are set;
3. loads the definition's bytecode (``code``, made by :func:`compile_neuron`
   in an earlier instance), or compiles the source when there is none (a
   ``SyntaxError`` becomes ``invalid-args`` naming the line), and runs it: a
   module's ``execute``/``dry_run``/``compensate``, or a script's top-level
   code;
4. encodes the result as JSON, refusing more than the output cap
   (``quota-exceeded``), or maps the exception to a ``tool-error``.

Each step touches as little of the interpreter as it can: every page of the
snapshot a call writes is copied for that instance by the host (copy on
write), which is most of what a neuron call costs.
"""

import builtins
import errno
import json
import linecache
import marshal
import os
import random
import sys
import traceback
import types
from datetime import date, datetime, time as dtime
from decimal import Decimal
from fractions import Fraction

from componentize_py_types import Err
from wit_world.imports import capsaga_tool_types as wt
from wit_world.imports import environment, preopens
from wit_world.imports import log as wit_log
from wit_world.imports import neuron_host

import capsaga
from capsaga import CallContext, ToolError, ToolOutput

#: Printed text forwarded to the host's log after a neuron call, characters.
LOG_STDOUT_CHARS = 16 * 1024
#: Printed text kept in an error's details, characters (the end of it).
ERROR_STDOUT_CHARS = 2000
#: Frames of the neuron's own source kept in an error's traceback.
TRACEBACK_FRAMES = 8
#: WASI's ENOTCAPABLE: a path outside every preopen, or a right not granted.
WASI_ENOTCAPABLE = 76

_KINDS = {
    "invalid-args": wt.ErrorKind.INVALID_ARGS,
    "not-found": wt.ErrorKind.NOT_FOUND,
    "permission-denied": wt.ErrorKind.PERMISSION_DENIED,
    "network-error": wt.ErrorKind.NETWORK_ERROR,
    "external-error": wt.ErrorKind.EXTERNAL_ERROR,
    "quota-exceeded": wt.ErrorKind.QUOTA_EXCEEDED,
    "unsupported": wt.ErrorKind.UNSUPPORTED,
    "timeout": wt.ErrorKind.TIMEOUT,
    "unrevertible": wt.ErrorKind.UNREVERTIBLE,
    "unknown": wt.ErrorKind.UNKNOWN,
}
_LEVELS = {
    "trace": wit_log.Level.TRACE,
    "debug": wit_log.Level.DEBUG,
    "info": wit_log.Level.INFO,
    "warn": wit_log.Level.WARN,
    "error": wit_log.Level.ERROR,
}

_HINT_JSON = (
    "return only JSON values: dicts with string keys, lists, strings, finite numbers, "
    "booleans and None (sets, dates and decimals are converted; bytes are not)"
)


def log(level_name, message):
    """Send ``message`` to the host's log of this call."""
    wit_log.log(_LEVELS.get(level_name, wit_log.Level.INFO), str(message))


def granted_dirs():
    """The call's preopened directories (absolute guest paths)."""
    dirs = []
    for desc, path in preopens.get_directories():
        dirs.append(path)
        desc.__exit__(None, None, None)
    return dirs


class Capture:
    """``sys.stdout`` and ``sys.stderr`` of one call. Keeps at most ``cap``
    characters; a write past it raises ``quota-exceeded`` (and so does the
    call, even if the neuron catches that)."""

    encoding = "utf-8"
    errors = "strict"

    def __init__(self, cap):
        self.cap = cap
        self.parts = []
        self.size = 0
        self.overflow = False

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        n = len(s)
        if self.size + n > self.cap:
            keep = self.cap - self.size
            if keep > 0:
                self.parts.append(s[:keep])
                self.size = self.cap
            self.overflow = True
            raise self.error()
        self.parts.append(s)
        self.size += n
        return n

    def error(self):
        return ToolError.quota_exceeded(
            f"the neuron printed more than {self.cap} bytes, the call's output cap",
            llm_hint="print less (a summary, not every row), or return the data instead of printing it",
        )

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def writable(self):
        return True

    def text(self):
        return "".join(self.parts)


class Scope:
    """What one call changes in the interpreter, and puts back at the end."""

    def __init__(self, d):
        self.d = d
        self.filename = f"<neuron {d.meta.name}>"
        self.capture = Capture(max(0, int(d.max_output_bytes)))
        self.namespace = None
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = sys.stderr = self.capture
        env = environment.get_environment()
        if env or os.environ:
            os.environ.clear()
            os.environ.update(dict(env))
        random.seed()
        capsaga.inputs = {f.name: f.path for f in d.inputs}
        capsaga.scratch_dir = d.scratch_dir

    def close(self):
        sys.stdout, sys.stderr = self._saved
        self.namespace = None


def _context(ctx):
    return CallContext(
        saga_id=ctx.saga_id,
        step_seq=ctx.step_seq,
        idempotency_key=ctx.idempotency_key,
        deadline_ms=ctx.deadline_ms,
        dry_run=ctx.dry_run,
    )


def _output_from_wit(o):
    try:
        data = json.loads(o.data) if o.data else None
    except ValueError:
        data = o.data
    return ToolOutput(data=data, effects=list(o.effects), summary=o.summary, next_hint=o.next_hint)


def call(op, ctx, args_json, output=None):
    """Run export ``op`` (``execute``, ``dry-run`` or ``compensate``).

    Returns a WIT ``tool-output`` (``None`` for compensate); raises
    ``Err(tool-error)``, which componentize-py returns as the result's error.
    """
    d = neuron_host.definition()
    scope = Scope(d)
    try:
        value = _dispatch(op, d, scope, _context(ctx), args_json, output)
        if scope.capture.overflow:
            raise scope.capture.error()
        result = None if op == "compensate" else _encode(value, d)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a tool-error
        if isinstance(exc, MemoryError):
            exc.__traceback__ = None  # free the neuron's frames before building the error
            scope.namespace = None
        err = classify(exc, scope)
        raise Err(_wit_error(err)) from None
    finally:
        scope.close()
        try:
            _forward_prints(d, scope)
        except Exception:  # noqa: BLE001 - losing a log line must not change the result
            pass
    return result


def _forward_prints(d, scope):
    if d.kind != neuron_host.SourceKind.MODULE or not scope.capture.size:
        return
    text = scope.capture.text()
    more = len(text) - LOG_STDOUT_CHARS
    if more > 0:
        text = text[:LOG_STDOUT_CHARS] + f"\n[... {more} more characters]"
    log("info", f"printed by the neuron:\n{text}")


def _dispatch(op, d, scope, ctx, args_json, output):
    try:
        args = json.loads(args_json) if args_json.strip() else {}
    except ValueError as e:
        raise ToolError.invalid_args(f"the arguments are not JSON: {e}") from None
    if d.kind == neuron_host.SourceKind.SCRIPT:
        return _run_script(op, d, scope, ctx, args)
    ns = _load(d, scope, "neuron")
    meta = d.meta
    if op == "execute":
        return _invoke(_entry(ns, "execute", scope), ctx, args)
    if op == "dry-run":
        if callable(ns.get("dry_run")):
            return _invoke(ns["dry_run"], ctx, args)
        if not meta.has_side_effects:
            return _invoke(_entry(ns, "execute", scope), ctx, args)
        raise ToolError.unsupported(
            f"{meta.name} has side effects and cannot preview them (it defines no dry_run)",
            llm_hint="call the tool for real if the operator allows it, or use another tool",
        )
    if op == "compensate":
        if callable(ns.get("compensate")):
            _invoke(ns["compensate"], ctx, args, _output_from_wit(output))
            return None
        if not meta.has_side_effects:
            return None
        raise ToolError.unrevertible(
            f"{meta.name} has side effects and defines no compensate: its effect cannot be undone",
        )
    raise ToolError.unsupported(f"unknown operation {op}")


def _run_script(op, d, scope, ctx, args):
    if op == "dry-run":
        raise ToolError.unsupported(
            "a code_run script cannot preview its effect",
            llm_hint="the host shows the code and its inputs for approval instead",
        )
    if op == "compensate":
        return None
    ns = None
    try:
        ns = _load(d, scope, "__main__", {"args": args, "ctx": ctx})
    except SystemExit as e:
        if e.code not in (None, 0):
            raise
        ns = scope.namespace or {}
    return {"result": ns.get("result"), "stdout": scope.capture.text()}


def _compile(source, filename, d=None):
    """``source`` compiled for ``filename``; raises ``invalid-args`` when it
    is not Python (``d``, when given, names the neuron in the message)."""
    try:
        return compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as e:
        raise _syntax_error(e, d, filename) from None
    except ValueError as e:  # NUL bytes in the source
        raise ToolError.invalid_args(
            f"the neuron source cannot be compiled: {e}",
            llm_hint="submit plain Python 3 source text",
        ) from None


def _bytecode(d, filename):
    """The definition's bytecode as a code object, or ``None`` when it has
    none, it does not load, or it was made for another name."""
    if d.code is None:
        return None
    try:
        code = marshal.loads(d.code)
    except Exception:  # noqa: BLE001 - any failure means: compile the source
        return None
    if type(code) is not types.CodeType or code.co_filename != filename:
        return None
    return code


def compile_neuron(name, source):
    """The ``compile-neuron`` export: ``source`` compiled under the name
    ``name`` (as :class:`Scope` names it), serialized with ``marshal``. Runs
    none of it. Raises ``Err(tool-error)``: ``invalid-args`` for a source
    that is not Python, ``quota-exceeded`` or ``unknown`` when the compiler
    itself fails (too deep, out of memory)."""
    try:
        return marshal.dumps(_compile(source, f"<neuron {name}>"))
    except ToolError as e:
        raise Err(_wit_error(e)) from None
    except MemoryError:
        raise Err(_wit_error(ToolError.quota_exceeded("the compiler ran out of memory"))) from None
    except RecursionError as e:
        raise Err(_wit_error(ToolError.quota_exceeded(f"the source is nested too deeply: {e}"))) from None
    except Exception as e:  # noqa: BLE001 - every failure becomes a tool-error
        raise Err(_wit_error(ToolError.unknown(f"{type(e).__name__}: {e}"))) from None


def _load(d, scope, name, extra=None):
    """Load (or compile) the source and run its top level in a fresh
    namespace."""
    code = _bytecode(d, scope.filename) or _compile(d.source, scope.filename, d)
    lines = d.source.splitlines(True)
    linecache.cache[scope.filename] = (len(d.source), None, lines, scope.filename)
    ns = {"__name__": name, "__builtins__": builtins, "__file__": scope.filename}
    if extra:
        ns.update(extra)
    scope.namespace = ns
    exec(code, ns)
    return ns


def _syntax_error(e, d, filename):
    where = f"line {e.lineno}" if e.lineno else "the source"
    if e.lineno and e.offset:
        where += f", column {e.offset}"
    who = d.meta.name if d is not None else filename.removeprefix("<neuron ").removesuffix(">")
    return ToolError.invalid_args(
        f"the source of {who} is not valid Python ({where}: {e.msg})",
        llm_hint="fix the syntax and submit the corrected source; the runner expects Python 3 "
        "defining execute(args) (and optionally dry_run, compensate)",
        details={"line": e.lineno, "column": e.offset, "text": (e.text or "").rstrip("\n")[:500]},
    )


def _entry(ns, name, scope):
    fn = ns.get(name)
    if callable(fn):
        return fn
    raise ToolError.invalid_args(
        f"the source of {scope.d.meta.name} defines no function {name}(args)",
        llm_hint=f"define `def {name}(args):` at the top level; it receives the arguments as a dict "
        "and returns a JSON value",
    )


def _invoke(fn, ctx, *args):
    """Call ``fn(*args)``, with ``ctx`` appended when it takes one more
    positional parameter."""
    code = getattr(fn, "__code__", None)
    if code is not None:
        takes = code.co_argcount - (1 if hasattr(fn, "__self__") else 0)
        if takes > len(args) or code.co_flags & 0x04:  # CO_VARARGS
            return fn(*args, ctx)
    return fn(*args)


def _json_default(o):
    if isinstance(o, (set, frozenset)):
        try:
            return sorted(o)
        except TypeError:
            return list(o)
    if isinstance(o, (datetime, date, dtime)):
        return o.isoformat()
    if isinstance(o, (Decimal, Fraction)):
        return float(o)
    raise TypeError(f"a value of type {type(o).__name__} is not JSON")


#: The encoder of every result, made at build time (``json.dumps`` with these
#: options would make a new one in every call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_json_default, separators=(",", ":"))


def _over_cap(data, cap, budget=100_000):
    """True when the JSON text of ``data`` certainly has more than ``cap``
    characters, judged from the lengths of its strings, visiting at most
    ``budget`` values (encoding 100 MB only to refuse it would take seconds)."""
    total = 0
    stack = [data]
    while stack and budget > 0:
        budget -= 1
        v = stack.pop()
        if isinstance(v, str):
            total += len(v) + 2
        elif isinstance(v, dict):
            total += 2 + len(v)
            for k, x in v.items():
                total += len(k) + 3 if isinstance(k, str) else 1
                stack.append(x)
        elif isinstance(v, (list, tuple)):
            total += 2 + len(v)
            stack.extend(v)
        else:
            total += 1
        if total > cap:
            return True
    return False


def _cap_error(d, size, cap):
    return ToolError.quota_exceeded(
        f"{d.meta.name} returned {size} bytes or more of output, over the call's cap of {cap} bytes",
        llm_hint="return less data: aggregate, filter or page the result",
    )


def _encode(value, d):
    if isinstance(value, ToolOutput):
        data, effects, summary, next_hint = value.data, value.effects, value.summary, value.next_hint
    else:
        data, effects, summary, next_hint = value, [], "", None
    cap = int(d.max_output_bytes)
    if _over_cap(data, cap):
        raise _cap_error(d, cap + 1, cap)
    try:
        text = _ENCODER.encode(data)
    except (TypeError, ValueError) as e:
        raise ToolError.unknown(f"{d.meta.name} returned a value that is not JSON: {e}", llm_hint=_HINT_JSON) from None
    effects = [str(x) for x in (effects or [])]
    summary = str(summary or "")
    next_hint = None if next_hint is None else str(next_hint)
    # Characters first (no copy): UTF-8 never has fewer bytes than characters.
    size = len(text) + sum(len(x) for x in effects) + len(summary) + len(next_hint or "")
    if size <= cap:
        size = len(text.encode()) + sum(len(x.encode()) for x in effects)
        size += len(summary.encode()) + len((next_hint or "").encode())
    if size > cap:
        raise _cap_error(d, size, cap)
    return wt.ToolOutput(data=text, effects=effects, next_hint=next_hint, summary=summary)


def _inside(path, dirs):
    p = os.path.normpath(os.path.join("/", os.fspath(path)))
    for d in dirs:
        d = os.path.normpath(d)
        if p == d or p.startswith(d.rstrip("/") + "/"):
            return True
    return False


def _os_error(e):
    path = e.filename
    code = e.errno
    dirs = granted_dirs()
    granted = ", ".join(dirs) if dirs else "none (this call has no fs: grant)"
    shown = f"{path}: " if path is not None else ""
    details = {"path": None if path is None else str(path), "errno": code, "granted_dirs": dirs}
    msg = f"{shown}{e.strerror or e}"
    if code == errno.EROFS:
        return ToolError.permission_denied(
            msg,
            llm_hint="the directory is granted read-only here (or this is a dry run); writing is not allowed",
            details=details,
        )
    outside = path is not None and not isinstance(path, int) and not _inside(path, dirs)
    if outside or code in (errno.EACCES, errno.EPERM, WASI_ENOTCAPABLE):
        return ToolError.permission_denied(
            f"{shown}outside the directories granted to this neuron, or not allowed there",
            llm_hint=f"the neuron can only use files under the granted directories ({granted}); "
            "pass an absolute path inside one of them",
            details=details,
        )
    if code == errno.ENOENT:
        return ToolError.not_found(
            msg,
            llm_hint="no such file or directory; check the path (list the parent directory)",
            details=details,
        )
    if code in (errno.EEXIST, errno.EISDIR, errno.ENOTDIR, errno.ENOTEMPTY):
        return ToolError.invalid_args(msg, details=details)
    return ToolError.unknown(msg, details=details)


def _where(exc, filename):
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == filename]
    return frames[-TRACEBACK_FRAMES:]


def _bug(exc, scope):
    """``unknown``, naming the exception and where in the neuron it was raised."""
    name = type(exc).__name__
    try:
        text = str(exc)[:1000]
    except Exception:  # noqa: BLE001 - a hostile __str__
        text = "(unprintable)"
    at, tb = "", ""
    try:
        frames = _where(exc, scope.filename)
        if frames:
            f = frames[-1]
            at = f" (line {f.lineno}, in {f.name}: `{(f.line or '').strip()[:200]}`)"
        tb = "".join(traceback.format_list(frames))[-4000:] + f"{name}: {text}"
    except Exception:  # noqa: BLE001 - the error must be reported whatever happens here
        tb = f"{name}: {text}"
    return ToolError.unknown(
        f"{name}: {text}{at}",
        llm_hint="the neuron's code failed; fix the code or call it with other arguments",
        details={"exception": name, "traceback": tb},
    )


def classify(exc, scope):
    """The :class:`ToolError` for an exception raised by a call."""
    if isinstance(exc, ToolError):
        err = exc
    elif isinstance(exc, MemoryError):
        err = ToolError.quota_exceeded(
            "the neuron ran out of memory (the call's memory cap)",
            llm_hint="process the data in smaller pieces, or ask for a smaller input",
        )
    elif isinstance(exc, RecursionError):
        err = ToolError.quota_exceeded(
            f"the neuron recursed too deeply: {exc}",
            llm_hint="use a loop instead of deep recursion, or a smaller input",
        )
    elif isinstance(exc, ImportError):
        err = ToolError.unsupported(
            str(exc),
            llm_hint="use only the modules available in the runner (see the message); "
            "network access goes through capsaga.http",
            details={"module": exc.name},
        )
    elif isinstance(exc, OSError) and not isinstance(exc, (ConnectionError, TimeoutError)):
        err = _os_error(exc)
    elif isinstance(exc, SystemExit):
        err = ToolError.unknown(
            f"the neuron called exit ({exc.code!r})",
            llm_hint="return a value, or raise capsaga.ToolError to fail, instead of exiting",
        )
    else:
        err = _bug(exc, scope)
    stdout = scope.capture.text()
    if stdout and err.details is None:
        err.details = {}
    if stdout and isinstance(err.details, dict):
        err.details.setdefault("stdout", stdout[-ERROR_STDOUT_CHARS:])
    return err


def _wit_error(err):
    details = None
    if err.details is not None:
        try:
            details = json.dumps(err.details, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            details = json.dumps(str(err.details))
    return wt.ToolError(
        kind=_KINDS.get(err.kind, wt.ErrorKind.UNKNOWN),
        message=str(err.message),
        llm_hint=str(err.llm_hint),
        details=details,
        retriable=bool(err.retriable),
    )
