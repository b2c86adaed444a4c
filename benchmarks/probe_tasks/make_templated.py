# ruff: noqa: E501  (the task templates are one sentence each)
"""Write benchmarks/probe_tasks/templated.json: templated tasks with their kind, split dev/test
by object (disjoint object vocabularies) before any recall rule is written.

ALFWorld: the six task types, each in ALFWorld's two phrasings and two of our own; ScienceWorld:
twelve task families in ScienceWorld's style with other substances, objects, rooms and colours.

    python benchmarks/probe_tasks/make_templated.py
"""

import json
import random
from pathlib import Path

rng = random.Random(20261206)
ALF = {
 "pick_and_place": ["put a {o} in {r}", "put some {o} on {r}", "place the {o} on the {r}",
                    "move a {o} to the {r}"],
 "pick_clean_then_place": ["put a clean {o} in {r}", "clean some {o} and put it in {r}",
                           "rinse the {o} and place it on the {r}", "wash a {o}, then put it in {r}"],
 "pick_heat_then_place": ["put a hot {o} in {r}", "heat some {o} and put it in {r}",
                          "warm up the {o} and place it on the {r}",
                          "microwave a {o}, then put it in {r}"],
 "pick_cool_then_place": ["put a cool {o} in {r}", "cool some {o} and put it in {r}",
                          "chill the {o} and place it on the {r}", "put a cold {o} in {r}"],
 "look_at_obj": ["look at {o} under the desklamp", "examine the {o} with the desklamp",
                 "inspect the {o} by the light of the desklamp", "check the {o} under the lamp"],
 "pick_two_obj": ["put two {o} in {r}", "find two {o} and put them in {r}",
                  "place a pair of {o} on the {r}", "move two {o} to the {r}"],
}
OBJ = ["apple", "bread", "egg", "lettuce", "mug", "plate", "pan", "pot", "potato", "tomato",
       "cup", "bowl", "knife", "spoon", "fork", "spatula", "ladle", "soapbar", "cloth",
       "handtowel", "book", "cellphone", "creditcard", "keychain", "pen", "pencil", "pillow",
       "remotecontrol", "watch", "vase", "statue", "candle", "box", "laptop", "newspaper",
       "tissuebox", "toiletpaper", "spraybottle", "saltshaker", "peppershaker", "dishsponge",
       "winebottle", "kettle", "alarmclock", "cd", "glassbottle"]
REC = ["countertop", "cabinet", "drawer", "shelf", "diningtable", "sidetable", "dresser", "desk",
       "sofa", "armchair", "bed", "garbagecan", "coffeetable", "stoveburner", "toilet", "cart",
       "safe", "ottoman", "fridge", "sinkbasin", "microwave"]
SW = {
 "boil": "Your task is to boil {s}. For compounds without a boiling point, combining that substance with heat may be sufficient. First, focus on the substance. Then, take actions that will cause it to change its state of matter.",
 "melt": "Your task is to melt {s}. First, focus on the substance. Then, take actions that will cause it to change its state of matter.",
 "freeze": "Your task is to freeze {s}. First, focus on the substance. Then, take actions that will cause it to change its state of matter.",
 "find-animal": "Your task is to find a(n) animal. First, focus on the thing. Then, move it to the {c} box in the {room}.",
 "find-plant": "Your task is to find a(n) plant. First, focus on the thing. Then, move it to the {c} box in the {room}.",
 "find-living-thing": "Your task is to find a(n) living thing. First, focus on the thing. Then, move it to the {c} box in the {room}.",
 "find-non-living-thing": "Your task is to find a(n) non-living thing. First, focus on the thing. Then, move it to the {c} box in the {room}.",
 "test-conductivity": "Your task is to determine if {o} is electrically conductive. The {o} is located around the {room}. First, focus on the {o}. If it is electrically conductive, place it in the {c} box. If it is electrically nonconductive, place it in the {c2} box.",
 "grow-plant": "Your task is to grow a {p} plant from seed. Seeds can be found in the {room}. First, focus on a seed. Then, make changes to the environment that grow the plant until it reaches the reproducing life stage.",
 "lifespan-longest-lived": "Your task is to find the {a} with the longest life span. The {a}s are in the 'outside' location. Focus on the {a} with the longest life span.",
 "lifespan-shortest-lived": "Your task is to find the {a} with the shortest life span. The {a}s are in the 'outside' location. Focus on the {a} with the shortest life span.",
 "use-thermometer": "Your task is to measure the temperature of {o}, which is located around the {room}. First, focus on the thermometer. Next, focus on the {o}. If the {o} temperature is above {n} degrees, place it in the {c} box. If the {o} temperature is below {n} degrees, place it in the {c2} box.",
}
SUB = ["water", "ice", "chocolate", "lead", "tin", "mercury", "soap", "orange juice", "butter",
       "marshmallow", "caesium", "gallium"]
SWOBJ = ["metal fork", "plastic spoon", "copper wire", "wood block", "glass cup", "aluminum foil",
         "rubber band", "iron nail", "paper clip", "ceramic plate", "steel bolt", "cotton ball"]
ROOMS = ["kitchen", "workshop", "bedroom", "living room", "greenhouse", "hallway", "art studio",
         "bathroom"]
COL = ["red", "green", "blue", "orange", "yellow", "purple"]
PLANTS = ["apple", "orange", "banana", "peach", "pea", "avocado", "lemon", "cherry"]
ANIMALS = ["animal", "bird", "insect", "mammal"]



def halves(items: list[str]) -> tuple[list[str], list[str]]:
    items = list(items)
    rng.shuffle(items)
    half = len(items) // 2
    return items[:half], items[half:]


out: dict[str, list[dict[str, str]]] = {"dev": [], "test": []}
o_dev, o_test = halves(OBJ)
for split, objs in (("dev", o_dev), ("test", o_test)):
    for kind, temps in ALF.items():
        for t in temps:
            for _ in range(5):
                text = "Your task is to: " + t.format(o=rng.choice(objs), r=rng.choice(REC)) + "."
                out[split].append({"env": "alfworld", "kind": kind, "task": text})
s_dev, s_test = halves(SUB)
w_dev, w_test = halves(SWOBJ)
p_dev, p_test = halves(PLANTS)
for split, subs, objs, plants in (("dev", s_dev, w_dev, p_dev), ("test", s_test, w_test, p_test)):
    for kind, t in SW.items():
        for _ in range(8):
            c, c2 = rng.sample(COL, 2)
            text = t.format(s=rng.choice(subs), o=rng.choice(objs), p=rng.choice(plants),
                            room=rng.choice(ROOMS), c=c, c2=c2, a=rng.choice(ANIMALS),
                            n=rng.choice([10, 25, 50, 75, 100]))
            out[split].append({"env": "scienceworld", "kind": kind, "task": text})
Path(__file__).with_name("templated.json").write_text(json.dumps(out, indent=1) + "\n")
print({k: len(v) for k, v in out.items()})
