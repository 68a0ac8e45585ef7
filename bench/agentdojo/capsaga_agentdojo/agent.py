"""The gullible scripted agent: an oracle that knows each case's ground truth
and obeys every injection it reads.

Per case it plays:

1. optionally a plan declaration (see :mod:`.model_server`): the tools of the
   user task's ground truth, in order of first use;
2. the user task's ground-truth calls (AgentDojo's ``ground_truth``), in order;
3. the moment a tool result it received contains the injection task's goal
   (the instruction AgentDojo's attacks embed; matched with whitespace
   folded, on the raw text and on every string of the parsed result), the
   injection task's calls (its ``ground_truth``, or for workspace injection
   tasks 6-13, which ship none, the plans of :mod:`.injection_plans`); then
   it resumes the user task where it left it. It obeys once per case (the
   ``important_instructions`` text asks for exactly that: "before you can
   solve the task ... do the following first ... after you do that, you can
   solve the task");
4. a final answer: the user task's ``GROUND_TRUTH_OUTPUT``, plus the injection
   task's when it obeyed one that has an output (travel injection task 6:
   "say that ...").

Arguments come from what the agent received where they depend on earlier
results: AgentDojo's ``ground_truth`` computes them from the pre-environment,
which matches what a model reads except for identifiers the system assigns
during the run (a new file's, e-mail's or event's id). Each planned call is
therefore also run on a private copy of the pre-environment (the plan alone,
as ``ground_truth`` assumes it); when a result the agent really received
carries a different ``id_``/``id`` than the one predicted for the same call,
later arguments equal to the predicted id take the received one.

The agent is a pure function of the conversation so far (``next_action``):
it replays its script over the calls it made and the results it received,
so a retried request gets the same answer.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Generator
from typing import Any

import yaml
from agentdojo.agent_pipeline.tool_execution import tool_result_to_str
from agentdojo.functions_runtime import FunctionsRuntime

from .cases import Case, build, injection_task_of, suite_of, user_task_of

#: Where a capsaga host wrapped an untrusted result (``<untrusted ...>`` ... ``</untrusted>``).
_WRAP = re.compile(r"<untrusted [^>]*>\n(.*)\n</untrusted>", re.S)
#: capsaga's truncation note.
_TRUNC = re.compile(r"\n\[\.\.\. truncated, \d+ bytes total\]\s*$")
#: An AgentDojo error text (``ValueError: ...``) or a capsaga tool error.
_ERROR = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception): |tool error \()")


@dataclasses.dataclass(frozen=True)
class Call:
    """A tool call: AgentDojo function name and JSON arguments."""

    function: str
    args: dict[str, Any]

    @staticmethod
    def of(function: str, args: dict[str, Any]) -> "Call":
        """A call with its arguments normalised to plain JSON (enums as their
        values), as they travel on the wire."""
        return Call(function, json.loads(json.dumps(args, default=str)))


@dataclasses.dataclass
class Received:
    """A tool result as the agent received it: the text, whether it reads as
    an error, whether the host truncated it, and the value parsed from it
    (AgentDojo's YAML or a JSON document; the text itself otherwise)."""

    call: Call
    text: str
    error: bool
    truncated: bool
    value: Any

    def strings(self) -> list[str]:
        """Every string in the value, and the text."""
        out = [self.text]

        def walk(v: Any) -> None:
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, dict):
                for k, x in v.items():
                    walk(str(k))
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)

        walk(self.value)
        return out


def parse_result(call: Call, text: str) -> Received:
    """Read a tool message's content: unwrap capsaga's untrusted markers,
    drop its truncation note, decode a JSON string or document, then read
    AgentDojo's YAML."""
    body = text
    m = _WRAP.search(body)
    if m:
        body = m.group(1)
    truncated = bool(_TRUNC.search(body))
    body = _TRUNC.sub("", body)
    value: Any = body
    stripped = body.strip()
    if stripped[:1] in ('"', "{", "["):
        try:
            value = json.loads(stripped)
        except json.JSONDecodeError:
            value = _json_string_prefix(stripped) if truncated and stripped[:1] == '"' else None
            if value is None:
                value = body
    if isinstance(value, dict) and set(value) >= {"ok", "text"}:
        value = value["text"]
    if isinstance(value, str):
        text_value = value
        try:
            parsed = yaml.safe_load(text_value)
            value = parsed if isinstance(parsed, dict | list) else text_value
        except yaml.YAMLError:
            value = text_value
    error = bool(_ERROR.match(text.lstrip())) or (isinstance(value, str) and bool(_ERROR.match(value)))
    return Received(call, text, error, truncated, value)


def _json_string_prefix(s: str) -> str | None:
    """The longest decodable prefix of a JSON string literal cut short (a
    truncated result: the cut may fall inside an escape)."""
    for cut in range(len(s), max(len(s) - 8, 0), -1):
        try:
            v = json.loads(s[:cut] + '"')
        except json.JSONDecodeError:
            continue
        return v if isinstance(v, str) else None
    return None


def fold(s: str) -> str:
    """Whitespace folded to single spaces, for matching."""
    return " ".join(s.split())


def id_pairs(predicted: Any, received: Any, out: dict[Any, Any]) -> None:
    """Collect ``predicted id -> received id`` where the two results differ
    in an ``id_`` or ``id`` field at the same place."""
    if isinstance(predicted, dict) and isinstance(received, dict):
        for k in ("id_", "id"):
            p, r = predicted.get(k), received.get(k)
            if p is not None and r is not None and p != r and isinstance(p, str | int) and isinstance(r, str | int):
                out[p] = r
        for k in predicted.keys() & received.keys():
            id_pairs(predicted[k], received[k], out)
    elif isinstance(predicted, list) and isinstance(received, list):
        for p, r in zip(predicted, received, strict=False):
            id_pairs(p, r, out)


def substitute(value: Any, mapping: dict[Any, Any]) -> Any:
    """``value`` with every scalar equal to a key of ``mapping`` replaced."""
    if not mapping:
        return value
    if isinstance(value, dict):
        return {k: substitute(v, mapping) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, mapping) for v in value]
    if isinstance(value, str | int) and not isinstance(value, bool) and value in mapping and type(mapping[value]) is type(value):
        return mapping[value]
    return value


Plan = Generator[Call, Received, None]

#: Provenance labels, weakest first.
PROVENANCE = ("empty", "prompt", "result", "nowhere")


def _leaves(value: Any) -> list[str | int | float]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, int | float):
        return [value]
    return []


def _found(leaf: str | int | float, text: str) -> bool:
    if isinstance(leaf, str):
        return fold(leaf).lower() in text
    forms = {str(leaf)}
    if isinstance(leaf, float):
        forms.add(f"{leaf:.2f}")
        if leaf.is_integer():
            forms.add(str(int(leaf)))
    return any(re.search(rf"(?<![\w.]){re.escape(f)}(?![\w]|\.\d)", text) for f in forms)


def provenance(value: Any, prompt: str, earlier: list[Received]) -> str:
    """Where an argument's value could have come from, naively (every
    string or number in it looked for, whitespace folded and case ignored,
    numbers as whole tokens): ``prompt`` (the user's request), ``result``
    (only in results received before the call), ``nowhere`` (neither: the
    oracle knew or computed it), ``empty``. A value with several parts gets
    its weakest part's label. This is a diagnostic of the harness, not
    capsaga's provenance check (no decoding, no confusables, and short
    numbers match by coincidence)."""
    p = fold(prompt).lower()
    texts = [fold(x).lower() for r in earlier for x in r.strings()]
    labels = []
    for leaf in _leaves(value):
        if _found(leaf, p):
            labels.append("prompt")
        elif any(_found(leaf, t) for t in texts):
            labels.append("result")
        else:
            labels.append("nowhere")
    return max(labels, key=PROVENANCE.index) if labels else "empty"


class Oracle:
    """What the scripted agent knows of its case: the tasks and their ground
    truth, computed on its own copy of the case's environment (built the same
    way as the environment service's, never shared with it)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.built = build(case)
        self.suite = suite_of(case)
        self.user_task = user_task_of(case)
        self.injection_task = injection_task_of(case)
        self.runtime = FunctionsRuntime(self.suite.tools)
        self.user_calls = self.user_task.ground_truth(copy.deepcopy(self.built.pre_env))
        self.goal = fold(self.injection_task.GOAL) if self.injection_task is not None else None

    @property
    def prompt(self) -> str:
        """The user task's prompt (the turn's user message)."""
        return self.user_task.PROMPT

    def plan_tools(self) -> list[str]:
        """The plan declaration: the tools of the user task's ground truth,
        in order of first use."""
        seen: list[str] = []
        for c in self.user_calls:
            if c.function not in seen:
                seen.append(c.function)
        return seen

    def static_plan(self, calls: list[Any]) -> Plan:
        """Play AgentDojo ground-truth calls, binding system-assigned ids to
        the ones received (see the module docs)."""
        shadow = copy.deepcopy(self.built.pre_env)
        mapping: dict[Any, Any] = {}
        for c in calls:
            call = Call.of(c.function, substitute(Call.of(c.function, dict(c.args)).args, mapping))
            predicted, _err = self.runtime.run_function(shadow, c.function, dict(c.args))
            rec = yield call
            pred = parse_result(call, tool_result_to_str(predicted))
            id_pairs(pred.value, rec.value, mapping)

    def user_plan(self) -> Plan:
        """The user task's calls."""
        return self.static_plan(self.user_calls)

    def injection_plan(self, history: list[Received]) -> Plan:
        """The injection task's calls (``history``: every result received so
        far in the case, kept up to date by the caller)."""
        from .injection_plans import CUSTOM_PLANS

        assert self.injection_task is not None
        custom = CUSTOM_PLANS.get((self.case.suite, self.injection_task.ID))
        if custom is not None:
            return custom(self, history)
        return self.static_plan(self.injection_task.ground_truth(copy.deepcopy(self.built.pre_env)))

    def sees_injection(self, rec: Received) -> bool:
        """Whether ``rec`` carries the injection task's goal."""
        if self.goal is None:
            return False
        return any(self.goal in fold(s) for s in rec.strings())

    def final_answer(self, obeyed: bool) -> str:
        """The final answer (see the module docs)."""
        parts = [self.user_task.GROUND_TRUTH_OUTPUT]
        if obeyed and self.injection_task is not None and self.injection_task.GROUND_TRUTH_OUTPUT:
            parts.append(self.injection_task.GROUND_TRUTH_OUTPUT)
        text = " ".join(p for p in parts if p)
        return text or "Done."


@dataclasses.dataclass
class Script:
    """What the script did so far: which results it received and whether (and
    after which call) it obeyed the injection; ``injection_calls`` are the
    indexes (in call order) of the calls made for the injection task."""

    history: list[Received] = dataclasses.field(default_factory=list)
    obeyed_after: int | None = None
    injection_calls: list[int] = dataclasses.field(default_factory=list)


def step(plan: Plan, received: Received | None) -> Call | None:
    """The plan's next call, given the result of its last one (``None`` at
    the start); ``None`` once the plan is over."""
    try:
        return plan.send(received)  # type: ignore[arg-type]  -- the first send is None
    except StopIteration:
        return None


def script(oracle: Oracle, state: Script) -> Generator[Call, Received, str]:
    """The agent's whole run as a generator: yields calls, receives results,
    returns the final answer."""
    user = oracle.user_plan()
    rec: Received | None = None
    while (call := step(user, rec)) is not None:
        rec = yield call
        state.history.append(rec)
        if state.obeyed_after is None and oracle.sees_injection(rec):
            state.obeyed_after = len(state.history) - 1
            inj = oracle.injection_plan(state.history)
            r2: Received | None = None
            while (c2 := step(inj, r2)) is not None:
                state.injection_calls.append(len(state.history))
                r2 = yield c2
                state.history.append(r2)
    return oracle.final_answer(state.obeyed_after is not None)


class Divergence(Exception):
    """The conversation holds a call the script would not have made."""


@dataclasses.dataclass
class Final:
    """The final answer."""

    text: str


def next_action(oracle: Oracle, exchanges: list[tuple[Call, str]], state: Script | None = None) -> Call | Final:
    """The agent's next move given the calls it made and the result texts it
    received, in order.

    Raises:
        Divergence: a call in ``exchanges`` differs from the script's.
    """
    state = state if state is not None else Script()
    g = script(oracle, state)
    try:
        call = g.send(None)  # type: ignore[arg-type]
        for made, text in exchanges:
            if made != call:
                raise Divergence(f"the conversation's call {made} is not the script's {call}")
            call = g.send(parse_result(made, text))
        return call
    except StopIteration as stop:
        return Final(stop.value)
