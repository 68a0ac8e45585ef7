"""The gullible model over the OpenAI chat-completions wire format."""

import json
import unittest

from capsaga_agentdojo.httpjson import HttpError, request
from capsaga_agentdojo.model_server import ModelServer

CASE = {"suite": "banking", "user_task": "user_task_0", "injection_task": "injection_task_0"}
TOOLS = [{"type": "function", "function": {"name": n, "description": "", "parameters": {"type": "object"}}} for n in ("read_file", "send_money", "plan_tools")]


class ModelServerTest(unittest.TestCase):
    def serve(self, **kw):
        srv = ModelServer(**kw).server().start()
        self.addCleanup(srv.stop)
        loaded = request(f"{srv.url}/case", CASE)
        return srv.url, loaded

    def chat(self, url, messages, tools=TOOLS):
        return request(f"{url}/v1/chat/completions", {"model": "m", "messages": messages, "tools": tools})

    def test_a_turn_on_the_wire(self):
        url, loaded = self.serve()
        msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": loaded["prompt"]}]
        r = self.chat(url, msgs)
        self.assertEqual(r["object"], "chat.completion")
        choice = r["choices"][0]
        self.assertEqual(choice["finish_reason"], "tool_calls")
        tc = choice["message"]["tool_calls"][0]
        self.assertEqual(tc["type"], "function")
        self.assertEqual(tc["function"]["name"], "read_file")
        self.assertIsInstance(tc["function"]["arguments"], str)
        self.assertEqual(json.loads(tc["function"]["arguments"]), {"file_path": "bill-december-2023.txt"})
        msgs.append(choice["message"])
        # capsaga sends content as text parts sometimes: accepted.
        msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": [{"type": "text", "text": "Bill: 98.70 to UK12345678901234567890"}]})
        r = self.chat(url, msgs)
        self.assertEqual(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "send_money")
        state = request(f"{url}/state")
        self.assertIsNone(state["obeyed_after"])

    def test_final_answer_and_tool_choice_none(self):
        url, loaded = self.serve()
        msgs = [{"role": "user", "content": loaded["prompt"]}]
        r = request(f"{url}/v1/chat/completions", {"messages": msgs, "tools": TOOLS, "tool_choice": "none"})
        self.assertEqual(r["choices"][0]["finish_reason"], "stop")
        self.assertIsInstance(r["choices"][0]["message"]["content"], str)

    def test_wrong_prompt_or_transcript_is_refused(self):
        url, loaded = self.serve()
        with self.assertRaises(HttpError) as e:
            self.chat(url, [{"role": "user", "content": "something else"}])
        self.assertEqual(e.exception.status, 409)
        bad = [
            {"role": "user", "content": loaded["prompt"]},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_balance", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "1.0"},
        ]
        with self.assertRaises(HttpError) as e:
            self.chat(url, bad)
        self.assertEqual(e.exception.status, 409)

    def test_plan_as_content(self):
        url, loaded = self.serve(plan="content")
        r = self.chat(url, [{"role": "user", "content": loaded["prompt"]}])
        msg = r["choices"][0]["message"]
        self.assertEqual(json.loads(msg["content"]), {"plan": {"tools": ["read_file", "send_money"]}})
        self.assertEqual(msg["tool_calls"][0]["function"]["name"], "read_file")

    def test_plan_as_a_tool_call_only_when_offered(self):
        url, loaded = self.serve(plan="tool:plan_tools")
        msgs = [{"role": "user", "content": loaded["prompt"]}]
        r = self.chat(url, msgs)
        tc = r["choices"][0]["message"]["tool_calls"][0]
        self.assertEqual(tc["function"]["name"], "plan_tools")
        self.assertEqual(json.loads(tc["function"]["arguments"]), {"tools": ["read_file", "send_money"]})
        msgs += [r["choices"][0]["message"], {"role": "tool", "tool_call_id": tc["id"], "content": "ok"}]
        r = self.chat(url, msgs)
        self.assertEqual(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "read_file")
        # Not offered: no plan call.
        r = self.chat(url, [{"role": "user", "content": loaded["prompt"]}], tools=TOOLS[:2])
        self.assertEqual(r["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "read_file")


if __name__ == "__main__":
    unittest.main()
