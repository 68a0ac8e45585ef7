"""What scripts/memory-retrieval-set.py draws from: the haystack's topics
and the evidence families of each kind of question. Plain data.

A family is split between the tuned set and the hold-out set by
`memory-retrieval-set.py` (every other family of each list goes to the
hold-out), so the hold-out's facts, wordings and questions are never those
the retrieval was tuned on.

Placeholders: {v} a value of the family, {w} a second value (an update),
{a} {b} the two parts of a multi-session fact, {when} a time phrase.
"""

# --- the haystack: everyday requests to an assistant ------------------------

HOWTO = [
    "boil an egg so the yolk stays soft", "clean a cast iron pan", "remove a red wine stain",
    "fold a fitted sheet", "descale a kettle", "sharpen a kitchen knife", "repot a cactus",
    "unclog a bathroom sink", "make sourdough starter", "iron a shirt quickly",
    "set up a monthly budget", "back up my phone photos", "speed up an old laptop",
    "write a cover letter", "prepare for a job interview", "negotiate a salary",
    "start a vegetable garden on a balcony", "keep basil alive indoors", "make cold brew coffee",
    "cook risotto without stirring all the time", "poach an egg", "make pizza dough",
    "bleed a radiator", "change a bike inner tube", "hang a picture without nails",
    "meditate for ten minutes", "stop procrastinating", "learn touch typing",
    "organise a small wardrobe", "pack a carry-on for a week", "get rid of fruit flies",
    "clean white sneakers", "make a paper airplane that flies far", "tie a bowline knot",
    "write a haiku", "take better photos with my phone", "read faster", "fall asleep faster",
    "memorise a short speech", "plan a picnic",
]
EXPLAIN = [
    "compound interest", "how vaccines work", "why the sky is blue", "what inflation is",
    "how a heat pump works", "the offside rule in football", "what a Roth IRA is",
    "how solar panels work", "the difference between weather and climate", "how tides work",
    "what machine learning is", "how bread rises", "what a mortgage offset account is",
    "how noise cancelling headphones work", "what the stock market does", "photosynthesis",
    "how credit scores work", "the rules of chess castling", "what a VPN does",
    "how an electric car battery degrades", "what a black hole is", "how jet lag works",
    "why onions make you cry", "how a bill becomes law", "what a sourdough levain is",
]
IDEAS = [
    "a rainy Sunday afternoon", "a team building event", "a cheap weekend meal plan",
    "a ten minute morning workout", "a book club first meeting", "a kid's science experiment",
    "a small balcony", "a housewarming party", "a long train ride", "a short speech at a wedding",
    "a vegetarian barbecue", "a podcast name", "a blog about gardening", "a board game night",
    "a new year's resolution", "a gift under twenty euros", "a slow cooker dinner",
    "a picnic lunch", "a road trip playlist", "decorating a home office",
]
TRANSLATE = [
    "good morning", "where is the train station", "thank you very much", "I would like a coffee",
    "how much does it cost", "the bill, please", "see you tomorrow", "I am lost",
]
LANGS = ["Italian", "Spanish", "German", "French", "Portuguese", "Japanese"]
WRITE = [
    ("a short poem", "the sea"), ("a limerick", "a cat"), ("a product description", "a desk lamp"),
    ("a polite email", "declining a meeting"), ("a thank-you note", "a neighbour"),
    ("a tweet", "a new bakery"), ("a short story opening", "a lighthouse"),
    ("a toast", "a retirement party"), ("an out-of-office message", "a week away"),
    ("a haiku", "autumn leaves"), ("a riddle", "time"), ("a slogan", "a recycling campaign"),
]
DIFF = [
    ("baking soda", "baking powder"), ("a virus", "bacteria"), ("weather", "climate"),
    ("a latte", "a cappuccino"), ("a crocodile", "an alligator"), ("RAM", "storage"),
    ("a lake", "a pond"), ("affect", "effect"), ("a comet", "an asteroid"),
    ("stocks", "bonds"), ("yoga", "pilates"), ("a frog", "a toad"),
]
FACTQ = [
    "What is the capital of Australia?", "How many bones are in the human body?",
    "Who painted the Girl with a Pearl Earring?", "How far is the Moon from Earth?",
    "What is the boiling point of water at high altitude?", "How long do cats usually live?",
    "What is the tallest mountain in Europe?", "When was the printing press invented?",
    "How many time zones does Russia have?", "What is the largest desert in the world?",
    "How many players are on a volleyball team?", "What is the speed of sound?",
    "Which planet has the most moons?", "How many calories are in a banana?",
    "What year did the Berlin Wall fall?", "Who wrote One Hundred Years of Solitude?",
]
REPLY_OPEN = ["Sure.", "Good question.", "Happy to help.", "Here is a simple answer.", "Of course.",
              "Here you go.", "Let me explain.", "A few ideas."]


def filler(rng):
    """One everyday exchange: (user message, assistant reply)."""
    k = rng.randrange(7)
    o = rng.choice(REPLY_OPEN)
    if k == 0:
        x = rng.choice(HOWTO)
        return (rng.choice([f"How do I {x}?", f"What's the best way to {x}?", f"Any tips to {x}?"]),
                f"{o} To {x}, start small, go step by step and check the result as you go.")
    if k == 1:
        x = rng.choice(EXPLAIN)
        return (rng.choice([f"Can you explain {x}?", f"Explain {x} like I'm twelve.", f"I never understood {x}."]),
                f"{o} In short, {x} comes down to a few simple ideas; here they are one by one.")
    if k == 2:
        x = rng.choice(IDEAS)
        return (rng.choice([f"Give me ideas for {x}.", f"I need suggestions for {x}.", f"What would you suggest for {x}?"]),
                f"{o} For {x}: keep it simple, pick one theme and prepare a short list in advance.")
    if k == 3:
        x, lang = rng.choice(TRANSLATE), rng.choice(LANGS)
        return (f"How do you say '{x}' in {lang}?", f"{o} In {lang} you would say it like this, and here is how to pronounce it.")
    if k == 4:
        f, t = rng.choice(WRITE)
        return (rng.choice([f"Write {f} about {t}.", f"Could you draft {f} about {t}?"]),
                f"{o} Here is {f} about {t}, short and light in tone.")
    if k == 5:
        a, b = rng.choice(DIFF)
        return (f"What's the difference between {a} and {b}?", f"{o} {a[0].upper() + a[1:]} and {b} differ mostly in how they are made and used.")
    q = rng.choice(FACTQ)
    return (q, f"{o} Here is the short answer with a bit of context.")


# --- facts stated once: single, paraphrased and distractor questions --------
# evidence: how the user says it ({v} the value); q: a question sharing words
# with it; qp: the same question in other words; distract: turns of other
# sessions sharing the question's words without answering it.

FACTS = [
    dict(values=["Biscuit", "Pepper", "Miso", "Rocket", "Olive"],
         evidence=["I finally adopted a beagle puppy and named him {v}.",
                   "We brought home a rescue puppy yesterday, his name is {v}."],
         q="What did I name the puppy I adopted?", qp="What's my dog called?",
         distract=["My neighbour's dog keeps barking at night, what can I do?",
                   "Do puppies need many vaccines in the first year?",
                   "What is a good name for a fish?", "Which dog breeds are good with kids?"]),
    dict(values=["Lisbon", "Vienna", "Dublin", "Copenhagen", "Montreal"],
         evidence=["My sister Giulia just moved to {v} for her new job at a bank.",
                   "Big news in the family: Giulia relocated to {v}, the bank transferred her."],
         q="Which city did my sister move to for work?", qp="Where is Giulia living these days?",
         distract=["My sister loves board games, any gift ideas?",
                   "Which city has the best public transport in Europe?",
                   "Moving to a new city is stressful, how do people cope?",
                   "What jobs are there at a bank besides teller?"]),
    dict(values=["penicillin", "amoxicillin", "sulfa drugs", "ibuprofen", "aspirin"],
         evidence=["I'm allergic to {v}, found out the hard way last year.",
                   "Note for the doctor forms: I react badly to {v}, I break out in hives."],
         q="Which medicine am I allergic to?", qp="What drug should a doctor never give me?",
         distract=["Are allergies more common in spring?", "My friend is allergic to cats.",
                   "What medicine helps with a sore throat?", "Is it safe to take medicine on an empty stomach?"]),
    dict(values=["14th of September", "2nd of June", "21st of March", "30th of October", "8th of May"],
         evidence=["Our wedding anniversary is on the {v}.",
                   "Marco and I got married on the {v}, so that's our anniversary."],
         q="When is my wedding anniversary?", qp="On what date did Marco and I tie the knot?",
         distract=["What are good anniversary gift ideas in general?", "My cousin's wedding was lovely.",
                   "How do people plan a wedding on a budget?", "When is the best month for a wedding?"]),
    dict(values=["blue Toyota Corolla", "grey Fiat Panda", "red Mazda 3", "white VW Golf", "green Skoda Fabia"],
         evidence=["I drive a 2019 {v}, plate ends in 42K.",
                   "Picked up my car from the garage, the {v} is running fine again."],
         q="What car do I drive?", qp="What's parked in my driveway?",
         distract=["Which car brands are the most reliable?", "I hate driving in the rain.",
                   "How often should a car be serviced?", "Is it cheaper to lease or buy a car?"]),
    dict(values=["cello", "violin", "clarinet", "piano", "trumpet"],
         evidence=["I started learning the {v} in January with a teacher called Marta.",
                   "My {v} lessons with Marta are going well, I can play a simple waltz now."],
         q="Which instrument am I learning?", qp="What do I practise with Marta every week?",
         distract=["Is the piano harder to learn than the guitar?", "My teacher in school was strict.",
                   "How long does it take to learn an instrument as an adult?", "Which instrument sounds closest to the human voice?"]),
    dict(values=["88213", "40917", "55102", "73364", "19028"],
         evidence=["My employee badge number is {v}, I always forget it.",
                   "Writing this down somewhere: badge {v} for the office turnstiles."],
         q="What is my employee badge number?", qp="Which code opens the office turnstiles for me?",
         distract=["Do employees get a badge on their first day?", "I forgot my umbrella again.",
                   "What number should I call for lost cards?", "How do office access systems work?"]),
    dict(values=["vegetarian", "vegan", "pescatarian", "gluten-free", "lactose-free"],
         evidence=["I'm {v}, so please keep that in mind for recipes.",
                   "Since last autumn I eat {v}, it has been easier than I thought."],
         q="What is my diet?", qp="What should you keep in mind when suggesting meals for me?",
         distract=["Is a keto diet healthy?", "What cheese goes well with pears?",
                   "What diet do doctors recommend for heart health?", "Give me a quick dinner recipe."]),
    dict(values=["Friday at 6 pm", "Thursday at 5 pm", "Saturday at 11 am", "Wednesday at 7 pm", "Monday at 4 pm"],
         evidence=["My daughter Sofia's school play is on {v}.",
                   "Sofia plays the fox in the school show, {v}, I must not miss it."],
         q="When is Sofia's school play?", qp="When does my daughter perform on stage?",
         distract=["Which plays by Shakespeare are good for kids?", "School starts early on Monday.",
                   "How can a shy child get confident on stage?", "What should I bring to a school event?"]),
    dict(values=["Mr. Bianchi", "Mrs. Conti", "Mr. Greco", "Ms. Ferri", "Mr. Sala"],
         evidence=["My landlord is {v} and rent is due on the 5th of each month.",
                   "Paid the rent to {v} today, the transfer always goes out on the 5th."],
         q="Who is my landlord?", qp="Who do I pay every month for the flat?",
         distract=["Is it better to rent or to buy?", "What rights does a tenant have?",
                   "How do landlords decide the deposit?", "The 5th symphony is my favourite."]),
    dict(values=["pinecone-2024", "lakehouse77", "blueberry!9", "northwind-55", "oakleaf#12"],
         evidence=["The wifi password at the cabin is {v}.",
                   "For next time at the cabin: network CABIN-NET, key {v}."],
         q="What is the wifi password at the cabin?", qp="How do I get online when we stay in the mountains?",
         distract=["Why is my home wifi so slow?", "I need a stronger password manager.",
                   "How do I change my router password?", "Is public wifi safe for banking?"]),
    dict(values=["Trattoria da Gino", "Osteria del Ponte", "La Piccola Cucina", "Bistro Lumiere", "Sushi Kaito"],
         evidence=["My favourite restaurant is {v} near the station.",
                   "We went back to {v} last night, still the best food in town."],
         q="Which restaurant do I like best?", qp="Where should we book if it's my choice of dinner?",
         distract=["Restaurants near the station are expensive.", "What is the best pizza style?",
                   "How much should I tip in a restaurant?", "Which restaurant dishes are easy to cook at home?"]),
    dict(values=["O negative", "A positive", "B negative", "AB positive", "O positive"],
         evidence=["My blood type is {v}.", "The donation centre card says {v}, good to know."],
         q="What blood type do I have?", qp="What did the donation centre card say about me?",
         distract=["Which blood types are universal donors?", "I should donate blood more often.",
                   "Does blood type affect diet?", "How long does a blood test take?"]),
    dict(values=["117", "42", "305", "58", "221"],
         evidence=["My locker at the gym is number {v}, combination 9-3-5.",
                   "They gave me locker {v} at the gym, the one near the showers."],
         q="What is my gym locker number?", qp="Where do I leave my bag when I work out?",
         distract=["Which gym exercises are best for the back?", "How often should I go to the gym?",
                   "Is a gym membership worth it?", "What should I pack in a gym bag?"]),
    dict(values=["Carla", "Paolo", "Elena", "Tommaso", "Rita"],
         evidence=["I keep the spare house key with my neighbour {v}.",
                   "If I ever lock myself out, {v} next door has my spare key."],
         q="Who has my spare key?", qp="Who can let me in if I lock myself out?",
         distract=["How do I make a copy of a key?", "My neighbour plays the drums.",
                   "Are smart locks safe?", "What do I do if I lose my keys abroad?"]),
    dict(values=["swimming", "cycling", "running", "transitions", "open water"],
         evidence=["I'm training for my first triathlon; {v} is my weakest part.",
                   "Coach says my {v} needs the most work before the triathlon."],
         q="Which part of the triathlon is my weakest?", qp="What should I practise most before the race?",
         distract=["Is swimming good exercise?", "What is the longest triathlon?",
                   "How do people train for a triathlon?", "What should I eat before a race?"]),
    dict(values=["a red Bianchi road bike", "a black gravel bike", "a yellow city bike", "a blue mountain bike", "a silver folding bike"],
         evidence=["My bike was stolen last week, it was {v}.",
                   "Someone took my bike from the courtyard, {v}, I reported it to the police."],
         q="What kind of bike did I lose?", qp="What was taken from my courtyard?",
         distract=["How do I lock a bike properly?", "Red is my favourite colour.",
                   "Are e-bikes worth it?", "How do I report a theft?"]),
    dict(values=["Luna", "Nico", "Bea", "Teo", "Ada"],
         evidence=["My son's best friend is {v}, they are inseparable.",
                   "{v} came over again today, my son and {v} built a fort all afternoon."],
         q="Who is my son's best friend?", qp="Which kid is always at our place playing with my boy?",
         distract=["How do kids make friends at school?", "My son wants a new bike.",
                   "Is it normal for children to have one best friend?", "What games do kids play now?"]),
    dict(values=["Helsinki", "Porto", "Kraków", "Seville", "Edinburgh"],
         evidence=["I grew up in {v}, moved to Italy when I was twenty.",
                   "Going back to {v} for the holidays, my parents still live in the house where I grew up."],
         q="Where did I grow up?", qp="What's my hometown?",
         distract=["Is it hard to move abroad at twenty?", "How do I get Italian citizenship?",
                   "What is there to see in Italy in winter?", "My parents want to visit."]),
    dict(values=["nurse", "architect", "accountant", "teacher", "software tester"],
         evidence=["I work as a {v} at the city hospital, mostly night shifts.",
                   "Long week at work: as a {v} the night shifts wear me out."],
         q="What is my job?", qp="What do I do for a living?",
         distract=["Which jobs have the best work life balance?", "How do night shifts affect sleep?",
                   "What should I ask in a job interview?", "The hospital near us is being renovated."]),
    dict(values=["Tuesday evenings", "Sunday mornings", "Thursday lunch", "Saturday afternoons", "Monday nights"],
         evidence=["My book club meets on {v} at the library.",
                   "Book club is {v} now, the library gives us the small room."],
         q="When does my book club meet?", qp="When do I go to discuss novels with people?",
         distract=["Which books are good for a book club?", "The library has a new opening time.",
                   "How do you run a book club?", "Any recommendations for a long novel?"]),
    dict(values=["lactose", "shellfish", "kiwi", "sesame", "gluten"],
         evidence=["My husband can't eat {v}, it makes him really sick.",
                   "Reminder for dinner parties: no {v} for Luca, he has a bad intolerance."],
         q="What food can my husband not eat?", qp="What must Luca avoid at dinner?",
         distract=["What foods are common allergens?", "My husband loves spicy food.",
                   "What should I cook for a dinner party?", "Is food intolerance the same as allergy?"]),
]

# --- facts that change: updated questions -----------------------------------
# evidence: the first value {v}; update: the later value {w}, often in fewer
# and other words than the question; the evidence is the update's session.

UPDATES = [
    dict(values=["March 3rd", "April 9th", "May 14th", "June 2nd", "March 20th"],
         evidence=["I have a dentist appointment with Dr. Rossi on {v}.",
                   "Booked the dentist, Dr. Rossi, for {v} at 9."],
         update=["I moved the dentist to {w}.", "Dr. Rossi's office called, they pushed me to {w}.",
                 "Change of plan, teeth check is now {w}."],
         q="When is my dentist appointment?",
         distract=["How often should I see a dentist?", "Is an electric toothbrush better?"]),
    dict(values=["Acme Logistics", "Nordic Foods", "Helio Energy", "Brightside Bank", "Tessera Labs"],
         evidence=["I work as a data engineer at {v}.", "Started my job at {v} this week, data engineering team."],
         update=["Big change: I accepted an offer from {w}, starting next month.",
                 "Handed in my notice, joining {w} in the spring."],
         q="Which company do I work for?",
         distract=["What does a data engineer do?", "How do I ask my company for a raise?"]),
    dict(values=["Via Roma 12", "Corso Francia 80", "Via Garibaldi 5", "Piazza Vittorio 3", "Via Po 27"],
         evidence=["My address is {v}, third floor.", "We live at {v}, the buzzer says Rossi-Bauer."],
         update=["We finally moved! New place is {w}.", "Boxes everywhere, but we're in: {w}."],
         q="What is my home address?",
         distract=["How do I change my address with the bank?", "Is it cheaper to live on a higher floor?"]),
    dict(values=["Marta", "Giorgio", "Lucia", "Stefano", "Irene"],
         evidence=["My manager is {v}, she's very supportive.", "{v} is my boss, we have one to ones on Mondays."],
         update=["Reorg at work, I now report to {w}.", "{w} took over my team last week."],
         q="Who is my manager?",
         distract=["How do I talk to my manager about burnout?", "What makes a good manager?"]),
    dict(values=["Tokyo", "Reykjavik", "Lima", "Cape Town", "Hanoi"],
         evidence=["For the summer holiday we're going to {v}, flights booked.",
                   "Summer trip decided: {v}, two weeks in August."],
         update=["We cancelled the summer trip, going to {w} instead.", "Plans changed, August is now {w}."],
         q="Where are we going on our summer holiday?",
         distract=["What's the best season to travel?", "How do I find cheap flights?"]),
    dict(values=["Tuesday and Thursday", "Monday and Wednesday", "every morning", "weekends", "Friday evening"],
         evidence=["I go to the pool on {v} before work.", "Swimming {v}, it's my routine now."],
         update=["New schedule at the pool, I switched to {w}.", "The pool is now {w} for me."],
         q="When do I go swimming?",
         distract=["Is swimming better than running?", "How do I stop my goggles fogging up?"]),
    dict(values=["65 kg", "72 kg", "80 kg", "58 kg", "90 kg"],
         evidence=["I weighed myself today: {v}.", "Doctor's visit, scale said {v}."],
         update=["Down to {w} after three months of walking!", "New weigh-in: {w}."],
         q="What was my latest weight?",
         distract=["How much should someone of my height weigh?", "Are bathroom scales accurate?"]),
    dict(values=["Tiramisu", "Panna cotta", "Cheesecake", "Apple pie", "Chocolate mousse"],
         evidence=["My favourite dessert is {v}, always has been.", "Nothing beats {v} for dessert."],
         update=["Honestly I'm over it, {w} is my new favourite dessert.", "Tried {w} at Anna's, it's my favourite now."],
         q="What is my favourite dessert?",
         distract=["How do I make dessert without sugar?", "Which desserts freeze well?"]),
    dict(values=["Netflix", "Disney+", "Prime Video", "Apple TV", "Sky"],
         evidence=["We pay for {v}, it's our only streaming service.", "Subscribed to {v} for the kids."],
         update=["Cancelled that and switched to {w}, cheaper.", "We only have {w} now."],
         q="Which streaming service do we pay for?",
         distract=["Which streaming service has the best films?", "How do I cancel a subscription?"]),
    dict(values=["half past seven", "seven sharp", "eight fifteen", "quarter to eight", "nine"],
         evidence=["My train leaves at {v} every morning.", "The commuter train is at {v}, I can't miss it."],
         update=["Timetable changed, my train is {w} now.", "They moved my train to {w}, ugh."],
         q="What time is my morning train?",
         distract=["Why are trains always late?", "Is it cheaper to buy a yearly train pass?"]),
    dict(values=["Dr. Ferrari", "Dr. Moretti", "Dr. Esposito", "Dr. Ricci", "Dr. Gallo"],
         evidence=["My family doctor is {v} at the clinic on Via Milano.", "Saw {v}, my GP, about the cough."],
         update=["{w} is my GP now, I switched clinics.", "Registered with {w}, the new clinic is closer."],
         q="Who is my family doctor?",
         distract=["How do I choose a good family doctor?", "What should I ask my doctor at a check-up?"]),
    dict(values=["Spanish", "German", "Japanese", "Portuguese", "Greek"],
         evidence=["I'm studying {v} on the app every night.", "Twenty minutes of {v} a day, I'm on a streak."],
         update=["I dropped that and started {w} instead.", "Switched the language app to {w}."],
         q="Which language am I learning?",
         distract=["Which language is easiest for English speakers?", "Are language apps effective?"]),
    dict(values=["a Labrador", "a tabby cat", "two budgies", "a hamster", "a tortoise"],
         evidence=["We're getting {v} for the kids next month.", "Decided: {v} for the children."],
         update=["Change of heart, we're getting {w} instead.", "The kids convinced us, it'll be {w}."],
         q="What pet are we getting for the kids?",
         distract=["Which pets are good for small flats?", "How do I teach kids to care for a pet?"]),
    dict(values=["3 pm", "10 am", "noon", "5:30 pm", "8 am"],
         evidence=["The quarterly review meeting is at {v} on Friday.", "Review with the board, Friday {v}."],
         update=["Heads up, the review moved to {w}.", "They shifted Friday's review, now {w}."],
         q="What time is the quarterly review?",
         distract=["How do I prepare slides for a review?", "How long should a meeting last?"]),
]

# --- recurring topics: temporal questions -----------------------------------
# The topic recurs in many sessions with a different detail each time; the
# question names when ({when}), and only one mention falls there.

TEMPORAL = [
    dict(values=["5", "8", "10", "12", "6", "15", "7", "9", "11", "14"],
         mention=["I ran {v} km along the river this morning.", "Did a {v} km run today, legs are tired.",
                  "Quick {v} km jog before work."],
         q="How far did I run {when}?"),
    dict(values=["The Name of the Rose", "Dune", "Middlemarch", "Beloved", "Kafka on the Shore",
                 "The Leopard", "Persuasion", "Stoner", "The Road", "Invisible Cities"],
         mention=["Book club chose {v} this time.", "Started reading {v} for the club.",
                  "We discussed {v} at book club tonight."],
         q="Which book was my book club on {when}?"),
    dict(values=["lasagne", "a Thai curry", "mushroom risotto", "fish tacos", "ramen", "a leek pie",
                 "stuffed peppers", "gnocchi", "a lentil stew", "paella"],
         mention=["Cooked {v} for friends tonight, it went well.", "Tried making {v} for dinner.",
                  "Made {v} for the family, everyone had seconds."],
         q="What did I cook for dinner {when}?"),
    dict(values=["the Louvre", "a jazz club", "the botanical garden", "a pottery class", "the planetarium",
                 "an escape room", "a cooking class", "the science museum", "a wine tasting", "a comedy show"],
         mention=["Date night: we went to {v}.", "Took Marco to {v} for our date night.",
                  "Our date night this week was {v}."],
         q="Where did we go for date night {when}?"),
    dict(values=["plumber", "electrician", "painter", "locksmith", "window cleaner", "gardener",
                 "boiler technician", "carpenter", "roofer", "piano tuner"],
         mention=["The {v} came by the flat today.", "Had to call a {v} this morning.",
                  "Spent the morning waiting for the {v}."],
         q="Which tradesperson came to the flat {when}?"),
    dict(values=["Bologna", "Genoa", "Verona", "Naples", "Trieste", "Lecce", "Parma", "Siena", "Bergamo", "Lucca"],
         mention=["Work trip to {v}, client meeting all day.", "I'm in {v} for work until tomorrow.",
                  "Back from {v}, long day of meetings."],
         q="Which city did I travel to for work {when}?"),
    dict(values=["a new kettle", "running shoes", "a desk lamp", "a rain jacket", "headphones",
                 "a coffee grinder", "a backpack", "a yoga mat", "a blender", "a phone case"],
         mention=["Ordered {v} online today.", "Finally bought {v}.", "Picked up {v} at the shop."],
         q="What did I buy {when}?"),
    dict(values=["Alice in Wonderland", "Hamlet", "Swan Lake", "La Traviata", "Cats",
                 "The Nutcracker", "Tosca", "Les Misérables", "Macbeth", "Carmen"],
         mention=["We saw {v} at the theatre.", "Theatre night: {v}.", "Got tickets and saw {v} tonight."],
         q="What show did we see at the theatre {when}?"),
    dict(values=["migraine", "sore back", "cold", "sprained ankle", "ear infection", "stomach bug",
                 "toothache", "pulled muscle", "allergy flare-up", "fever"],
         mention=["Stayed home with a {v} today.", "Called in sick, {v}.", "Rough day, {v} all morning."],
         q="What was I ill with {when}?"),
    dict(values=["chess", "tennis", "padel", "bowling", "poker", "table tennis", "darts", "bridge", "golf", "squash"],
         mention=["Played {v} with Luca after work.", "Luca beat me at {v} again.", "{v} night with Luca."],
         q="What game did I play with Luca {when}?"),
]

# --- two facts, two sessions: multi-session questions -------------------------

MULTI = [
    dict(a=["900", "1200", "650", "1500"], b=["80", "120", "60", "150"],
         parts=["I bought a road bike for {a} euros.", "Got a helmet and lights for the bike, {b} euros."],
         q="How much have I spent on cycling gear in total?"),
    dict(a=["Miso", "Tigre", "Pallina", "Smokey"], b=["Pepper", "Clover", "Nuvola", "Basil"],
         parts=["We adopted a cat called {a}.", "We also got a rabbit, her name is {b}."],
         q="What are the names of my pets?"),
    dict(a=["Lisbon", "Dublin", "Vienna", "Oslo"], b=["Madrid", "Prague", "Athens", "Zurich"],
         parts=["My older brother lives in {a} now.", "My younger brother just got a flat in {b}."],
         q="In which cities do my brothers live?"),
    dict(a=["Python", "SQL", "Excel", "Tableau"], b=["Spanish", "French", "German", "Dutch"],
         parts=["I signed up for an evening course in {a}.", "Also enrolled in a {b} class on Saturdays."],
         q="Which courses am I taking this year?"),
    dict(a=["April 4th", "May 10th", "June 1st", "March 28th"], b=["April 20th", "May 25th", "June 15th", "April 11th"],
         parts=["My mother's surgery is on {a}.", "Her follow-up visit is on {b}."],
         q="What are the dates of my mother's surgery and follow-up?"),
    dict(a=["3", "2", "4", "5"], b=["2", "1", "3", "2"],
         parts=["I planted {a} tomato plants on the balcony.", "Added {b} pepper plants next to the tomatoes."],
         q="How many plants did I plant on the balcony?"),
    dict(a=["Sara", "Chiara", "Anna", "Franca"], b=["Davide", "Matteo", "Luigi", "Enrico"],
         parts=["{a} agreed to be my maid of honour.", "{b} will be our wedding photographer."],
         q="Who are the maid of honour and the photographer at my wedding?"),
    dict(a=["240", "310", "180", "400"], b=["95", "130", "70", "160"],
         parts=["The car insurance renewal came in at {a} euros.", "Road tax for the car this year is {b} euros."],
         q="What do I pay in total for insurance and road tax on the car?"),
    dict(a=["Bach's cello suites", "Nina Simone", "Radiohead", "Miles Davis"],
         b=["Fado", "Afrobeat", "bossa nova", "Italian cantautori"],
         parts=["Lately I listen to {a} on repeat.", "A friend got me into {b}, I love it."],
         q="What music have I been into lately?"),
    dict(a=["Turin", "Milan", "Florence", "Rome"], b=["Berlin", "Paris", "Amsterdam", "Munich"],
         parts=["Our office has a branch in {a}.", "The company is opening a second office in {b}."],
         q="Where are my company's offices?"),
]
