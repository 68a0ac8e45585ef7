"""capsaga's harness around AgentDojo (issue 47): the benchmark's cases, an
environment service over loopback HTTP, the tool catalog, a gullible scripted
model speaking the OpenAI chat-completions wire format, and drivers.

AgentDojo (``agentdojo==0.1.35``, installed by ``scripts/agentdojo install``)
is used as a library only; nothing here copies its code. Nothing in ``host/``
imports this package: it is a benchmark, never on capsaga's request path.
"""

#: The AgentDojo release this harness is written against (pinned by the
#: launcher's requirements file).
AGENTDOJO_VERSION = "0.1.35"

#: The benchmark version measured by default.
BENCHMARK_VERSION = "v1.2.2"
