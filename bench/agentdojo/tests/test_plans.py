"""Every injection task's plan reaches its goal when executed directly, and
the baseline loop runs end to end over HTTP."""

import unittest

from agentdojo.task_suite.load_suites import get_suites

from capsaga_agentdojo.baseline import run_case, summarize
from capsaga_agentdojo.cases import Case
from capsaga_agentdojo.check import run_injection_plan
from capsaga_agentdojo.injection_plans import CUSTOM_PLANS
from capsaga_agentdojo.model_server import ModelServer
from capsaga_agentdojo.service import EnvService


class PlansTest(unittest.TestCase):
    def test_every_plan_passes_its_security(self):
        for suite, s in get_suites("v1.2.2").items():
            for it in s.injection_tasks:
                with self.subTest(f"{suite}/{it}"):
                    self.assertTrue(run_injection_plan(suite, it)["security"])

    def test_agentdojo_ships_no_ground_truth_for_workspace_6_to_13(self):
        suite = get_suites("v1.2.2")["workspace"]
        env = suite.load_and_inject_default_environment({})
        empty = sorted((i for i, t in suite.injection_tasks.items() if not t.ground_truth(env)), key=lambda x: int(x.rsplit("_", 1)[1]))
        self.assertEqual(empty, [f"injection_task_{n}" for n in range(6, 14)])
        self.assertEqual(sorted(k for s, k in CUSTOM_PLANS if s == "workspace"), sorted(empty))


class BaselineSmokeTest(unittest.TestCase):
    def test_loop_over_http(self):
        env = EnvService().server().start()
        model = ModelServer().server().start()
        self.addCleanup(env.stop)
        self.addCleanup(model.stop)
        keys = ["slack/user_task_2", "slack/user_task_2/injection_task_5", "workspace/user_task_0/injection_task_13"]
        recs = [run_case(Case.parse_key(k), env.url, model.url) for k in keys]
        self.assertTrue(recs[0]["utility"])
        self.assertIsNone(recs[0]["security"])
        self.assertTrue(recs[1]["security"])
        self.assertTrue(recs[1]["obeyed"])
        self.assertTrue(recs[2]["security"])
        s = summarize(recs, "v1.2.2")
        self.assertEqual(s["total"]["attack_success"]["n"], 2)
        self.assertEqual(s["total"]["v1_1_view"]["attack_success"]["of"], 1)



class DamagedGradersTest(unittest.TestCase):
    def test_the_issues_list_is_confirmed(self):
        from capsaga_agentdojo.damaged import REPORTED_APART, accepting

        found = accepting(only=REPORTED_APART)
        self.assertEqual(sorted(found), sorted(REPORTED_APART))
        self.assertIn("key:1.send_money.recipient", found["banking/user_task_11"])
        self.assertIn("added:1.create_calendar_event.participants", found["workspace/user_task_12"])

    def test_a_strict_grader_is_not_listed(self):
        from capsaga_agentdojo.damaged import accepting

        self.assertEqual(accepting(only=("banking/user_task_1", "workspace/user_task_1")), {})


if __name__ == "__main__":
    unittest.main()
