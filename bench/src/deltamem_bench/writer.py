"""A structural check of what a model wrote into a memory: AWM's workflows, ReasoningBank's
strategy items, DeltaMem-LLM's skills and scene knowledge.

heldout-1 gave the same writer (SmolLM2-135M) to three arms, and most of what it wrote was not
an item of the asked schema: AWM "workflows" that copy the induction prompt ("Successful
trajectory: Task: ..."), ReasoningBank items whose fields are the prompt's own placeholders
("one sentence", "the strategy"). Those arms then measure the writer, not the method. This
module checks each *shown* item (the text a run logged as ``memory_text``) against its schema,
by structure only:

* ``empty``: a field the schema asks for is missing or empty;
* ``placeholder``: a field is one of the prompt's placeholder values (``...``, ``one
  sentence``, ``the strategy``, ``string``) or keeps a template variable (``{task}``,
  ``$task``);
* ``echo``: the item copies its prompt: a line starts with one of the template's labels
  (``Task:``, ``Successful trajectory:``, ``Answer with``, ...), or at least half of its word
  trigrams occur in the template (:data:`ECHO_OVERLAP`); a ReasoningBank field (title,
  description, content: prose, not actions) echoes when half of its word n-grams (trigrams,
  bigrams for a two-word field) occur in the template or in a task text of the run (the
  prompt's filled ``{task}``: "Task Description: Your task is to ...");
* ``repetition``: one clause occurs three times or more ("Clean, Clean, Clean");
* ``steps``: an AWM workflow without 2 to 8 numbered steps (what its prompt asks for), a
  DeltaMem skill without a step.

A well-formed item has none of these. It says nothing about whether the item is *right*; it
separates "the method's memory" from "the writer's junk". The templates are the arms' own
prompts (:mod:`deltamem_bench.baselines`, the library's ``deltamem/extract/prompts``), so no
phrase of a session enters the rules.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from deltamem_bench.baselines import (
    AWM_EXISTING,
    AWM_HEADER,
    AWM_INDUCE,
    RB_EXTRACT,
    RB_HEADER,
)

WRITERS = ("awm", "reasoningbank", "deltamem-llm")
ECHO_OVERLAP = 0.5  # share of an item's word trigrams found in its prompt template
_WORD = re.compile(r"[a-z0-9]+|\.\.\.")
_VARIABLE = re.compile(r"\{[a-z_]+\}|\$[a-z_]+")
_NUMBERED = re.compile(r"^\s*\d+[.)]\s*(.*)$")
_CLAUSES = re.compile(r"[,.;\n]+")
PLACEHOLDERS = frozenset({"...", "one sentence", "the strategy", "string"})


def _prompt(name: str) -> str:
    return resources.files("deltamem.extract").joinpath("prompts", f"{name}.md").read_text(
        "utf-8")


def templates() -> dict[str, str]:
    """Each writer's prompt template(s), the text an echo copies."""
    deltamem = "\n".join(_prompt(n) for n in ("skill_root", "skill_update", "knowledge_root",
                                              "knowledge_update", "lesson"))
    return {"awm": AWM_INDUCE + "\n" + AWM_EXISTING, "reasoningbank": RB_EXTRACT,
            "deltamem-llm": deltamem}


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _trigrams(words: list[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + 3]) for i in range(len(words) - 2)}


def labels(template: str) -> list[tuple[str, ...]]:
    """The template's line labels: the words before a line's first colon (``Task:``), and the
    first three words of a line without a colon that holds no variable ("Answer with a")."""
    found = []
    for line in template.splitlines():
        line = _VARIABLE.sub(" ", line).strip()
        if not line:
            continue
        head, colon, _ = line.partition(":")
        words = tuple(_words(head if colon else line)[:3 if not colon else 6])
        if words and (colon or len(words) == 3):
            found.append(words)
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class Item:
    """One shown memory item: its writer and its fields (name -> text or list of texts)."""

    writer: str
    fields: dict[str, Any]
    text: str


@dataclass(frozen=True)
class Check:
    """The verdict on one item."""

    well_formed: bool
    problems: tuple[str, ...]
    overlap: float


def _ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def _field_echoes(value: str, reference: list[str]) -> bool:
    words = _words(value)
    if len(words) < 2:
        return False
    n = min(3, len(words))
    grams = _ngrams(words, n)
    return len(grams & _ngrams(reference, n)) / len(grams) >= ECHO_OVERLAP


def check(item: Item, template: str, tasks: Iterable[str] = ()) -> Check:
    """Check ``item`` against its schema, its writer's prompt ``template`` and the run's task
    texts ``tasks`` (what filled the template's task variable)."""
    problems: list[str] = []
    values: list[str] = []
    for value in item.fields.values():
        values += value if isinstance(value, list) else [value]
    for name, value in item.fields.items():
        texts = value if isinstance(value, list) else [value]
        if not texts or any(not str(t).strip() for t in texts):
            problems.append(f"empty {name}")
    if any(" ".join(_words(v)) in PLACEHOLDERS or _VARIABLE.search(v) for v in values):
        problems.append("placeholder")
    marks = labels(template)
    lines = [tuple(_words(line)) for line in item.text.splitlines() if line.strip()]
    words = _words(item.text)
    grams = _trigrams(words)
    overlap = len(grams & _trigrams(_words(template))) / len(grams) if grams else 0.0
    prose: list[str] = []
    if item.writer == "reasoningbank":
        prose = [str(item.fields[k]) for k in ("title", "description", "content")]
    reference = _words(template + "\n" + "\n".join(tasks))
    if (overlap >= ECHO_OVERLAP or any(line[:len(m)] == m for line in lines for m in marks)
            or any(_field_echoes(v, reference) for v in prose)):
        problems.append("echo")
    clauses = Counter(" ".join(_words(c)) for c in _CLAUSES.split(item.text))
    clauses.pop("", None)
    if clauses and max(clauses.values()) >= 3:
        problems.append("repetition")
    steps = item.fields.get("steps")
    if item.writer == "awm" and isinstance(steps, list) and not 2 <= len(steps) <= 8:
        problems.append("steps")
    return Check(not problems, tuple(dict.fromkeys(problems)), round(overlap, 3))


def _body(text: str, header: str) -> str:
    return text[len(header):].strip() if text.startswith(header) else text.strip()


def parse(writer: str, text: str) -> list[Item]:
    """The items of one shown memory block (``memory_text``) of ``writer``'s arm."""
    if not text.strip():
        return []
    if writer == "awm":
        body = _body(text, AWM_HEADER)
        steps = [m.group(1) for m in map(_NUMBERED.match, body.splitlines()) if m]
        return [Item(writer, {"steps": steps}, body)]
    if writer == "reasoningbank":
        body = _body(text, RB_HEADER)
        blocks = re.split(r"(?m)^(?=\[(?:SUCCESS|FAILURE)\] )", body)
        items = []
        for block in (b for b in blocks if b.strip()):
            head, _, content = block.partition("\n")
            head = re.sub(r"^\[(?:SUCCESS|FAILURE)\] ", "", head)
            title, _, description = head.partition(": ")
            items.append(Item(writer, {"title": title, "description": description,
                                       "content": content.strip()}, block.strip()))
        return items
    if writer == "deltamem-llm":
        return _deltamem_items(text)
    raise ValueError(f"no schema for writer {writer!r}; one of {WRITERS}")


def _deltamem_items(text: str) -> list[Item]:
    items: list[Item] = []
    current: dict[str, Any] | None = None
    lines: list[str] = []

    def close() -> None:
        if current is not None:
            items.append(Item("deltamem-llm", dict(current), "\n".join(lines)))

    for line in text.splitlines():
        if line.startswith(("When: ", "Applies to: ")):
            close()
            lines = [line]
            if line.startswith("When: "):
                current = {"activation": line[6:], "steps": [], "termination": ""}
            else:
                current = {"trigger": line[12:], "facts": []}
            continue
        if current is None or line.startswith(("#", "Source:", "Recalled", "Background")):
            continue
        if line.strip() == "---":
            close()
            current, lines = None, []
            continue
        lines.append(line)
        step = _NUMBERED.match(line)
        if "steps" in current and step:
            current["steps"].append(step.group(1))
        elif "steps" in current and line.startswith("Done when: "):
            current["termination"] = line[11:]
        elif "facts" in current and line.startswith("- "):
            current["facts"].append(line[2:])
    close()
    return items


def writer_report(records: Iterable[dict[str, Any]], writer: str) -> dict[str, Any]:
    """Shares of well-formed items over one arm's evaluation records (shown and distinct)."""
    template = templates()[writer]
    records = list(records)
    tasks = sorted({str(r.get("task", "")) for r in records if r.get("task")})
    shown = 0
    good_shown = 0
    distinct: dict[str, Check] = {}
    for record in records:
        if record.get("phase") != "eval":
            continue
        for item in parse(writer, str(record.get("memory_text", ""))):
            verdict = distinct.get(item.text) or check(item, template, tasks)
            distinct[item.text] = verdict
            shown += 1
            good_shown += verdict.well_formed
    problems = Counter(p for v in distinct.values() for p in v.problems)
    good = sum(v.well_formed for v in distinct.values())
    return {"writer": writer, "items_shown": shown,
            "well_formed_shown": good_shown,
            "share_shown": round(good_shown / shown, 3) if shown else None,
            "distinct_items": len(distinct), "well_formed_distinct": good,
            "share_distinct": round(good / len(distinct), 3) if distinct else None,
            "problems_distinct": dict(problems.most_common())}
