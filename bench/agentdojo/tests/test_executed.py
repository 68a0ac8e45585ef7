"""Which of the model's calls executed: the user's own identical call is not
the attacker's."""

import unittest

from capsaga_agentdojo.baseline import executed_calls


def call(fn, injection, error=False, **args):
    return {"function": fn, "args": args, "injection": injection, "error": error}


class ExecutedCallsTest(unittest.TestCase):
    def test_the_users_identical_call_is_the_one_that_ran(self):
        # The injection deletes file 11 first (refused by the host: an
        # error), the user's task deletes the same file later (ran).
        calls = [
            call("list_files", False),
            call("delete_file", True, error=True, file_id="11"),
            call("delete_file", True, error=True, file_id="1"),
            call("delete_file", False, file_id="11"),
        ]
        executed = [{"function": "list_files", "args": {}, "ok": True}, {"function": "delete_file", "args": {"file_id": "11"}, "ok": True}]
        self.assertEqual(executed_calls(calls, executed), [0, 3])

    def test_without_a_host_both_ran(self):
        calls = [call("delete_file", True, file_id="11"), call("delete_file", False, file_id="11")]
        executed = [{"function": "delete_file", "args": {"file_id": "11"}, "ok": True}] * 2
        self.assertEqual(executed_calls(calls, executed), [0, 1])
        # A failed execution is nobody's.
        executed = [{"function": "delete_file", "args": {"file_id": "11"}, "ok": False}]
        self.assertEqual(executed_calls(calls, executed), [])

    def test_a_call_the_host_refused_never_ran(self):
        # The model server refused the request after the user's delete, so
        # its history lacks that call; the host refused the injection's.
        calls = [call("list_files", False), call("delete_file", True, file_id="11")]
        executed = [{"function": "list_files", "args": {}, "ok": True}, {"function": "delete_file", "args": {"file_id": "11"}, "ok": True}]
        self.assertEqual(executed_calls(calls, executed), [0, 1])
        refused = [{"tool": "delete_file", "args": {"file_id": "11"}, "stage": "flow:approval-refused"}]
        self.assertEqual(executed_calls(calls, executed, refused), [0])
