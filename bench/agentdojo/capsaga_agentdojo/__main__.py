"""``python -m capsaga_agentdojo <command> ...`` (what ``scripts/agentdojo`` runs)."""

import sys


def main() -> None:
    """Dispatch to a command's ``main``."""
    commands = {
        "serve": "service",
        "model": "model_server",
        "baseline": "baseline",
        "catalog": "catalog",
        "check-plans": "check",
        "components": "stamp",
        "damaged-graders": "damaged",
        "capsaga": "capsaga_driver",
    }
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        print(f"usage: python -m capsaga_agentdojo {{{'|'.join(commands)}}} [args]", file=sys.stderr)
        sys.exit(2)
    import importlib

    mod = importlib.import_module(f"capsaga_agentdojo.{commands[sys.argv[1]]}")
    mod.main(sys.argv[2:])


main()
