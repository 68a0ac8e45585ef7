"""The benchmark's cases and their environments, built with AgentDojo's own
suites, tasks and attacks.

A case is one user task of one suite, alone (``injection_task`` ``None``: the
benign run) or paired with one injection task placed by an attack (by default
``important_instructions``, AgentDojo's default). Its environment is built
exactly as ``TaskSuite.run_task_with_pipeline`` builds it: the suite's
``environment.yaml`` with the attack's injections (only in the vectors the
user task's ground truth reads, AgentDojo's ``get_injection_candidates``),
then the user task's ``init_environment``; the pre-environment is a deep copy
taken before the first call.

The v1.1 view: benchmark v1.2 added eight workspace injection tasks
(``injection_task_6`` to ``injection_task_13``, registered with
``update_injection_task((1, 2, 0), new=True)``); every other injection task
existed from v1.0. The 629 pairs of the v1.1 view are the v1.2.2 pairs whose
injection task was first registered before (1, 2, 0): 949 - 40 x 8. (Running
AgentDojo's own ``v1.1.2`` suites also gives 629 pairs, with older versions of
some tasks; pass ``benchmark_version="v1.1.2"`` for that.)
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Iterator
from typing import Any

from agentdojo.attacks.attack_registry import load_attack
from agentdojo.base_tasks import BaseInjectionTask, BaseUserTask
from agentdojo.task_suite.load_suites import get_suite, get_suites
from agentdojo.task_suite.task_suite import TaskSuite

from . import BENCHMARK_VERSION

#: The attack used when a case names none.
DEFAULT_ATTACK = "important_instructions"
#: The victim model's name put in the attack's text ("... to you, GPT-4"):
#: AgentDojo derives it from the pipeline name through its MODEL_NAMES table.
DEFAULT_VICTIM_MODEL = "gpt-4o-2024-05-13"
#: The benchmark version from which the v1.1 view excludes injection tasks.
V1_2 = (1, 2, 0)


class CaseError(ValueError):
    """A case that names an unknown suite, task or attack."""


@dataclasses.dataclass(frozen=True)
class Case:
    """One run: ``suite``, ``user_task`` (``user_task_N``), ``injection_task``
    (``injection_task_N`` or ``None`` for the benign run), ``attack`` (an
    AgentDojo attack name; ignored when there is no injection task)."""

    suite: str
    user_task: str
    injection_task: str | None = None
    attack: str = DEFAULT_ATTACK
    benchmark_version: str = BENCHMARK_VERSION

    @property
    def key(self) -> str:
        """``suite/user_task_N/injection_task_M`` (``-`` for benign)."""
        return f"{self.suite}/{self.user_task}/{self.injection_task or '-'}"

    def to_json(self) -> dict[str, Any]:
        """The case as the services' ``POST /case`` body."""
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(body: dict[str, Any]) -> "Case":
        """Parse a ``POST /case`` body (``suite`` and ``user_task`` required).

        Raises:
            CaseError: a missing or unknown field.
        """
        if not isinstance(body, dict):
            raise CaseError("a case is a JSON object")
        known = {f.name for f in dataclasses.fields(Case)}
        extra = set(body) - known
        if extra:
            raise CaseError(f"unknown case fields: {sorted(extra)}")
        try:
            case = Case(
                suite=str(body["suite"]),
                user_task=str(body["user_task"]),
                injection_task=(None if body.get("injection_task") in (None, "", "-") else str(body["injection_task"])),
                attack=str(body.get("attack") or DEFAULT_ATTACK),
                benchmark_version=str(body.get("benchmark_version") or BENCHMARK_VERSION),
            )
        except KeyError as e:
            raise CaseError(f"a case needs `{e.args[0]}`") from None
        case.check()
        return case

    @staticmethod
    def parse_key(key: str, attack: str = DEFAULT_ATTACK, benchmark_version: str = BENCHMARK_VERSION) -> "Case":
        """Parse ``suite/user_task_N[/injection_task_M]``.

        Raises:
            CaseError: a malformed or unknown key.
        """
        parts = key.split("/")
        if len(parts) not in (2, 3):
            raise CaseError(f"a case key is suite/user_task_N[/injection_task_M], not {key!r}")
        inj = parts[2] if len(parts) == 3 and parts[2] not in ("", "-") else None
        case = Case(parts[0], parts[1], inj, attack, benchmark_version)
        case.check()
        return case

    def check(self) -> None:
        """Raise [`CaseError`] unless every name exists in the benchmark."""
        suites = get_suites(self.benchmark_version)
        if not suites:
            raise CaseError(f"unknown benchmark version {self.benchmark_version!r}")
        if self.suite not in suites:
            raise CaseError(f"unknown suite {self.suite!r} (known: {sorted(suites)})")
        suite = suites[self.suite]
        if self.user_task not in suite.user_tasks:
            raise CaseError(f"unknown user task {self.user_task!r} in {self.suite}")
        if self.injection_task is not None and self.injection_task not in suite.injection_tasks:
            raise CaseError(f"unknown injection task {self.injection_task!r} in {self.suite}")


def suite_of(case: Case) -> TaskSuite:
    """The case's task suite."""
    return get_suite(case.benchmark_version, case.suite)


def user_task_of(case: Case) -> BaseUserTask:
    """The case's user task (the version its benchmark version selects)."""
    return suite_of(case).get_user_task_by_id(case.user_task)


def injection_task_of(case: Case) -> BaseInjectionTask | None:
    """The case's injection task, or ``None`` for a benign case."""
    if case.injection_task is None:
        return None
    return suite_of(case).get_injection_task_by_id(case.injection_task)


def in_v1_1_view(suite: TaskSuite, injection_task_id: str) -> bool:
    """Whether a pair with this injection task belongs to the 629-pair v1.1
    view: the injection task was first registered before benchmark v1.2."""
    versions = suite._injection_tasks[injection_task_id]  # noqa: SLF001 -- the registry's only record of versions
    return min(versions) < V1_2


class _NamedPipeline:
    """What an AgentDojo attack reads of the pipeline it attacks: its name
    (for the victim model's name in the injected text)."""

    def __init__(self, name: str) -> None:
        self.name = name


@functools.lru_cache(maxsize=None)
def attack_for(benchmark_version: str, suite_name: str, attack: str, victim_model: str = DEFAULT_VICTIM_MODEL):
    """AgentDojo's attack object for a suite (cached: it caches which vectors
    each user task's ground truth reads).

    Raises:
        CaseError: an unknown attack name.
    """
    suite = get_suite(benchmark_version, suite_name)
    try:
        return load_attack(attack, suite, _NamedPipeline(victim_model))
    except KeyError:
        raise CaseError(f"unknown attack {attack!r}") from None


def injections_for(case: Case, victim_model: str = DEFAULT_VICTIM_MODEL) -> dict[str, str]:
    """The injection vector -> text map AgentDojo's attack places for the case
    (empty for a benign case)."""
    inj = injection_task_of(case)
    if inj is None:
        return {}
    attack = attack_for(case.benchmark_version, case.suite, case.attack, victim_model)
    return dict(attack.attack(user_task_of(case), inj))


@dataclasses.dataclass
class Built:
    """A case's environment: ``env`` (the one calls change) and
    ``pre_env`` (a deep copy taken before any call), and the injections."""

    case: Case
    env: Any
    pre_env: Any
    injections: dict[str, str]


def build(case: Case, victim_model: str = DEFAULT_VICTIM_MODEL) -> Built:
    """Build the case's task environment as AgentDojo's
    ``run_task_with_pipeline`` does."""
    suite = suite_of(case)
    injections = injections_for(case, victim_model)
    env = suite.load_and_inject_default_environment(injections)
    env = user_task_of(case).init_environment(env)
    return Built(case, env, env.model_copy(deep=True), injections)


def fresh_copy(built: Built) -> Any:
    """A deep copy of the case's pre-environment."""
    return copy.deepcopy(built.pre_env)


def iter_cases(
    benchmark_version: str = BENCHMARK_VERSION,
    *,
    suites: list[str] | None = None,
    benign: bool = True,
    attacked: bool = True,
    attack: str = DEFAULT_ATTACK,
) -> Iterator[Case]:
    """Every case of the benchmark: per suite (in AgentDojo's order), the
    benign run of each user task, then each user task x injection task pair."""
    for name, suite in get_suites(benchmark_version).items():
        if suites and name not in suites:
            continue
        if benign:
            for ut in suite.user_tasks:
                yield Case(name, ut, None, attack, benchmark_version)
        if attacked:
            for ut in suite.user_tasks:
                for it in suite.injection_tasks:
                    yield Case(name, ut, it, attack, benchmark_version)
