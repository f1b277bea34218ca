"""Off-topic queries: everyday subjects that have nothing to do with software.

A relevance score a person can read is low for text unrelated to every memory. These queries
check that, and only that: nothing about them was ever chosen by looking at a score. They were
written once, before the score's threshold was reported on them, and are never tuned on (nor is
the threshold tuned on them). Each is searched in the coding world's main project like any
query; the right answer is nothing.
"""

from __future__ import annotations

#: (subject, query): 60 queries over a dozen everyday subjects, in the three ways people ask.
OFF_TOPIC: tuple[tuple[str, str], ...] = (
    ("cooking", "how long should a roast chicken rest before carving"),
    ("cooking", "sourdough starter smells like nail polish remover"),
    ("cooking", "substitute for buttermilk in pancakes"),
    ("cooking", "why did my risotto turn gluey?"),
    ("cooking", "caramelising onions slowly without burning them"),
    ("cooking", "how much salt goes in the pasta water?"),
    ("gardening", "when to pinch out tomato side shoots"),
    ("gardening", "aphids all over the roses again"),
    ("gardening", "how deep should tulip bulbs be planted?"),
    ("gardening", "lawn going yellow in patches after the heatwave"),
    ("gardening", "which herbs grow on a shady balcony?"),
    ("gardening", "compost heap smells of ammonia"),
    ("travel", "cheapest month to fly to Lisbon"),
    ("travel", "do I need a visa for a layover in Toronto?"),
    ("travel", "packing list for a week of hut-to-hut hiking in the Alps"),
    ("travel", "night train from Paris to Barcelona"),
    ("travel", "travel insurance that covers a skiing holiday"),
    ("travel", "how early should we get to the airport for a long-haul flight?"),
    ("sport", "how to run a faster 5k"),
    ("sport", "the offside rule in football explained simply"),
    ("sport", "stretches after a long bike ride"),
    ("sport", "what string tension for a beginner's tennis racket?"),
    ("sport", "breathing rhythm for front crawl swimming"),
    ("sport", "who won the women's marathon at the last Olympics?"),
    ("household", "getting red wine out of a wool carpet"),
    ("household", "kitchen tap keeps dripping after it is turned off"),
    ("household", "how often should the kettle be descaled?"),
    ("household", "which paint finish for a steamy bathroom ceiling?"),
    ("household", "bleeding the radiators before winter"),
    ("health", "how much water should an adult drink each day?"),
    ("health", "home remedies for a sore throat"),
    ("health", "how many hours of sleep does a teenager need"),
    ("health", "sitting posture that stops lower back ache"),
    ("pets", "why does my cat knead the blanket?"),
    ("pets", "how far to walk a border collie every day"),
    ("pets", "feeding plan for an eight week old puppy"),
    ("pets", "the goldfish tank water has turned green"),
    ("music and crafts", "easy chords for a first song on the guitar"),
    ("music and crafts", "tuning a ukulele by ear"),
    ("music and crafts", "painting soft clouds in watercolour"),
    ("music and crafts", "how many balls of chunky wool for a scarf?"),
    ("music and crafts", "learning to read sheet music as an adult"),
    ("family and social", "birthday present ideas for a grandmother who likes birds"),
    ("family and social", "what to write in a condolence card"),
    ("family and social", "what should I wear to a summer garden wedding?"),
    ("family and social", "party games for a seven year old's birthday"),
    ("family and social", "splitting the bill fairly at a group dinner"),
    ("nature", "why is the sky red at sunset?"),
    ("nature", "best time of year to see the northern lights in Norway"),
    ("nature", "telling edible chanterelles from their lookalikes"),
    ("nature", "which birds come to a garden feeder in winter?"),
    ("nature", "how do bees find their way back to the hive"),
    ("cars and bikes", "changing a flat tyre on the side of the road"),
    ("cars and bikes", "how often should tyre pressure be checked?"),
    ("cars and bikes", "bicycle chain keeps slipping on the big gear"),
    ("books and films", "novels like Pride and Prejudice"),
    ("books and films", "board games for a family evening with teenagers"),
    ("books and films", "which film won best picture at the Oscars last year?"),
    ("money", "saving for a house deposit on a modest salary"),
    ("money", "is it worth paying off a mortgage early?"),
)
