"""The neuron runner: a component of the `neuron` world (wit/neuron.wit) that
runs agent-written Python. Built by componentize-py, which imports this module
once at build time and snapshots the interpreter: `capsaga._lockdown.seal()`
below therefore runs at build time, and every instance starts warm from it.

Each export asks the host for the neuron's definition and runs it
(`capsaga._runtime.call`); `meta` returns the definition's meta unchanged;
`compile-neuron` compiles a source without running it, for the host to hand
back as the definition's `code` (`capsaga._runtime.compile_neuron`).
"""

import wit_world
import wit_world.exports
from wit_world.imports import neuron_host

import capsaga
import capsaga.http
from capsaga import _lockdown, _runtime


class WitWorld(wit_world.WitWorld):
    def meta(self):
        return neuron_host.definition().meta

    def execute(self, ctx, args_json):
        return _runtime.call("execute", ctx, args_json)

    def dry_run(self, ctx, args_json):
        return _runtime.call("dry-run", ctx, args_json)

    def compensate(self, ctx, args_json, output):
        _runtime.call("compensate", ctx, args_json, output)


class NeuronCompiler(wit_world.exports.NeuronCompiler):
    def compile_neuron(self, name, source):
        return _runtime.compile_neuron(name, source)


_lockdown.seal()
