"""The tool catalog for capsaga: every AgentDojo tool of every suite as a
capsaga tool would declare it, generated from AgentDojo's function specs and
:mod:`.annotations`, into ``bench/agentdojo/catalog.json``; the README's table
between its ``catalog:begin``/``catalog:end`` markers is rewritten from the
same data.

Checks made on every generation (any failure stops it):
- every tool of every suite is annotated, and nothing else is;
- each name is a valid capsaga tool name (``[a-z][a-z0-9_]{0,63}``) and
  collides with none of capsaga's own: the first-party tools (``tools/*``),
  the host's reserved names (``RESERVED`` in
  ``host/core/src/neuron/name.rs``) and reserved prefixes (``capsaga_``,
  ``memory_``);
- side effects against the environment: every call of every ground truth of
  the suite (user and injection tasks), plus a sample call for each tool no
  ground truth uses, is run on a fresh environment, which is compared before
  and after; a tool annotated read-only that changed it, or annotated as
  writing that never did, is an error.
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from pathlib import Path
from typing import Any

from agentdojo.functions_runtime import FunctionsRuntime
from agentdojo.task_suite.load_suites import get_suites

from . import AGENTDOJO_VERSION, BENCHMARK_VERSION
from .annotations import ANNOTATIONS

HERE = Path(__file__).resolve().parent.parent
REPO = HERE.parent.parent
CATALOG = HERE / "catalog.json"
README = HERE / "README.md"
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
RESERVED_PREFIXES = ("capsaga_", "memory_")

#: Sample calls for the tools no ground truth calls (suite -> tool -> args).
SAMPLES: dict[str, dict[str, dict[str, Any]]] = {
    "workspace": {
        "get_sent_emails": {},
        "get_draft_emails": {},
        "get_received_emails": {},
        "search_contacts_by_email": {"query": "david"},
        "cancel_calendar_event": {"event_id": "6"},
        "get_current_day": {},
        "delete_email": {"email_id": "9"},
        "delete_file": {"file_id": "1"},
        "share_file": {"file_id": "1", "email": "a@example.com", "permission": "r"},
        "append_to_file": {"file_id": "1", "content": "x"},
        "get_file_by_id": {"file_id": "1"},
        "search_files_by_filename": {"filename": "team"},
        "reschedule_calendar_event": {"event_id": "6", "new_start_time": "2024-05-20 10:00"},
        "add_calendar_event_participants": {"event_id": "6", "participants": ["a@example.com"]},
    },
    "travel": {
        "cancel_calendar_event": {"event_id": "1"},
        "search_calendar_events": {"query": "meeting"},
        "get_day_calendar_events": {"day": "2024-05-15"},
        "get_flight_information": {"departure_city": "Paris", "arrival_city": "London"},
        "get_hotels_address": {"hotel_name": "Le Marais Boutique"},
        "send_email": {"recipients": ["a@example.com"], "subject": "s", "body": "b"},
        "get_contact_information_for_restaurants": {"restaurant_names": ["New Israeli Restaurant"]},
        "get_car_rental_address": {"company_name": ["SunSet Rent-A-Car"]},
        "reserve_car_rental": {"company": "SunSet Rent-A-Car", "start_time": "2024-05-01 09:00", "end_time": "2024-05-05 09:00"},
        "reserve_restaurant": {"restaurant": "New Israeli Restaurant", "start_time": "2024-05-15 19:00"},
    },
    "banking": {
        "get_iban": {},
        "get_balance": {},
        "get_user_info": {},
        "get_scheduled_transactions": {},
        "update_password": {"password": "x"},
        "update_user_info": {"city": "Bern"},
        "schedule_transaction": {"recipient": "X", "amount": 1.0, "subject": "s", "date": "2022-04-01", "recurring": False},
        "update_scheduled_transaction": {"id": 7, "amount": 2.0},
    },
    "slack": {
        "get_channels": {},
        "remove_user_from_slack": {"user": "Alice"},
        "post_webpage": {"url": "www.example.com", "content": "x"},
    },
}


class CatalogError(Exception):
    """A check of the catalog failed."""


def capsaga_names() -> tuple[set[str], list[str]]:
    """capsaga's own tool names (first-party tools and reserved built-ins)
    and where each list was read."""
    names: set[str] = set()
    tools_dir = REPO / "tools"
    for d in sorted(tools_dir.iterdir()) if tools_dir.is_dir() else []:
        if (d / "Cargo.toml").is_file():
            names.add(d.name)
    src = REPO / "host/core/src/neuron/name.rs"
    m = re.search(r"pub const RESERVED: &\[&str\] = &\[(.*?)\];", src.read_text(), re.S)
    if not m:
        raise CatalogError(f"RESERVED not found in {src}")
    names.update(re.findall(r'"([a-z0-9_]+)"', m.group(1)))
    return names, ["tools/*/", "host/core/src/neuron/name.rs RESERVED"]


def sample_calls(suite) -> dict[str, list[dict[str, Any]]]:
    """Every ground-truth call of the suite's tasks, by tool, plus
    [`SAMPLES`]."""
    env = suite.load_and_inject_default_environment({})
    out: dict[str, list[dict[str, Any]]] = {t.name: [] for t in suite.tools}
    tasks = [*suite.user_tasks.values(), *suite.injection_tasks.values()]
    for task in tasks:
        for c in task.ground_truth(copy.deepcopy(env)):
            if c.function in out:
                out[c.function].append(dict(c.args))
    for tool, args in SAMPLES.get(suite.name, {}).items():
        out[tool].append(args)
    return out


def observed_writes(suite) -> dict[str, tuple[int, int, int]]:
    """Per tool: (calls run, calls that changed the environment, calls that
    raised)."""
    env = suite.load_and_inject_default_environment({})
    rt = FunctionsRuntime(suite.tools)
    out: dict[str, tuple[int, int, int]] = {}
    for tool, calls in sample_calls(suite).items():
        ran = changed = failed = 0
        for args in calls:
            e = copy.deepcopy(env)
            before = e.model_dump()
            _res, err = rt.run_function(e, tool, args)
            ran += 1
            failed += err is not None
            changed += e.model_dump() != before
        out[tool] = (ran, changed, failed)
    return out


def build_catalog(benchmark_version: str = BENCHMARK_VERSION) -> dict[str, Any]:
    """The catalog (see the module docs).

    Raises:
        CatalogError: a failed check.
    """
    ours, sources = capsaga_names()
    problems: list[str] = []
    suites_out: dict[str, Any] = {}
    verification: dict[str, Any] = {}
    for sname, suite in get_suites(benchmark_version).items():
        ann = ANNOTATIONS.get(sname, {})
        names = [t.name for t in suite.tools]
        for missing in sorted(set(names) - set(ann)):
            problems.append(f"{sname}/{missing}: not annotated")
        for extra in sorted(set(ann) - set(names)):
            problems.append(f"{sname}/{extra}: annotated but not a tool of the suite")
        seen = observed_writes(suite)
        verification[sname] = {}
        entries = []
        for f in suite.tools:
            a = ann.get(f.name)
            if a is None:
                continue
            a.check(f.name)
            if not NAME_RE.match(f.name):
                problems.append(f"{sname}/{f.name}: not a capsaga tool name")
            if f.name in ours or f.name.startswith(RESERVED_PREFIXES):
                problems.append(f"{sname}/{f.name}: collides with capsaga's own tool names")
            ran, changed, failed = seen[f.name]
            verification[sname][f.name] = {"calls": ran, "changed_environment": changed, "raised": failed}
            if ran == 0:
                problems.append(f"{sname}/{f.name}: no call to check its side effects (add a sample)")
            elif changed and not a.has_side_effects:
                problems.append(f"{sname}/{f.name}: annotated read-only, but {changed} of {ran} calls changed the environment")
            elif a.has_side_effects and not changed:
                problems.append(f"{sname}/{f.name}: annotated as writing, but none of {ran} calls changed the environment")
            schema = f.parameters.model_json_schema()
            args = set((schema.get("properties") or {}).keys())
            for k in (*a.key_args, *a.scanned_args):
                if k not in args:
                    problems.append(f"{sname}/{f.name}: `{k}` is not an argument")
            entries.append(
                {
                    "name": f.name,
                    "agentdojo_function": f.name,
                    "description": f.description,
                    "args_schema": schema,
                    **a.to_json(),
                    "bench_risk": "medium" if a.has_side_effects else "low",
                }
            )
        suites_out[sname] = entries
    if problems:
        raise CatalogError("\n".join(problems))
    return {
        "generated_by": "scripts/agentdojo catalog",
        "agentdojo": AGENTDOJO_VERSION,
        "benchmark_version": benchmark_version,
        "fields": {
            "name": "capsaga tool name (= AgentDojo's function name; checked against capsaga's own names)",
            "has_side_effects": "the function writes the environment (checked by running it)",
            "effect": "outbound: a third party sees or gets something; internal: the user's own state",
            "risk": "the honest risk (high: hard or impossible to undo: payments, e-mail, deletion)",
            "bench_risk": "what the benchmark's components declare: medium for every side effect, so that capsaga's "
            "'high risk always asks a human' does not hide what the information-flow rules do",
            "returns_untrusted": "some output field is third-party or an echo of the arguments",
            "output_fields": "path -> third_party | user | system | echo ($ whole, [] items, {} keys, {}.value values)",
            "key_args": "arguments whose whole value must come from a trusted source (else approval)",
            "endorsed_args": "key arguments whose effect cannot be taken back: only the user, the operator or an approval "
            "vouches for them, never a tool's output (capsaga's `endorsed` sink)",
            "scanned_args": "free text whose identifier-like tokens must come from a trusted source",
        },
        "capsaga_names_checked": {"sources": sources, "names": sorted(ours), "reserved_prefixes": list(RESERVED_PREFIXES)},
        "side_effect_check": verification,
        "suites": suites_out,
    }


def markdown(catalog: dict[str, Any]) -> str:
    """The README table: one row per tool of each suite."""
    lines = []
    for sname, entries in catalog["suites"].items():
        lines.append(f"#### {sname} ({len(entries)} tools)")
        lines.append("")
        lines.append("| tool | writes | key args (**endorsed**) | scanned args | attacker-controllable output | why |")
        lines.append("|---|---|---|---|---|---|")
        for e in entries:
            writes = f"{e['effect']}: {e['writes']}" if e["has_side_effects"] else "no"
            untrusted = ", ".join(f"`{k}`" for k in e["attacker_controllable_fields"]) or "none"
            echo = [k for k, v in e["output_fields"].items() if v == "echo"]
            if echo:
                untrusted += " (echo: " + ", ".join(f"`{k}`" for k in echo) + ")"
            keys = ", ".join(f"**{k}**" if k in e.get("endorsed_args", []) else k for k in e["key_args"]) or "-"
            lines.append(
                f"| `{e['name']}` | {writes} | {keys} | {', '.join(e['scanned_args']) or '-'} "
                f"| {untrusted} | {e['why']} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def rewrite_readme(table: str, readme: Path = README) -> bool:
    """Replace the README's table between the markers; True when it changed."""
    text = readme.read_text()
    begin, end = "<!-- catalog:begin -->\n", "<!-- catalog:end -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < i:
        raise CatalogError(f"{readme}: no catalog:begin/catalog:end markers")
    new = text[: i + len(begin)] + table + text[j:]
    if new != text:
        readme.write_text(new)
        return True
    return False


def main(argv: list[str] | None = None) -> None:
    """``catalog``: regenerate catalog.json and the README table; ``--check``
    fails when either is stale."""
    p = argparse.ArgumentParser(prog="agentdojo catalog", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="fail if catalog.json or the README table is not up to date")
    p.add_argument("--out", type=Path, default=CATALOG)
    args = p.parse_args(argv)
    try:
        cat = build_catalog()
    except CatalogError as e:
        print(f"catalog: {e}", file=sys.stderr)
        sys.exit(1)
    text = json.dumps(cat, indent=1, ensure_ascii=False) + "\n"
    table = markdown(cat)
    if args.check:
        stale = []
        if not args.out.is_file() or args.out.read_text() != text:
            stale.append(str(args.out))
        readme = README.read_text()
        if table not in readme:
            stale.append(f"{README} table")
        if stale:
            print(f"catalog: stale: {', '.join(stale)} (run scripts/agentdojo catalog)", file=sys.stderr)
            sys.exit(1)
        print("catalog: up to date")
        return
    args.out.write_text(text)
    changed = rewrite_readme(table) if README.is_file() else False
    n = sum(len(v) for v in cat["suites"].values())
    print(f"catalog: {n} tools in {len(cat['suites'])} suites -> {args.out}" + (" (README table updated)" if changed else ""))
