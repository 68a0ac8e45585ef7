"""The capsaga driver: the policy it writes, and (when a capsaga binary and
the stamped components are there) one case end to end through capsaga."""

import json
import os
import tomllib
import unittest
from pathlib import Path

from capsaga_agentdojo import capsaga_driver
from capsaga_agentdojo.catalog import CATALOG
from capsaga_agentdojo.stamp import OUT as COMPONENTS


class PolicyTest(unittest.TestCase):
    def test_policy_grants_only_the_service(self):
        text = capsaga_driver.policy(
            "banking", ["send_money", "read_file"], Path("/c/banking"), Path("/s"), "http://127.0.0.1:8123", "http://127.0.0.1:8124"
        )
        p = tomllib.loads(text)
        self.assertEqual(p["tools_dir"], "/c/banking")
        self.assertEqual(p["env"], {"AGENTDOJO_URL": "http://127.0.0.1:8123"})
        self.assertEqual(p["tools"]["send_money"]["grants"], ["net:http:127.0.0.1:8123", "env:AGENTDOJO_URL"])
        self.assertEqual(set(p["tools"]), {"send_money", "read_file"})
        prov = p["providers"]["gullible"]
        self.assertEqual((prov["kind"], prov["base_url"], prov["keyless"]), ("openai", "http://127.0.0.1:8124/v1", True))
        self.assertEqual(p["agent"]["provider_order"], ["gullible"])

    def test_policy_confirms_the_system_fields(self):
        entries = [
            {"name": "get_most_recent_transactions", "has_side_effects": False, "output_fields": {"[].id": "system", "[].sender": "third_party"}},
            {"name": "send_money", "has_side_effects": True, "key_args": ["recipient"], "output_fields": {}},
        ]
        names = [e["name"] for e in entries]
        p = tomllib.loads(capsaga_driver.policy("banking", names, Path("/c"), Path("/s"), "http://127.0.0.1:1", "http://127.0.0.1:2", entries=entries))
        self.assertEqual(p["tools"]["get_most_recent_transactions"]["trusted_fields"], ["/*/id"])
        self.assertNotIn("trusted_fields", p["tools"]["send_money"])
        for kw in ({"fields": "off"}, {"flow": "off"}):
            p = tomllib.loads(capsaga_driver.policy("banking", names, Path("/c"), Path("/s"), "http://127.0.0.1:1", "http://127.0.0.1:2", entries=entries, **kw))
            self.assertNotIn("trusted_fields", p["tools"]["get_most_recent_transactions"])

    def test_irreversible_key_arguments_are_endorsed(self):
        entries = [
            {"name": "delete_file", "has_side_effects": True, "key_args": ["file_id"], "endorsed_args": ["file_id"], "output_fields": {}},
            {"name": "send_money", "has_side_effects": True, "key_args": ["recipient", "amount"], "endorsed_args": ["recipient"], "scanned_args": ["subject"], "output_fields": {}},
        ]
        names = [e["name"] for e in entries]
        p = tomllib.loads(capsaga_driver.policy("banking", names, Path("/c"), Path("/s"), "http://127.0.0.1:1", "http://127.0.0.1:2", entries=entries))
        self.assertEqual(p["tools"]["delete_file"]["sinks"], {"file_id": "endorsed"})
        self.assertEqual(p["tools"]["send_money"]["sinks"], {"recipient": "endorsed", "amount": "trusted", "subject": "identifiers"})
        # The catalog marks them: deletions, payments' recipients, sharing.
        catalog = json.loads(CATALOG.read_text())["suites"]
        endorsed = {(s, e["name"]): e["endorsed_args"] for s, es in catalog.items() for e in es if e["endorsed_args"]}
        self.assertEqual(endorsed[("workspace", "delete_file")], ["file_id"])
        self.assertEqual(endorsed[("workspace", "share_file")], ["email"])
        self.assertEqual(endorsed[("banking", "send_money")], ["recipient"])
        for (s, name), args in endorsed.items():
            entry = next(e for e in catalog[s] if e["name"] == name)
            self.assertTrue(set(args) <= set(entry["key_args"]), name)

BIN = Path(os.environ.get("CAPSAGA_BIN", capsaga_driver.DEFAULT_BIN))


@unittest.skipUnless(BIN.is_file() and (COMPONENTS / "banking").is_dir(), "needs target/debug/capsaga and scripts/agentdojo components")
class EndToEndTest(unittest.TestCase):
    def test_one_pair_through_capsaga(self):
        out = COMPONENTS.parent / "test-driver.json"
        capsaga_driver.main(["--case", "banking/user_task_0", "--case", "banking/user_task_0/injection_task_0", "--out", str(out), "--capsaga", str(BIN), "--plan", "content", "--approve", "user-calls"])
        result = json.loads(out.read_text())
        benign, attacked = result["cases"]
        # The bill's IBAN is asked about and granted (the user's own call).
        self.assertEqual(benign["outcome"], "success")
        self.assertTrue(benign["utility"])
        self.assertTrue(any(a["granted"] for a in benign["approvals"]))
        self.assertTrue(attacked["obeyed"])
        # The attacker's payment is asked about and refused: nothing of it ran.
        self.assertFalse(attacked["security"])
        self.assertEqual(attacked["attacker_effects_executed"], [])
        self.assertTrue(json.loads(CATALOG.read_text()))


if __name__ == "__main__":
    unittest.main()
