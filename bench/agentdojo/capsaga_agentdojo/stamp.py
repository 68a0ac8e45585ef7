"""``components``: one capsaga tool component per AgentDojo tool, stamped
from the generic component (``bench/agentdojo/component``, built once by
``scripts/build-components --path bench/agentdojo/component``).

The generic component holds a 32 KiB region that starts with
``capsaga-agentdojo-tool-meta:v1:\\n`` followed by spaces. Stamping copies
the component and writes, in that region only, the tool's meta as JSON
(padded with spaces to the same length): name, description, argument
schema, side effects, risk, untrusted output, AgentDojo function, output and
error modes. Nothing else of the binary changes, so every copy is as valid as
the one built; each has its own content hash. Output:
``<out>/<suite>/<tool>.wasm`` (a tools directory per suite: a capsaga host
loads one suite's tools).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .catalog import CATALOG, REPO

MARKER = b"capsaga-agentdojo-tool-meta:v1:\n"
STAMP_LEN = 32 * 1024
GENERIC = REPO / "bench/agentdojo/component/target/wasm32-wasip2/release/agentdojo_tool.wasm"
OUT = REPO / "target/agentdojo/components"


class StampError(Exception):
    """The generic component or a meta cannot be stamped."""


#: Catalog field kinds and the label a component declares for them: what a
#: system assigned is trusted; what a third party wrote, or an echo of the
#: call's arguments, untrusted; the user's own records keep the output's
#: label (no field label).
FIELD_LABEL = {"system": "trusted", "third_party": "untrusted", "echo": "untrusted"}


def pointer(path: str) -> str | None:
    """The JSON Pointer (with ``*``) of a catalog output path (``$`` the
    whole, ``[]`` every item, ``{}`` keys, ``{}.value`` values), or None
    for the whole output and for object keys (no field of their own)."""
    if path == "$" or path == "{}":
        return None
    segs = []
    for part in path.split("."):
        if part == "[]" or part == "{}":
            segs.append("*")
        elif part.startswith("[]"):
            segs += ["*", part[2:]]
        elif part.startswith("{}"):
            segs += ["*", part[2:]]
        else:
            segs.append(part.replace("~", "~0").replace("/", "~1"))
    return "/" + "/".join(s for s in segs if s)


def field_labels(entry: dict[str, Any]) -> list[dict[str, str]]:
    """The field labels a component declares for a catalog entry."""
    out = []
    for path, kind in sorted(entry.get("output_fields", {}).items()):
        ptr = pointer(path)
        if ptr is not None and kind in FIELD_LABEL:
            out.append({"path": ptr, "integrity": FIELD_LABEL[kind]})
    return out


def trusted_fields(entry: dict[str, Any]) -> list[str]:
    """The paths an operator confirms trusted for a catalog entry (its
    ``system`` fields): ``[tools.X] trusted_fields``."""
    return [f["path"] for f in field_labels(entry) if f["integrity"] == "trusted"]


def meta_of(entry: dict[str, Any], output: str = "text", errors: str | None = None) -> dict[str, Any]:
    """The stamped meta of a catalog entry (risk: the bench's, see the
    catalog's ``bench_risk``; field labels from its ``output_fields``)."""
    meta = {
        "name": entry["name"],
        "description": entry["description"],
        "args_schema": entry["args_schema"],
        "has_side_effects": entry["has_side_effects"],
        "risk": entry["bench_risk"],
        "returns_untrusted": entry["returns_untrusted"],
        "function": entry["agentdojo_function"],
        "output": output,
        "fields": field_labels(entry),
    }
    if errors is not None:
        meta["errors"] = errors
    return meta


def stamp(generic: bytes, meta: dict[str, Any]) -> bytes:
    """A copy of ``generic`` with ``meta`` in its stamp region.

    Raises:
        StampError: no single unstamped region, or a meta too large.
    """
    at = generic.find(MARKER)
    if at < 0 or generic.find(MARKER, at + 1) >= 0:
        raise StampError("the generic component must hold the stamp marker exactly once")
    region = generic[at : at + STAMP_LEN]
    if len(region) != STAMP_LEN or region[len(MARKER) :].strip(b" "):
        raise StampError("the stamp region is not an unstamped placeholder (stamp a fresh build)")
    body = json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode()
    room = STAMP_LEN - len(MARKER)
    if len(body) > room:
        raise StampError(f"{meta['name']}: meta of {len(body)} bytes, room for {room}")
    return generic[:at] + MARKER + body + b" " * (room - len(body)) + generic[at + STAMP_LEN :]


def main(argv: list[str] | None = None) -> None:
    """Stamp every tool of the catalog (or of ``--suite``)."""
    p = argparse.ArgumentParser(prog="agentdojo components", description=__doc__.split("\n\n")[0])
    p.add_argument("--generic", type=Path, default=GENERIC)
    p.add_argument("--catalog", type=Path, default=CATALOG)
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--suite", action="append")
    p.add_argument("--output", choices=["text", "json"], default="text", help="what a result's data is (default: AgentDojo's text)")
    p.add_argument("--errors", choices=["tool-error", "result"], default=None, help="AgentDojo errors as tool errors or results (default: results for side effects)")
    args = p.parse_args(argv)
    if not args.generic.is_file():
        print(f"components: {args.generic} missing: scripts/build-components --path bench/agentdojo/component", file=sys.stderr)
        sys.exit(1)
    generic = args.generic.read_bytes()
    catalog = json.loads(args.catalog.read_text())
    n = 0
    for suite, entries in catalog["suites"].items():
        if args.suite and suite not in args.suite:
            continue
        d = args.out / suite
        d.mkdir(parents=True, exist_ok=True)
        for old in d.glob("*.wasm"):
            old.unlink()
        for e in entries:
            (d / f"{e['name']}.wasm").write_bytes(stamp(generic, meta_of(e, args.output, args.errors)))
            n += 1
    print(f"components: {n} stamped into {args.out}/<suite>/")
