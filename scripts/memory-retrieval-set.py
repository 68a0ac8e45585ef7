#!/usr/bin/env python3
"""Generate the memory's retrieval sets (issue 49), in the style of
LongMemEval's retrieval evaluation (Wu et al. 2024): each sender has six
months of chat sessions about everyday things (the haystack); a few
sessions hold the evidence of a question asked after the last session.

Six kinds of question:
  single        one fact stated once, the question shares words with it;
  paraphrased   the same, the question in other words (little overlap);
  distractors   the question shares its words with turns of other sessions
                that do not answer it;
  updated       the value was changed in a later session, often in fewer
                and other words ("I moved the dentist to Thursday"): the
                evidence is the later session;
  temporal      the topic recurs in many sessions; the question names when
                ("in March", "two weeks ago", "on April 3"), and only one
                mention falls there;
  multi-session the answer needs two sessions: both are the evidence.

Two sets come out of one run: `tuned` (what the retrieval may be tuned on)
and `holdout` (never tuned on). Every other family of facts of each kind
goes to the hold-out, so its facts, wordings and questions are not the
tuned set's; its senders, dates and haystack come from another seed.

usage: scripts/memory-retrieval-set.py [OUT_DIR]
  (default host/memory/tests/data/retrieval)

Each set is two files: `<set>.sessions.jsonl`, the conversations in the
format of `capsaga memory import` (one session a line: sender, session_id,
started_at, turns with role, content and the time of each user turn), and
`<set>.questions.json`: id, kind, sender, question, asked_at, the evidence
sessions and the expected answer. Deterministic.
"""
import datetime as dt
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory_set_content as C  # noqa: E402

START = dt.datetime(2025, 1, 6, tzinfo=dt.timezone.utc)  # a Monday
DAYS = 176  # about six months
SENDERS = 36
MONTHS = ["January", "February", "March", "April", "May", "June", "July",
          "August", "September", "October", "November", "December"]
NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}
ACK = ["Noted, I'll remember that.", "Got it.", "Thanks, noted.", "Okay, good to know.",
       "Understood, I'll keep that in mind."]


def iso(t):
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def split(families, holdout):
    return [f for i, f in enumerate(families) if (i % 2 == 1) == holdout]


def month_end(d):
    nxt = (d.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return (nxt - dt.timedelta(days=1)).day


def phrases(day, asked):
    """Time phrases naming `day` as seen on `asked` (both dates), each with
    the window of dates it covers, inclusive. The same reading as
    capsaga-memory's `when` module."""
    out = []
    m = MONTHS[day.month - 1]
    out.append((f"on {m} {day.day}", day, day))
    first = day.replace(day=1)
    last = day.replace(day=month_end(day))
    out.append((f"in {m}", first, last))
    for name, lo, hi in (("early", 1, 10), ("mid", 11, 20), ("late", 21, month_end(day))):
        if lo <= day.day <= hi:
            out.append((f"in {name} {m}" if name != "mid" else f"in mid-{m}",
                        day.replace(day=lo), day.replace(day=hi)))
    gap = (asked - day).days
    if gap == 1:
        out.append(("yesterday", day, day))
    elif 2 <= gap <= 6:
        out.append((f"{NUMBERS[gap]} days ago", day, day))
    week0 = asked - dt.timedelta(days=asked.weekday())
    for n in (1, 2, 3):
        lo = week0 - dt.timedelta(days=7 * n)
        hi = lo + dt.timedelta(days=6)
        if lo <= day <= hi:
            out.append(("last week" if n == 1 else f"{NUMBERS[n]} weeks ago", lo, hi))
    prev = (asked.replace(day=1) - dt.timedelta(days=1))
    if (day.year, day.month) == (prev.year, prev.month):
        out.append(("last month", prev.replace(day=1), prev))
    return out


class Sender:
    def __init__(self, rng, name):
        self.rng = rng
        self.name = name
        n = rng.randint(28, 36)
        days = sorted(rng.sample(range(DAYS), n))
        self.sessions = []
        for i, d in enumerate(days):
            start = START + dt.timedelta(days=d, hours=rng.randint(7, 21), minutes=rng.randrange(60))
            turns = [C.filler(rng) for _ in range(rng.randint(3, 7))]
            self.sessions.append({"id": f"{name}-s{i:03d}", "start": start, "turns": turns, "used": False})
        last = self.sessions[-1]["start"].date()
        self.asked = dt.datetime.combine(last + dt.timedelta(days=rng.randint(1, 3)), dt.time(20, 0),
                                         tzinfo=dt.timezone.utc)

    def free(self, lo=0, hi=None):
        """A session not yet holding evidence, index in [lo, hi)."""
        hi = len(self.sessions) if hi is None else hi
        cands = [i for i in range(lo, hi) if not self.sessions[i]["used"]]
        i = self.rng.choice(cands)
        self.sessions[i]["used"] = True
        return i

    def put(self, i, user, reply):
        t = self.sessions[i]["turns"]
        t.insert(self.rng.randrange(len(t) + 1), (user, reply))

    def distract(self, texts, avoid):
        for d in texts:
            i = self.rng.choice([j for j in range(len(self.sessions)) if j not in avoid])
            self.put(i, d, self.rng.choice(C.REPLY_OPEN) + " Here is what I can tell you.")

    def lines(self):
        for s in self.sessions:
            turns = []
            t = s["start"]
            for u, a in s["turns"]:
                turns.append({"role": "user", "content": u, "at": iso(t)})
                turns.append({"role": "assistant", "content": a})
                t += dt.timedelta(minutes=self.rng.randint(1, 4), seconds=self.rng.randrange(60))
            yield {"sender": self.name, "session_id": s["id"], "started_at": iso(s["start"]), "turns": turns}


def plant_fact(s, fam, kind, rng):
    v = rng.choice(fam["values"])
    i = s.free()
    s.put(i, rng.choice(fam["evidence"]).format(v=v), rng.choice(ACK))
    n = {"single": 1, "paraphrased": 1, "distractors": 4}[kind]
    s.distract(rng.sample(fam["distract"], n), {i})
    q = fam["qp"] if kind == "paraphrased" else fam["q"]
    return q, [s.sessions[i]["id"]], v


def plant_update(s, fam, rng):
    vals = rng.sample(fam["values"], 3)
    half = len(s.sessions) // 2
    i = s.free(0, half)
    s.put(i, rng.choice(fam["evidence"]).format(v=vals[0]), rng.choice(ACK))
    j = s.free(half, len(s.sessions))
    s.put(j, rng.choice(fam["update"]).format(w=vals[1]), rng.choice(ACK))
    last, value = j, vals[1]
    if rng.random() < 0.3 and j + 2 < len(s.sessions):
        k = s.free(j + 1, len(s.sessions))
        s.put(k, rng.choice(fam["update"]).format(w=vals[2]), rng.choice(ACK))
        last, value = k, vals[2]
    s.distract(rng.sample(fam["distract"], 1), {i, j, last})
    return fam["q"], [s.sessions[last]["id"]], value


def plant_temporal(s, fam, rng):
    n = min(rng.randint(7, 9), len(fam["values"]))
    vals = rng.sample(fam["values"], n)
    # Spread over the six months, one mention per session.
    picks = sorted(rng.sample([k for k in range(len(s.sessions)) if not s.sessions[k]["used"]], n))
    for k, v in zip(picks, vals):
        s.sessions[k]["used"] = True
        s.put(k, rng.choice(fam["mention"]).format(v=v), rng.choice(ACK))
    asked = s.asked.date()
    days = [s.sessions[k]["start"].date() for k in picks]
    order = list(range(n))
    rng.shuffle(order)
    for t in order:
        ok = []
        for text, lo, hi in phrases(days[t], asked):
            if sum(lo <= d <= hi for d in days) == 1:
                ok.append(text)
        if ok:
            # Relative phrases when the date allows them, a part of a month
            # more often than an exact day (as people say it).
            rel = [p for p in ok if not p.startswith(("on ", "in "))]
            month = [p for p in ok if p.startswith("in ")]
            if rel and rng.random() < 0.6:
                when = rng.choice(rel)
            elif month and rng.random() < 0.75:
                when = rng.choice(month)
            else:
                when = rng.choice(ok)
            return fam["q"].format(when=when), [s.sessions[picks[t]]["id"]], vals[t]
    raise RuntimeError("no unambiguous time phrase")


def plant_multi(s, fam, rng):
    a, b = rng.choice(fam["a"]), rng.choice(fam["b"])
    i = s.free(0, len(s.sessions) // 2)
    j = s.free(len(s.sessions) // 2, len(s.sessions))
    s.put(i, fam["parts"][0].format(a=a, b=b), rng.choice(ACK))
    s.put(j, fam["parts"][1].format(a=a, b=b), rng.choice(ACK))
    return fam["q"], [s.sessions[i]["id"], s.sessions[j]["id"]], f"{a}; {b}"


def build(holdout):
    rng = random.Random(4949 if holdout else 49)
    prefix = "ho" if holdout else "tu"
    facts = split(C.FACTS, holdout)
    updates = split(C.UPDATES, holdout)
    temporal = split(C.TEMPORAL, holdout)
    multi = split(C.MULTI, holdout)
    senders, questions = [], []
    for u in range(SENDERS):
        s = Sender(rng, f"{prefix}-user-{u:02d}")
        planned = []
        fs = rng.sample(facts, 4)
        for fam, kind in zip(fs, ["single", "single", "paraphrased", "distractors"]):
            planned.append((kind,) + plant_fact(s, fam, kind, rng))
        for fam in rng.sample(updates, 2):
            planned.append(("updated",) + plant_update(s, fam, rng))
        planned.append(("temporal",) + plant_temporal(s, rng.choice(temporal), rng))
        planned.append(("multi-session",) + plant_multi(s, rng.choice(multi), rng))
        for kind, q, ev, answer in planned:
            questions.append({"id": f"{prefix}-q{len(questions):04d}", "kind": kind, "sender": s.name,
                              "question": q, "asked_at": iso(s.asked), "evidence": ev, "answer": answer})
        senders.append(s)
    return senders, questions


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "host/memory/tests/data/retrieval"
    os.makedirs(out, exist_ok=True)
    for name, holdout in (("tuned", False), ("holdout", True)):
        senders, questions = build(holdout)
        n_ex = 0
        with open(os.path.join(out, f"{name}.sessions.jsonl"), "w") as f:
            for s in senders:
                for line in s.lines():
                    n_ex += sum(t["role"] == "user" for t in line["turns"])
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
        with open(os.path.join(out, f"{name}.questions.json"), "w") as f:
            json.dump({"source": "scripts/memory-retrieval-set.py", "set": name, "questions": questions},
                      f, ensure_ascii=False, indent=1)
            f.write("\n")
        kinds = {}
        for q in questions:
            kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
        n_sess = sum(len(s.sessions) for s in senders)
        print(f"{name}: {len(senders)} senders, {n_sess} sessions, {n_ex} exchanges, "
              f"{len(questions)} questions {kinds}")


if __name__ == "__main__":
    main()
