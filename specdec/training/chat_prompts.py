"""The chat prompt set for self-distillation on SmolLM2 (``assets/prompts/train/``).

Contract: ``build()`` returns ``{"train": [...], "heldout": [...]}``, lists of
``{"prompt", "category"}`` made deterministically from the templates and subjects below (written
for this project; CC0, see assets/prompts/train/README.md). ``write(folder)`` writes
``train.jsonl`` and ``heldout.jsonl`` there. Why templates x subjects: a few hundred varied user
turns (questions, writing, explanation, code, summarising) without copying any dataset; the
held-out prompts use subjects that no training prompt uses, so acceptance measured on them is not
measured on text the heads saw. The prompts are user turns: the target's chat template is applied
when the target continues them (``selfdistill.py``).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

TEMPLATES: dict[str, list[str]] = {
    "question": [
        "What is {s}?",
        "Why does {s} matter?",
        "Can you tell me a few facts about {s}?",
        "How would you describe {s} to a ten-year-old?",
        "What are the pros and cons of {s}?",
        "What is a common misconception about {s}?",
    ],
    "writing": [
        "Write a short poem about {s}.",
        "Write a two-paragraph story in which {s} plays a part.",
        "Write a friendly email inviting a colleague to a talk about {s}.",
        "Write a product description for a board game themed on {s}.",
        "Give me five creative titles for a blog post about {s}.",
    ],
    "explain": [
        "Explain {s} step by step.",
        "Explain the history of {s} in a few sentences.",
        "Explain how {s} works, with an example.",
        "Compare {s} with something similar and explain the difference.",
    ],
    "summarise": [
        "Summarise in three bullet points what a beginner should know about {s}.",
        "Give a one-sentence summary of {s}.",
        "Summarise the main arguments for and against {s}.",
    ],
}

SUBJECTS = [
    "photosynthesis",
    "the water cycle",
    "black holes",
    "the Roman Empire",
    "compound interest",
    "machine learning",
    "the immune system",
    "volcanoes",
    "climate change",
    "the printing press",
    "honey bees",
    "electric cars",
    "the stock market",
    "sleep",
    "recycling plastic",
    "the moon landing",
    "coffee",
    "chess",
    "the Internet",
    "vaccines",
    "earthquakes",
    "the French Revolution",
    "renewable energy",
    "gravity",
    "DNA",
    "meditation",
    "rainforests",
    "the human heart",
    "inflation",
    "public libraries",
    "bicycles",
    "the Great Wall of China",
    "octopuses",
    "solar panels",
    "jazz music",
    "the Olympic Games",
    "tides",
    "bread baking",
    "time zones",
    "learning a second language",
]
HELDOUT_SUBJECTS = [
    "glaciers",
    "the telescope",
    "remote work",
    "penguins",
    "the periodic table",
    "hiking",
    "origami",
    "lightning",
]

CODE = [
    "Write a Python function that {s}.",
    "Write a Python function that {s}, and explain how it works.",
    "How do I write code in Python that {s}?",
]
CODE_TASKS = [
    "reverses a string",
    "checks whether a number is prime",
    "returns the n-th Fibonacci number",
    "counts the words in a sentence",
    "finds the largest element of a list",
    "removes duplicates from a list",
    "checks whether a string is a palindrome",
    "sorts a list of dictionaries by a key",
    "computes the factorial of a number",
    "merges two sorted lists",
    "reads a CSV file and prints each row",
    "converts Celsius to Fahrenheit",
    "flattens a nested list",
    "computes the average of a list of numbers",
    "counts how often each character appears in a string",
    "finds the greatest common divisor of two numbers",
    "checks whether two strings are anagrams",
    "returns the squares of the even numbers in a list",
    "implements binary search",
    "capitalizes the first letter of every word",
]
HELDOUT_CODE = ["sums the digits of an integer", "transposes a matrix given as a list of lists"]

CHAT = [
    "Hi! How are you today?",
    "Can you recommend a good book for a long train ride?",
    "What should I cook for dinner tonight?",
    "Give me three tips to stay focused while studying.",
    "How can I improve my handwriting?",
    "What is a good way to start running?",
    "I feel nervous about a job interview tomorrow. Any advice?",
    "How do I take care of a cactus?",
    "What are some fun things to do on a rainy day?",
    "How can I save money on groceries?",
    "What is the difference between weather and climate?",
    "How many hours of sleep do adults need?",
    "Suggest a name for my new puppy.",
    "What is a healthy breakfast?",
    "How do I make a paper airplane?",
    "What are good habits for a productive morning?",
    "How do I politely decline an invitation?",
    "Tell me a joke about computers.",
    "What is the capital of Australia?",
    "How do rainbows form?",
]
HELDOUT_CHAT = [
    "What is a good hobby to learn in the winter?",
    "How do I keep my houseplants alive while on holiday?",
    "Can you suggest a weekend trip idea?",
    "What are some tips for writing a good essay?",
]


def _expand(templates: dict[str, list[str]], subjects: list[str], tasks: list[str], chat: list[str]):
    out = []
    for cat, temps in templates.items():
        out += [{"prompt": t.format(s=s), "category": cat} for t in temps for s in subjects]
    out += [{"prompt": t.format(s=s), "category": "code"} for t in CODE for s in tasks]
    out += [{"prompt": c, "category": "chat"} for c in chat]
    return out


def build(n_train: int = 480, seed: int = 0) -> dict[str, list[dict]]:
    train = _expand(TEMPLATES, SUBJECTS, CODE_TASKS, CHAT)
    rng = random.Random(seed)
    keep = [p for p in train if p["category"] in ("code", "chat")]  # all of the rarer kinds
    rest = [p for p in train if p["category"] not in ("code", "chat")]
    rng.shuffle(rest)
    train = keep + rest[: max(0, n_train - len(keep))]
    rng.shuffle(train)
    held = _expand({c: t[:1] for c, t in TEMPLATES.items()}, HELDOUT_SUBJECTS[:4], HELDOUT_CODE, HELDOUT_CHAT)
    held += [{"prompt": t[-1].format(s=s), "category": c} for c, t in TEMPLATES.items() for s in HELDOUT_SUBJECTS[4:6]]
    return {"train": train, "heldout": held}


def write(folder: Path) -> dict[str, int]:
    folder.mkdir(parents=True, exist_ok=True)
    counts = {}
    for name, rows in build().items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        counts[name] = len(rows)
    return counts


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
