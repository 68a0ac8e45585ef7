"""The tool catalog: up to date, and its checks bite."""

import dataclasses
import json
import unittest
from unittest import mock

from capsaga_agentdojo import annotations, catalog


class CatalogTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cat = catalog.build_catalog()

    def test_committed_catalog_is_current(self):
        self.assertEqual(json.loads(catalog.CATALOG.read_text()), json.loads(json.dumps(self.cat)))
        self.assertIn(catalog.markdown(self.cat), catalog.README.read_text())

    def test_every_tool_of_every_suite(self):
        counts = {s: len(v) for s, v in self.cat["suites"].items()}
        self.assertEqual(counts, {"workspace": 24, "travel": 28, "banking": 11, "slack": 11})

    def test_side_effects_read_from_the_code(self):
        by = {(s, e["name"]): e for s, es in self.cat["suites"].items() for e in es}
        # Not read-only although the names say "get": both write the environment.
        self.assertTrue(by[("workspace", "get_unread_emails")]["has_side_effects"])
        self.assertTrue(by[("slack", "get_webpage")]["has_side_effects"])
        self.assertEqual(by[("slack", "get_webpage")]["key_args"], ["url"])
        self.assertFalse(by[("banking", "read_file")]["has_side_effects"])
        self.assertIn("[].sender", by[("workspace", "get_received_emails")]["attacker_controllable_fields"])
        self.assertNotIn("[].id_", by[("workspace", "get_received_emails")]["attacker_controllable_fields"])
        self.assertEqual(by[("banking", "send_money")]["key_args"], ["recipient", "amount", "date"])

    def test_a_wrong_side_effect_annotation_is_caught(self):
        wrong = dict(annotations.WORKSPACE)
        wrong["get_unread_emails"] = dataclasses.replace(wrong["get_unread_emails"], writes=None, effect=None)
        with mock.patch.dict(annotations.ANNOTATIONS, {"workspace": wrong}):
            with self.assertRaises(catalog.CatalogError) as e:
                catalog.build_catalog()
        self.assertIn("get_unread_emails: annotated read-only", str(e.exception))

    def test_a_name_collision_is_caught(self):
        with mock.patch.object(catalog, "capsaga_names", return_value=({"send_money"}, [])):
            with self.assertRaises(catalog.CatalogError) as e:
                catalog.build_catalog()
        self.assertIn("banking/send_money: collides", str(e.exception))


if __name__ == "__main__":
    unittest.main()
