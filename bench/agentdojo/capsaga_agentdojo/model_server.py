"""The gullible agent as a model: a loopback server speaking the OpenAI
chat-completions wire format, so that capsaga's ``openai`` provider (a
``keyless`` provider whose ``base_url`` points here) drives it like any model.

``POST /v1/chat/completions`` (also ``/chat/completions``): reads ``messages``
(``system``, ``user``, ``assistant`` with ``tool_calls`` whose
``function.arguments`` is a JSON string, ``tool`` with ``tool_call_id`` and
``content``, a string or an array of text parts), ``tools`` (``{type:
"function", function: {name, ...}}``) and ``tool_choice``; answers
``choices[0].message`` with one ``tool_calls`` entry (``finish_reason``
``tool_calls``) or the final answer as ``content`` (``stop``), and
``usage`` with zero tokens. These are exactly the fields capsaga's provider
sends and reads (``host/runtime/src/agent/openai.rs``). The reply is a pure
function of the conversation (see :func:`.agent.next_action`), so a retried
request gets the same answer.

The case it plays is set by ``POST /case`` (same body as the environment
service's). The first user message must be the case's prompt (else 409: a
driver mixing cases up is loud). ``GET /state`` tells a driver what the last
reply's replay found: whether and after which result the agent obeyed the
injection, which of its calls were the attacker's, and where each argument's
value could have come from (:func:`.agent.provenance`).

The plan declaration (``--plan``):
- ``off`` (default): none;
- ``content``: the first assistant message carries, beside its first tool
  call, the text ``{"plan": {"tools": [...]}}``;
- ``tool:NAME``: the first reply is a call of the tool ``NAME`` with
  arguments ``{"tools": [...]}`` (made only when the request offers
  ``NAME``); its result is ignored.
The list is the user task's ground-truth tools in order of first use, never
the injection task's: what a planner reading only the user's request and the
tool catalog could declare before reading any data.
"""

from __future__ import annotations

import argparse
import itertools
import json
import threading
import time
from typing import Any

from .agent import Call, Divergence, Final, Oracle, Script, next_action, provenance
from .cases import Case, CaseError
from .httpjson import HttpError, JsonServer, run_until_interrupted

_ids = itertools.count(1)


def content_text(content: Any) -> str:
    """A message's content as text (a string, null, or text parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, str | dict)
        )
    return str(content)


def exchanges_of(messages: list[dict[str, Any]], skip_tool: str | None) -> tuple[list[tuple[Call, str]], int]:
    """The (call, result text) pairs of a conversation, in call order, and
    how many assistant messages it holds. Calls of ``skip_tool`` (the plan
    declaration) are left out.

    Raises:
        HttpError: 400 for a call without a result or unparsable arguments.
    """
    results = {
        m.get("tool_call_id"): content_text(m.get("content"))
        for m in messages
        if isinstance(m, dict) and m.get("role") == "tool"
    }
    out: list[tuple[Call, str]] = []
    assistants = 0
    for m in messages:
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        assistants += 1
        for tc in m.get("tool_calls") or []:
            fn = tc.get("function") or {}
            name = str(fn.get("name") or "")
            if skip_tool and name == skip_tool:
                continue
            raw = fn.get("arguments")
            try:
                args = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
            except json.JSONDecodeError as e:
                raise HttpError(400, f"arguments of {name} are not JSON: {e}") from None
            if tc.get("id") not in results:
                raise HttpError(400, f"the call {tc.get('id')} ({name}) has no tool result")
            out.append((Call(name, args), results[tc.get("id")]))
    return out, assistants


class ModelServer:
    """The model's state: the current case's oracle and what the last reply
    found."""

    def __init__(self, plan: str = "off", name_prefix: str = "") -> None:
        if plan not in ("off", "content") and not plan.startswith("tool:"):
            raise ValueError("plan is off, content or tool:NAME")
        self.plan = plan
        self.name_prefix = name_prefix
        self.lock = threading.Lock()
        self.oracle: Oracle | None = None
        self.state: Script | None = None
        self.replies = 0

    @property
    def plan_tool(self) -> str | None:
        """The plan declaration's tool, in ``tool:NAME`` mode."""
        return self.plan.removeprefix("tool:") if self.plan.startswith("tool:") else None

    def load(self, case: Case) -> dict[str, Any]:
        """Play ``case`` from now on."""
        oracle = Oracle(case)
        with self.lock:
            self.oracle, self.state, self.replies = oracle, None, 0
        return {"key": case.key, "prompt": oracle.prompt, "plan": oracle.plan_tools()}

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        """One chat completion (see the module docs)."""
        with self.lock:
            oracle = self.oracle
        if oracle is None:
            raise HttpError(409, "no case loaded: POST /case first")
        messages = body.get("messages")
        if not isinstance(messages, list):
            raise HttpError(400, "`messages` is a list")
        users = [content_text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        if not users or users[0].strip() != oracle.prompt.strip():
            raise HttpError(409, f"the conversation's first user message is not the prompt of {oracle.case.key}")
        offered = [
            (t.get("function") or {}).get("name")
            for t in body.get("tools") or []
            if isinstance(t, dict)
        ]
        exchanges, assistants = exchanges_of(messages, self.plan_tool)
        state = Script()
        try:
            action = next_action(oracle, exchanges, state)
        except Divergence as e:
            raise HttpError(409, str(e)) from None
        with self.lock:
            self.state, self.replies = state, self.replies + 1
        plan = {"plan": {"tools": oracle.plan_tools()}}
        content: str | None = None
        call: Call | None = None
        if (
            self.plan_tool
            and self.plan_tool in offered
            and not any(
                tc.get("function", {}).get("name") == self.plan_tool
                for m in messages
                if isinstance(m, dict)
                for tc in (m.get("tool_calls") or [])
            )
        ):
            call = Call(self.plan_tool, plan["plan"])
        elif isinstance(action, Final) or body.get("tool_choice") == "none":
            content = action.text if isinstance(action, Final) else oracle.final_answer(state.obeyed_after is not None)
        else:
            call = action
            if self.plan == "content" and assistants == 0:
                content = json.dumps(plan)
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if call is not None:
            name = call.function if call.function == self.plan_tool else self.name_prefix + call.function
            message["tool_calls"] = [
                {
                    "id": f"call_ad_{next(_ids)}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(call.args)},
                }
            ]
        return {
            "id": f"chatcmpl-ad-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or "agentdojo-gullible"),
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if call is not None else "stop"}
            ],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    def status(self) -> dict[str, Any]:
        """What the last reply's replay found."""
        with self.lock:
            o, s = self.oracle, self.state
        if o is None:
            raise HttpError(409, "no case loaded")
        hist = s.history if s else []
        inj = set(s.injection_calls) if s else set()
        return {
            "key": o.case.key,
            "replies": self.replies,
            "obeyed_after": s.obeyed_after if s else None,
            "calls": [
                {
                    "function": r.call.function,
                    "args": r.call.args,
                    "injection": i in inj,
                    "error": r.error,
                    "truncated": r.truncated,
                    "provenance": {k: provenance(v, o.prompt, hist[:i]) for k, v in r.call.args.items()},
                }
                for i, r in enumerate(hist)
            ],
            "plan": o.plan_tools(),
            # Whether the call of the last reply (not answered yet) is one
            # the model makes for the injection task.
            "pending_injection": len(hist) in inj,
        }

    def server(self, host: str = "127.0.0.1", port: int = 0) -> JsonServer:
        """An HTTP server for this model (not started)."""

        def case(_p: str, body: Any) -> tuple[int, Any]:
            try:
                return 200, self.load(Case.from_json(body))
            except CaseError as e:
                raise HttpError(400, str(e)) from None

        def chat(_p: str, body: Any) -> tuple[int, Any]:
            if not isinstance(body, dict):
                raise HttpError(400, "the body is a JSON object")
            return 200, self.reply(body)

        return JsonServer(
            {
                ("POST", "/case"): case,
                ("POST", "/v1/chat/completions"): chat,
                ("POST", "/chat/completions"): chat,
                ("GET", "/state"): lambda _p, _b: (200, self.status()),
                ("GET", "/healthz"): lambda _p, _b: (200, {"ok": True}),
            },
            host,
            port,
        )


def main(argv: list[str] | None = None) -> None:
    """``model``: run the scripted model in the foreground."""
    p = argparse.ArgumentParser(prog="agentdojo model", description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--case", help="play suite/user_task_N[/injection_task_M] from the start")
    p.add_argument("--plan", default="off", help="off | content | tool:NAME (see the module docs)")
    p.add_argument("--name-prefix", default="", help="prefix of the offered tool names (default none)")
    args = p.parse_args(argv)
    m = ModelServer(args.plan, args.name_prefix)
    if args.case:
        m.load(Case.parse_key(args.case))
    srv = m.server(port=args.port)
    run_until_interrupted(srv, f"agentdojo gullible model on {srv.url}/v1")
