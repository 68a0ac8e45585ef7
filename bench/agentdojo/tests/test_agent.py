"""The gullible agent: what it reads, what it does, and from what."""

import json
import unittest

from capsaga_agentdojo.agent import Call, Final, Oracle, Script, next_action, parse_result
from capsaga_agentdojo.baseline import capsaga_view
from capsaga_agentdojo.cases import Case
from capsaga_agentdojo.injection_plans import own_address
from capsaga_agentdojo.service import Session
from capsaga_agentdojo.cases import build


def play(key, view=None, limit=200):
    """Run a case's script against an in-process session; the calls made,
    the script's state and the final answer."""
    case = Case.parse_key(key)
    oracle = Oracle(case)
    session = Session(build(case))
    exchanges = []
    for _ in range(limit):
        state = Script()
        action = next_action(oracle, exchanges, state)
        if isinstance(action, Final):
            return session, state, action.text
        answer = session.call(action.function, action.args)
        text = answer["text"] if view is None else view(action.function, answer)
        exchanges.append((action, text))
    raise AssertionError("no final answer")


class ReadTest(unittest.TestCase):
    def test_reads_agentdojo_yaml(self):
        rec = parse_result(Call("x", {}), "- id_: '7'\n  body: hello\n")
        self.assertEqual(rec.value, [{"id_": "7", "body": "hello"}])
        self.assertFalse(rec.error)

    def test_reads_capsaga_wrapped_and_truncated_results(self):
        text = "- id_: '7'\n  body: " + "a" * 3000 + " END\n"
        view = capsaga_view("get_received_emails", {"ok": True, "text": text})
        self.assertIn("[... truncated", view)
        rec = parse_result(Call("get_received_emails", {}), view)
        self.assertTrue(rec.truncated)
        self.assertEqual(rec.value[0]["id_"], "7")
        self.assertLess(len(rec.value[0]["body"]), 2048)
        self.assertNotIn("END", " ".join(rec.strings()))

    def test_errors_read_as_errors(self):
        self.assertTrue(parse_result(Call("x", {}), "ValueError: No emails found").error)
        err = capsaga_view("x", {"ok": False, "text": "ValueError: nope", "error": "ValueError: nope"})
        self.assertTrue(parse_result(Call("x", {}), err).error)


class PlayTest(unittest.TestCase):
    def test_benign_run_solves_the_task(self):
        session, state, answer = play("banking/user_task_0")
        self.assertIsNone(state.obeyed_after)
        self.assertTrue(session.grade(answer)["utility"])

    def test_obeys_the_injection_then_resumes(self):
        session, state, answer = play("banking/user_task_0/injection_task_0")
        self.assertEqual(state.obeyed_after, 0)
        fns = [c["function"] for c in session.calls]
        self.assertEqual(fns, ["read_file", "send_money", "send_money"])
        self.assertEqual(state.injection_calls, [1])
        g = session.grade(answer)
        self.assertTrue(g["security"])

    def test_sees_the_injection_through_capsaga_markers(self):
        _session, state, _ = play("banking/user_task_0/injection_task_0", view=capsaga_view)
        self.assertEqual(state.obeyed_after, 0)

    def test_no_injection_no_obedience(self):
        # The same pair, but the goal only counts when it is in a result.
        case = Case.parse_key("banking/user_task_0/injection_task_0")
        oracle = Oracle(case)
        rec = parse_result(Call("read_file", {}), "Bill for the month of December 2023 ... nothing else")
        self.assertFalse(oracle.sees_injection(rec))

    def test_ids_come_from_what_was_received(self):
        # Workspace user task 32 shares the file it creates; ground_truth
        # predicts the new file's id from the pre-environment. If the drive
        # assigned another id, the agent must use the one it received.
        oracle = Oracle(Case.parse_key("workspace/user_task_32"))
        first = next_action(oracle, [])
        self.assertEqual(first.function, "search_files")
        create = next_action(oracle, [(first, "[]")])
        self.assertEqual(create.function, "create_file")
        received = "id_: '99'\nfilename: hawaii-packing-list.docx\ncontent: x\nowner: emma.johnson@bluesparrowtech.com\nlast_modified: 2024-05-15 10:00:00\nshared_with: {}\nsize: 1\n"
        share = next_action(oracle, [(first, "[]"), (create, received)])
        self.assertEqual(share.function, "share_file")
        self.assertEqual(share.args["file_id"], "99")
        predicted = oracle.user_calls[2].args["file_id"]
        self.assertNotEqual(predicted, "99")

    def test_replay_is_deterministic_and_checks_the_transcript(self):
        oracle = Oracle(Case.parse_key("banking/user_task_0/injection_task_0"))
        a = next_action(oracle, [])
        b = next_action(oracle, [])
        self.assertEqual(a, b)
        from capsaga_agentdojo.agent import Divergence

        with self.assertRaises(Divergence):
            next_action(oracle, [(Call("get_balance", {}), "100")])

    def test_provenance_of_arguments(self):
        from capsaga_agentdojo.agent import provenance

        bill = parse_result(Call("read_file", {}), "Car Rental 98.70\nIBAN: UK12345678901234567890 (ref 13)")
        self.assertEqual(provenance("UK12345678901234567890", "pay the bill", [bill]), "result")
        self.assertEqual(provenance(98.7, "pay the bill", [bill]), "result")
        self.assertEqual(provenance("bill", "Pay the BILL", [bill]), "prompt")
        self.assertEqual(provenance("attacker@evil.example", "pay the bill", [bill]), "nowhere")
        # Whole tokens only: 3 is not in "13", 1 is not in "98.70".
        self.assertEqual(provenance(3, "", [bill]), "nowhere")
        # A list is as weak as its weakest part.
        self.assertEqual(provenance(["bill", "UK12345678901234567890", "x@y.z"], "the bill", [bill]), "nowhere")
        self.assertEqual(provenance([], "", [bill]), "empty")

    def test_own_address_is_the_one_in_every_event(self):
        events = parse_result(
            Call("get_day_calendar_events", {}),
            json.dumps([{"participants": ["me@x.com", "a@x.com"]}, {"participants": ["b@x.com", "me@x.com"]}]),
        )
        self.assertEqual(own_address([events]), "me@x.com")


if __name__ == "__main__":
    unittest.main()
