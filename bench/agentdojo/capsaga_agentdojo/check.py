"""``check-plans``: every injection task's plan (AgentDojo's ground truth, or
:mod:`.injection_plans` for the tasks that ship none) executed directly on
the suite's environment, with no user task and no injection placed (as
AgentDojo's ``TaskSuite.check`` checks its ground truths), must pass the
task's own ``security()``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agentdojo.functions_runtime import FunctionCall
from agentdojo.task_suite.load_suites import get_suites
from agentdojo.types import text_content_block_from_string

from . import BENCHMARK_VERSION
from .agent import Oracle, Received, parse_result, step
from .cases import Case, build
from .injection_plans import CUSTOM_PLANS
from .service import Session


def run_injection_plan(suite_name: str, injection_task: str, benchmark_version: str = BENCHMARK_VERSION) -> dict[str, Any]:
    """Run one injection task's plan directly; its security verdict and calls."""
    suite = get_suites(benchmark_version)[suite_name]
    first_user = next(iter(suite.user_tasks))
    session = Session(build(Case(suite_name, first_user, None, benchmark_version=benchmark_version)))
    oracle = Oracle(Case(suite_name, first_user, injection_task, benchmark_version=benchmark_version))
    history: list[Received] = []
    plan = oracle.injection_plan(history)
    rec: Received | None = None
    while (call := step(plan, rec)) is not None:
        answer = session.call(call.function, call.args)
        rec = parse_result(call, answer["text"])
        history.append(rec)
    task = oracle.injection_task
    assert task is not None
    output = [text_content_block_from_string(task.GROUND_TRUTH_OUTPUT)]
    pre = session.built.pre_env.model_copy(deep=True)
    post = session.built.env.model_copy(deep=True)
    stack = [FunctionCall(function=c["function"], args=c["args"]) for c in session.calls]
    ok = suite._check_task_result(task, output, pre, post, stack)  # noqa: SLF001 -- AgentDojo's own grading entry
    return {"suite": suite_name, "injection_task": injection_task, "security": bool(ok), "custom": (suite_name, injection_task) in CUSTOM_PLANS, "calls": session.calls}


def main(argv: list[str] | None = None) -> None:
    """Check every injection plan; exit 1 if one fails."""
    p = argparse.ArgumentParser(prog="agentdojo check-plans", description=__doc__.split("\n\n")[0])
    p.add_argument("--benchmark-version", default=BENCHMARK_VERSION)
    p.add_argument("-v", "--verbose", action="store_true", help="print each plan's calls")
    args = p.parse_args(argv)
    failed = 0
    for sname, suite in get_suites(args.benchmark_version).items():
        for it in suite.injection_tasks:
            r = run_injection_plan(sname, it, args.benchmark_version)
            mark = "ok  " if r["security"] else "FAIL"
            failed += not r["security"]
            print(f"{mark} {sname}/{it}{' (plan written here)' if r['custom'] else ''}: {len(r['calls'])} calls")
            if args.verbose or not r["security"]:
                for c in r["calls"]:
                    print(f"       {c['function']}({', '.join(f'{k}={str(v)[:60]!r}' for k, v in c['args'].items())}){'' if c['ok'] else '  -> ' + str(c['error'])}")
    if failed:
        print(f"check-plans: {failed} plan(s) fail their own security()", file=sys.stderr)
        sys.exit(1)
    print("check-plans: every injection plan passes its own security()")
