"""Build-time lockdown of the runner's interpreter.

:func:`seal` runs once, when componentize-py pre-initialises the component
(it imports the app module and snapshots the interpreter's memory), so every
instance starts from its result:

- the modules of :data:`PRELOAD` are imported, so a neuron finds them warm;
- none of :data:`DENIED` may be loaded by then (the build fails otherwise);
- the import system is left with one finder, which refuses every name:
  only modules already imported exist (``sys.path`` is emptied, so no file
  of the host or of a granted directory is ever imported as code);
- ``os.environ`` is emptied (the runner refills it per call from the call's
  ``env:`` grants), and no bytecode is ever written;
- every object is frozen out of the garbage collector's reach (``gc.freeze``);
- every object is listed for the build's post-pass (``immortalize.py``), which
  makes it immortal: a call writes no reference counts to the snapshot.

This is about clear errors and a small surface, not the security boundary:
a neuron can undo any of it inside its own instance. What it still cannot do
is decided by the sandbox (WASI without sockets, preopens only from grants,
HTTP through the net guard) and holds whatever the Python code does.
"""

import sys

#: Modules pre-imported at build time: everything a neuron can import.
PRELOAD = (
    # text and data formats
    "json",
    "csv",
    "re",
    "string",
    "textwrap",
    "difflib",
    "html",
    "unicodedata",
    "base64",
    "binascii",
    "codecs",
    "io",
    "struct",
    "pprint",
    # numbers and statistics
    "math",
    "cmath",
    "statistics",
    "decimal",
    "fractions",
    "numbers",
    "random",
    # dates and times
    "datetime",
    "time",
    "calendar",
    "_strptime",
    # collections and functional tools
    "collections",
    "collections.abc",
    "itertools",
    "functools",
    "operator",
    "heapq",
    "bisect",
    "array",
    "copy",
    "dataclasses",
    "enum",
    "typing",
    "types",
    "abc",
    "contextlib",
    # hashing and compression
    "hashlib",
    "hmac",
    "secrets",
    "zlib",
    "gzip",
    "uuid",
    # files and URLs (files only under the preopened directories)
    "os",
    "os.path",
    "pathlib",
    "fnmatch",
    "glob",
    "shutil",
    "urllib.parse",
    "ipaddress",
    # diagnostics (and what traceback and linecache load lazily)
    "traceback",
    "linecache",
    "tokenize",
    "keyword",
    "warnings",
    "weakref",
    # componentize-py's bindings release resources through weakref.finalize,
    # which imports atexit on first use
    "atexit",
    # codecs looked up lazily by str.encode / bytes.decode
    "encodings.ascii",
    "encodings.latin_1",
    "encodings.utf_8_sig",
    "encodings.utf_16",
    "encodings.utf_32",
    "encodings.cp1252",
    "encodings.idna",
)

#: Modules that must not exist in the runner: network, processes, native
#: code, OS signals and terminals. Checked at build time, refused with a
#: specific message at run time.
DENIED = (
    "socket",
    "_socket",
    "ssl",
    "_ssl",
    "select",
    "selectors",
    "asyncio",
    "socketserver",
    "http.client",
    "urllib.request",
    "ftplib",
    "smtplib",
    "imaplib",
    "poplib",
    "webbrowser",
    "subprocess",
    "_posixsubprocess",
    "multiprocessing",
    "_multiprocessing",
    "concurrent",
    "ctypes",
    "_ctypes",
    "cffi",
    "mmap",
    "fcntl",
    "pty",
    "termios",
    "resource",
)

#: Top-level modules a neuron can import (set by :func:`seal`).
AVAILABLE = ()

# The runner's own modules, not offered to neurons in messages.
_INTERNAL = ("app", "wit_world", "componentize_py_types", "componentize_py_runtime", "componentize_py_async_support", "poll_loop")


def _denied(name):
    return any(name == d or name.startswith(d + ".") for d in DENIED)


class NoImport:
    """The only import finder left after :func:`seal`: every module that was
    not pre-imported is refused with a message saying what exists."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if _denied(name):
            msg = (
                f"module '{name}' does not exist for neurons: there are no sockets, "
                "subprocesses or native code in the sandbox (HTTP goes through capsaga.http)"
            )
        else:
            msg = (
                f"module '{name}' is not available in the neuron runner; "
                f"available: {', '.join(AVAILABLE)}"
            )
        raise ModuleNotFoundError(msg, name=name)

    @classmethod
    def invalidate_caches(cls):
        pass


def seal():
    """Pre-import :data:`PRELOAD`, check :data:`DENIED`, and close imports.

    Raises ``RuntimeError`` (failing the build) when a denied module was
    loaded by a pre-imported one.
    """
    global AVAILABLE
    import gc
    import importlib
    import os

    for name in PRELOAD:
        importlib.import_module(name)
    loaded = sorted(n for n in sys.modules if _denied(n))
    if loaded:
        raise RuntimeError(f"the runner must not contain these modules, but they were loaded: {loaded}")
    os.environ.clear()
    sys.dont_write_bytecode = True
    sys.path[:] = []
    sys.path_hooks[:] = []
    sys.path_importer_cache.clear()
    sys.meta_path[:] = [NoImport]
    # Everything loaded so far lives as long as the instance: move it to the
    # collector's permanent generation, so that a collection during a call
    # neither scans it nor writes to its pages (each first write to a page of
    # the snapshot is a copy-on-write fault in the host).
    import gc

    gc.collect()
    _mark_immortal(gc)
    gc.freeze()
    AVAILABLE = tuple(
        sorted(
            {
                n.partition(".")[0]
                for n in sys.modules
                if not n.startswith("_") and n.partition(".")[0] not in _INTERNAL
            }
        )
    )


#: Every object alive at the snapshot that is not immortal yet, kept alive
#: here so that none of them is freed before the snapshot is taken.
_KEEP = None

#: :data:`IMMORTAL_MARKER`, the number of objects, the address (``id``) of
#: each object in :data:`_KEEP` and the CRC-32 of those addresses (all
#: little-endian u32): read by the build's post-pass,
#: ``tools/neuron_runner/immortalize.py``.
_IMMORTAL = None

#: Starts :data:`_IMMORTAL`; the post-pass zeroes it once it has run.
IMMORTAL_MARKER = b"CAPSAGA-IMMORTALIZE-1\0"


def _mark_immortal(gc):
    """List every object of the snapshot for the build's post-pass, which
    sets each one's reference count to CPython's immortal value.

    Why: a call touches objects all over the snapshot's heap (modules,
    functions, code, strings), and each reference-count change writes to
    its page, which the host pays as a copy-on-write fault per page and per
    call. Immortal objects (PEP 683) are never counted, so those pages stay
    shared. Found: the objects the collector tracks, and everything they
    reach through objects it does not track (strings, tuples of constants,
    code). A call's instance is thrown away after it, so nothing is lost by
    never freeing them.
    """
    import struct
    import zlib

    global _KEEP, _IMMORTAL
    todo = gc.get_objects()
    alive = {}
    while todo:
        o = todo.pop()
        if id(o) in alive:
            continue
        alive[id(o)] = o
        # Tracked objects are all in the list already.
        todo.extend(r for r in gc.get_referents(o) if not gc.is_tracked(r) and id(r) not in alive)
    addrs = sorted(a for a, o in alive.items() if not sys._is_immortal(o))
    _KEEP = [alive[a] for a in addrs]
    listed = struct.pack(f"<{len(addrs)}I", *addrs)
    _IMMORTAL = (
        IMMORTAL_MARKER
        + struct.pack("<I", len(addrs))
        + listed
        + struct.pack("<I", zlib.crc32(listed))
    )
