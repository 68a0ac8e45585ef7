"""Stamping one component per tool."""

import json
import unittest

from capsaga_agentdojo import stamp

META = {"name": "send_money", "description": "d", "args_schema": {"type": "object"}, "has_side_effects": True, "risk": "medium", "returns_untrusted": False, "function": "send_money", "output": "text"}


def generic(extra=b""):
    region = stamp.MARKER + b" " * (stamp.STAMP_LEN - len(stamp.MARKER))
    return b"\x00asm\x0d\x00\x01\x00" + b"code" * 10 + region + b"tail" + extra


class StampTest(unittest.TestCase):
    def test_stamps_in_place(self):
        g = generic()
        out = stamp.stamp(g, META)
        self.assertEqual(len(out), len(g))
        at = out.find(stamp.MARKER)
        self.assertEqual(out[:at], g[:at])
        self.assertEqual(out[at + stamp.STAMP_LEN :], g[at + stamp.STAMP_LEN :])
        body = out[at + len(stamp.MARKER) : at + stamp.STAMP_LEN]
        self.assertEqual(json.loads(body), META)

    def test_refuses_what_it_cannot_stamp(self):
        with self.assertRaises(stamp.StampError):
            stamp.stamp(b"no marker", META)
        with self.assertRaises(stamp.StampError):
            stamp.stamp(generic(stamp.MARKER), META)
        with self.assertRaises(stamp.StampError):
            stamp.stamp(stamp.stamp(generic(), META), META)
        with self.assertRaises(stamp.StampError):
            stamp.stamp(generic(), {**META, "description": "x" * stamp.STAMP_LEN})

    def test_field_labels_from_the_catalog(self):
        self.assertEqual(stamp.pointer("[].id_"), "/*/id_")
        self.assertEqual(stamp.pointer("id_"), "/id_")
        self.assertEqual(stamp.pointer("[]"), "/*")
        self.assertEqual(stamp.pointer("{}.value"), "/*/value")
        self.assertIsNone(stamp.pointer("$"))
        self.assertIsNone(stamp.pointer("{}"))
        entry = {"output_fields": {"[].id_": "system", "[].title": "third_party", "[].owner": "user", "subject": "echo", "$": "system"}}
        self.assertEqual(
            stamp.field_labels(entry),
            [
                {"path": "/*/id_", "integrity": "trusted"},
                {"path": "/*/title", "integrity": "untrusted"},
                {"path": "/subject", "integrity": "untrusted"},
            ],
        )
        self.assertEqual(stamp.trusted_fields(entry), ["/*/id_"])
        self.assertEqual(stamp.meta_of({**entry, "name": "n", "description": "d", "args_schema": {}, "has_side_effects": False, "bench_risk": "low", "returns_untrusted": True, "agentdojo_function": "n"})["fields"], stamp.field_labels(entry))

    def test_the_built_component_holds_one_placeholder(self):
        if not stamp.GENERIC.is_file():
            self.skipTest("generic component not built (scripts/agentdojo component)")
        g = stamp.GENERIC.read_bytes()
        self.assertEqual(g.count(stamp.MARKER), 1)
        self.assertEqual(len(stamp.stamp(g, META)), len(g))


if __name__ == "__main__":
    unittest.main()
