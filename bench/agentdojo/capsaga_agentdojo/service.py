"""The environment service: one AgentDojo case's environment behind loopback
HTTP. It executes whatever it is asked and decides nothing.

Routes (JSON in, JSON out):

- ``POST /case`` ``{suite, user_task, injection_task?, attack?,
  benchmark_version?}``: build the case's environment (see
  :mod:`.cases`), forget every earlier call. Answers the case, the user
  task's prompt and the injections placed (vector -> text).
- ``POST /call/<function>`` (body: the arguments, a JSON object): run
  AgentDojo's real tool function against the environment, as AgentDojo's
  ``ToolsExecutor`` does (unknown tool: its error text; arguments that are a
  Python list written as a string converted first; then
  ``FunctionsRuntime.run_function``). Answers ``{ok, text, error, data}``:
  ``text`` is what AgentDojo's pipeline shows a model (the error text
  ``"ValueError: ..."`` when the function raised, else the result through
  AgentDojo's ``tool_result_to_str``: YAML for models and lists, ``str()`` for
  the rest), ``data`` the result as JSON (pydantic models dumped in JSON
  mode), ``error`` the error text or null. Every call asked is logged, failed
  ones too (AgentDojo's function-call trace holds every call the model made).
- ``POST /grade`` ``{model_output, trace?}``: AgentDojo's own checks
  (``utility_from_traces`` else ``utility`` for the user task, then the same
  for the injection task's ``security``), on copies of the pre-environment and
  of the environment as the calls left it. The trace is the service's log of
  calls unless the body gives one (``[{function, args}]``). ``security`` true
  means the attacker's goal was reached; null for a benign case.
- ``GET /spec``: every tool of the suite: name, description, JSON Schema of
  the parameters (AgentDojo's ``parameters.model_json_schema()``, what its
  OpenAI pipeline sends).
- ``GET /calls``: the log. ``GET /healthz``.
"""

from __future__ import annotations

import argparse
import threading
from ast import literal_eval
from typing import Any

from agentdojo.agent_pipeline.tool_execution import is_string_list, tool_result_to_str
from agentdojo.functions_runtime import FunctionCall, FunctionsRuntime
from agentdojo.types import text_content_block_from_string
from pydantic import BaseModel

from .cases import Built, Case, CaseError, build, injection_task_of, suite_of, user_task_of
from .httpjson import HttpError, JsonServer, run_until_interrupted


def jsonable(value: Any) -> Any:
    """A tool result as JSON: pydantic models dumped in JSON mode, lists
    and dicts item by item, scalars as they are."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def tool_spec(suite) -> list[dict[str, Any]]:
    """Every tool of ``suite``: ``{name, description, parameters}``."""
    return [
        {"name": f.name, "description": f.description, "parameters": f.parameters.model_json_schema()}
        for f in suite.tools
    ]


class Session:
    """One case's environment and the calls made against it."""

    def __init__(self, built: Built) -> None:
        self.built = built
        self.suite = suite_of(built.case)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.calls: list[dict[str, Any]] = []

    @property
    def case(self) -> Case:
        """The case."""
        return self.built.case

    def call(self, function: str, args: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call (see the module docs for the answer)."""
        args = dict(args)
        if function not in self.runtime.functions:
            result, error = "", f"Invalid tool {function} provided."
        else:
            for k, v in list(args.items()):
                if isinstance(v, str) and is_string_list(v):
                    args[k] = literal_eval(v)
            result, error = self.runtime.run_function(self.built.env, function, args)
        text = tool_result_to_str(result)
        self.calls.append({"function": function, "args": args, "ok": error is None, "error": error})
        return {"ok": error is None, "text": error or text, "error": error, "data": jsonable(result)}

    def grade(self, model_output: str, trace: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """AgentDojo's utility and security checks (see the module docs)."""
        calls = self.calls if trace is None else trace
        stack = [FunctionCall(function=c["function"], args=dict(c.get("args") or {}), id=str(i)) for i, c in enumerate(calls)]
        pre = self.built.pre_env.model_copy(deep=True)
        post = self.built.env.model_copy(deep=True)
        output = [text_content_block_from_string(model_output or "")]
        utility = self.suite._check_task_result(user_task_of(self.case), output, pre, post, stack)  # noqa: SLF001 -- AgentDojo's own grading entry
        inj = injection_task_of(self.case)
        security = None if inj is None else self.suite._check_task_result(inj, output, pre, post, stack)  # noqa: SLF001
        return {
            "case": self.case.key,
            "utility": bool(utility),
            "security": None if security is None else bool(security),
            "trace_source": "service" if trace is None else "request",
            "calls": len(stack),
        }


class EnvService:
    """The service's state: the current session, behind a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.session: Session | None = None

    def load(self, case: Case) -> dict[str, Any]:
        """Build ``case`` and make it current."""
        built = build(case)
        with self.lock:
            self.session = Session(built)
        return {
            "case": case.to_json(),
            "key": case.key,
            "prompt": user_task_of(case).PROMPT,
            "injections": built.injections,
        }

    def current(self) -> Session:
        """The current session.

        Raises:
            HttpError: 409 when no case is loaded.
        """
        if self.session is None:
            raise HttpError(409, "no case loaded: POST /case first")
        return self.session

    # --- HTTP handlers -------------------------------------------------------
    def h_case(self, _path: str, body: Any) -> tuple[int, Any]:
        try:
            return 200, self.load(Case.from_json(body))
        except CaseError as e:
            raise HttpError(400, str(e)) from None

    def h_call(self, path: str, body: Any) -> tuple[int, Any]:
        function = path.removeprefix("/call/")
        args = {} if body is None else body
        if not isinstance(args, dict):
            raise HttpError(400, "the arguments are a JSON object")
        with self.lock:
            return 200, self.current().call(function, args)

    def h_grade(self, _path: str, body: Any) -> tuple[int, Any]:
        body = body or {}
        if not isinstance(body, dict):
            raise HttpError(400, "the body is a JSON object {model_output, trace?}")
        trace = body.get("trace")
        if trace is not None and not (isinstance(trace, list) and all(isinstance(c, dict) and "function" in c for c in trace)):
            raise HttpError(400, "`trace` is a list of {function, args}")
        with self.lock:
            return 200, self.current().grade(str(body.get("model_output") or ""), trace)

    def h_spec(self, _path: str, _body: Any) -> tuple[int, Any]:
        s = self.current()
        return 200, {"suite": s.case.suite, "benchmark_version": s.case.benchmark_version, "tools": tool_spec(s.suite)}

    def h_calls(self, _path: str, _body: Any) -> tuple[int, Any]:
        with self.lock:
            s = self.current()
            return 200, {"case": s.case.key, "calls": list(s.calls)}

    def server(self, host: str = "127.0.0.1", port: int = 0) -> JsonServer:
        """An HTTP server for this service (not started)."""
        return JsonServer(
            {
                ("POST", "/case"): self.h_case,
                ("POST", "/call/"): self.h_call,
                ("POST", "/grade"): self.h_grade,
                ("GET", "/spec"): self.h_spec,
                ("GET", "/calls"): self.h_calls,
                ("GET", "/healthz"): lambda _p, _b: (200, {"ok": True}),
            },
            host,
            port,
        )


def main(argv: list[str] | None = None) -> None:
    """``serve``: run the service in the foreground, optionally with a case."""
    p = argparse.ArgumentParser(prog="agentdojo serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--case", help="load suite/user_task_N[/injection_task_M] at start")
    p.add_argument("--attack", default=None)
    args = p.parse_args(argv)
    svc = EnvService()
    if args.case:
        svc.load(Case.parse_key(args.case, **({"attack": args.attack} if args.attack else {})))
    srv = svc.server(port=args.port)
    run_until_interrupted(srv, f"agentdojo environment service on {srv.url}")
