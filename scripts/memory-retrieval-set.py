#!/usr/bin/env python3
"""Generate the memory's retrieval test set, in the style of LongMemEval's
retrieval evaluation (Wu et al. 2024, "LongMemEval: Benchmarking Chat
Assistants on Long-Term Interactive Memory"): each user has a history of
chat sessions (a haystack); a few sessions hold an evidence turn stating a
fact about the user; later questions need that fact, worded differently
from the evidence (paraphrased, sharing few words with it), while
distractor turns in other sessions share words with the question. The
measure is recall@5 of the evidence session: whether one of the five
episodes retrieved for the question belongs to the session holding the
evidence.

usage: scripts/memory-retrieval-set.py OUT_JSON [SEED]

Deterministic for a seed; the output is committed as
host/memory/tests/data/retrieval_set.json and read by the memory's
retrieval test and by `capsaga-bench --memory`.
"""
import json
import random
import sys

# (evidence turn, question, distractor turns sharing words with the question)
FACTS = [
    ("I finally adopted a beagle puppy and named him Biscuit.",
     "What did I name the puppy I adopted?",
     ["My neighbour's dog keeps barking at night.", "Is it true that puppies need many vaccines?"]),
    ("My sister Giulia just moved to Lisbon for her new job at a bank.",
     "Which city did my sister move to for work?",
     ["My sister loves board games.", "Which city has the best public transport?"]),
    ("I'm allergic to penicillin, found out the hard way last year.",
     "Which antibiotic am I allergic to?",
     ["Are allergies more common in spring?", "My friend is allergic to cats."]),
    ("Our wedding anniversary is on the 14th of September.",
     "When is my wedding anniversary?",
     ["What are good anniversary gift ideas in general?", "My cousin's wedding was lovely."]),
    ("I drive a 2019 blue Toyota Corolla, plate ends in 42K.",
     "What car do I drive?",
     ["Which car brands are the most reliable?", "I hate driving in the rain."]),
    ("I started learning the cello in January with a teacher called Marta.",
     "Which instrument am I learning, and who teaches me?",
     ["Is the piano harder to learn than the guitar?", "My teacher in school was strict."]),
    ("My employee badge number is 88213, I always forget it.",
     "What is my employee badge number?",
     ["Do employees get a badge on their first day?", "I forgot my umbrella again."]),
    ("I'm vegetarian but I still eat eggs and cheese.",
     "What is my diet?",
     ["Is a keto diet healthy?", "What cheese goes well with pears?"]),
    ("My daughter Sofia's school play is on Friday at 6 pm.",
     "When is Sofia's school play?",
     ["Which plays by Shakespeare are good for kids?", "School starts early on Monday."]),
    ("My landlord is Mr. Bianchi and rent is due on the 5th of each month.",
     "When do I have to pay the rent, and to whom?",
     ["Is it better to rent or to buy?", "The 5th symphony is my favourite."]),
    ("I run the Turin half marathon every October.",
     "Which race do I run every autumn?",
     ["How should I train for a marathon?", "Autumn leaves are beautiful."]),
    ("The wifi password at the cabin is pinecone-2024.",
     "What is the wifi password at the cabin?",
     ["Why is my home wifi so slow?", "I need a stronger password manager."]),
    ("My favourite restaurant is Trattoria da Gino near the station.",
     "Which restaurant do I like best?",
     ["Restaurants near the station are expensive.", "What is the best pizza style?"]),
    ("I have a dentist appointment with Dr. Rossi on March 3rd.",
     "When is my dentist appointment?",
     ["How often should I see a dentist?", "March is a rainy month here."]),
    ("My son Luca is allergic to peanuts, so no nut snacks at parties.",
     "What food must Luca avoid?",
     ["Are peanuts legumes or nuts?", "Party snacks ideas for kids?"]),
    ("I switched jobs: I'm now a data engineer at Acme Logistics.",
     "Where do I work now and in what role?",
     ["What does a data engineer do?", "Logistics companies are hiring."]),
    ("We are flying to Tokyo on May 12th, returning on the 26th.",
     "When are we flying to Japan?",
     ["What is the best season to visit Japan?", "Flying makes me nervous."]),
    ("My blood type is O negative.",
     "What blood type do I have?",
     ["Which blood types are universal donors?", "I should donate blood more often."]),
    ("My locker at the gym is number 117, combination 9-3-5.",
     "What is my gym locker number?",
     ["Which gym exercises are best for the back?", "The combination of colours was odd."]),
    ("I prefer tea over coffee, green tea without sugar.",
     "How do I take my hot drinks?",
     ["Is coffee bad for sleep?", "Sugar is in everything nowadays."]),
    ("My grandmother's birthday is on July 8th, she turns 90 this year.",
     "When is my grandmother's birthday and how old will she be?",
     ["What do you give someone turning 90?", "Birthdays in July are hot."]),
    ("I keep the spare house key with my neighbour Carla.",
     "Who has my spare key?",
     ["How do I make a copy of a key?", "My neighbour plays the drums."]),
    ("The project deadline for the Orion report is June 30th.",
     "When is the Orion report due?",
     ["How do I write a good report?", "Deadlines stress me out."]),
    ("I'm training for my first triathlon; swimming is my weakest part.",
     "Which discipline is my weakest in the triathlon?",
     ["Is swimming good exercise?", "What is the longest triathlon?"]),
    ("My bike was stolen last week, it was a red Bianchi road bike.",
     "What kind of bike did I lose?",
     ["How do I lock a bike properly?", "Red is my favourite colour."]),
]

FILLER = [
    "Can you recommend a good book for the weekend?",
    "How do I boil an egg perfectly?",
    "What's the weather usually like in November?",
    "Give me a quick stretching routine.",
    "How do I convert Celsius to Fahrenheit?",
    "Write a short haiku about mornings.",
    "What are some tips for better sleep?",
    "Explain compound interest simply.",
    "How do I remove a coffee stain?",
    "Suggest a name for a houseplant.",
    "How long should I steep black tea?",
    "What's a good way to learn vocabulary?",
    "Plan a simple dinner menu for four.",
    "How do solar panels work?",
    "What's the difference between a virus and bacteria?",
    "Summarise the plot of Hamlet in two lines.",
    "How many steps a day should I walk?",
    "Help me write a polite email declining an invitation.",
    "What is a good stretching routine after running?",
    "How do I clean a cast iron pan?",
    "Which houseplants need little light?",
    "How do I start journaling?",
    "What is the capital of Australia?",
    "How do I make my own bread?",
]

REPLIES = ["Sure, here is an idea.", "Good question.", "Here is what I would do.", "Happy to help.", "Noted."]


def main():
    out = sys.argv[1]
    rng = random.Random(int(sys.argv[2]) if len(sys.argv) > 2 else 4)
    users = []
    questions = []
    for u in range(20):
        sender = f"user-{u:02d}"
        facts = rng.sample(FACTS, 5)
        n_sessions = 12
        evidence_at = rng.sample(range(n_sessions - 1), len(facts))
        sessions = []
        for s in range(n_sessions):
            turns = [[rng.choice(FILLER), rng.choice(REPLIES)] for _ in range(rng.randint(4, 8))]
            sessions.append({"session_id": f"{sender}-s{s:02d}", "turns": turns})
        # Distractors first, so that evidence never lands on a distractor slot.
        for fact in facts:
            for d in fact[2]:
                s = rng.randrange(n_sessions)
                sessions[s]["turns"].insert(rng.randrange(len(sessions[s]["turns"]) + 1), [d, rng.choice(REPLIES)])
        for fact, s in zip(facts, evidence_at):
            t = sessions[s]["turns"]
            t.insert(rng.randrange(len(t) + 1), [fact[0], "Noted, I will remember that."])
            questions.append({"sender": sender, "question": fact[1], "evidence_session": sessions[s]["session_id"]})
        users.append({"sender": sender, "sessions": sessions})
    json.dump({
        "source": "scripts/memory-retrieval-set.py (LongMemEval-style retrieval set, generated)",
        "users": users,
        "questions": questions,
    }, open(out, "w"), indent=0)
    n_turns = sum(len(s["turns"]) for u in users for s in u["sessions"])
    print(f"wrote {len(users)} users, {n_turns} turns, {len(questions)} questions to {out}")


if __name__ == "__main__":
    main()
