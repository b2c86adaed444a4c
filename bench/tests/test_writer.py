"""The writer check: shown memory items against their schema (structure only)."""

from __future__ import annotations

import pytest

from deltamem_bench.baselines import AWM_HEADER, RB_HEADER
from deltamem_bench.memories import DELTAMEM_HEADER
from deltamem_bench.writer import check, labels, parse, templates, writer_report

TASK = "Your task is to: put a clean soapbar in cabinet."


def record(text: str, task: str = TASK) -> dict[str, object]:
    return {"phase": "eval", "task": task, "memory_text": text}


def verdict(writer: str, text: str) -> tuple[str, ...]:
    [item] = parse(writer, text)
    return check(item, templates()[writer], [TASK]).problems


def test_awm_workflow_needs_numbered_steps_and_no_copy_of_its_prompt() -> None:
    """A real workflow passes; heldout-1's kinds of junk fail: a copy of the induction prompt
    ("Successful trajectory:"), a repeated word instead of steps."""
    good = f"{AWM_HEADER}\n1. go to <receptacle>\n2. take <object> from <receptacle>\n3. clean " \
           "<object> with sinkbasin 1"
    assert verdict("awm", good) == ()
    copied = f"{AWM_HEADER}\n{TASK}\nSuccessful trajectory:\nTask: {TASK}\nAction: go to sink"
    assert "echo" in verdict("awm", copied) and "steps" in verdict("awm", copied)
    assert "repetition" in verdict("awm", f"{AWM_HEADER}\nClean, Clean, Clean")


def test_reasoningbank_items_with_placeholders_or_the_task_are_not_well_formed() -> None:
    """The prompt's placeholder values ("one sentence", "the strategy") and a field that copies
    the task fail; a real note passes. Several items of one block are checked one by one."""
    block = (f"{RB_HEADER}\n[SUCCESS] one sentence: the strategy\n  The Strategy\n"
             "[FAILURE] Search receptacles in order: open each cabinet before moving on\n"
             "  Open closed cabinets and drawers, since objects are often inside them.\n"
             "[SUCCESS] Your task is to: put a clean soapbar in cabinet\n  do it now")
    items = parse("reasoningbank", block)
    assert [i.fields["title"] for i in items] == ["one sentence", "Search receptacles in order",
                                                  "Your task is to"]
    problems = [check(i, templates()["reasoningbank"], [TASK]).problems for i in items]
    assert "placeholder" in problems[0] and problems[1] == () and "echo" in problems[2]


def test_deltamem_llm_skills_and_scene_knowledge_are_parsed_from_the_render() -> None:
    """DeltaMem's render: a skill (When / numbered steps / Done when) and scene knowledge
    (Applies to / facts); a skill without steps, or a repeated clause, is not well-formed."""
    text = (f"{DELTAMEM_HEADER}\n\n# Skill memory (procedural)\nRecalled from past episodes.\n\n"
            "When: cleaning an object and storing it\nSource: 2 past episodes.\n"
            "1. take soapbar 1 from countertop 1\n2. clean soapbar 1 with sinkbasin 1\n"
            "Done when: the soapbar is in the cabinet\n\n---\n\n# Scene knowledge\n"
            "Background facts.\n\nApplies to: Applies in a bathroom\nSource: 1 past episode.\n"
            "- In the bathroom: a sinkbasin and a cabinet\n")
    skill, scene = parse("deltamem-llm", text)
    assert skill.fields["steps"] == ["take soapbar 1 from countertop 1",
                                     "clean soapbar 1 with sinkbasin 1"]
    assert scene.fields == {"trigger": "Applies in a bathroom",
                            "facts": ["In the bathroom: a sinkbasin and a cabinet"]}
    template = templates()["deltamem-llm"]
    assert check(skill, template).well_formed and check(scene, template).well_formed
    junk = "When: look around\nDone when: Your task is incomplete. Your task is incomplete. " \
           "Your task is incomplete. " \
           "Your task is incomplete."
    [bad] = parse("deltamem-llm", junk)
    assert set(check(bad, template).problems) >= {"empty steps", "repetition"}


def test_writer_report_counts_shown_and_distinct_items() -> None:
    """Shown items count every episode; distinct ones count each text once."""
    good = f"{AWM_HEADER}\n1. go to sinkbasin 1\n2. clean <object> with sinkbasin 1"
    bad = f"{AWM_HEADER}\nClean, Clean, Clean"
    report = writer_report([record(good), record(good), record(bad), record(""),
                            {"phase": "train", "memory_text": bad}], "awm")
    assert (report["items_shown"], report["well_formed_shown"]) == (3, 2)
    assert (report["distinct_items"], report["well_formed_distinct"]) == (2, 1)
    assert report["share_distinct"] == 0.5 and report["problems_distinct"]["repetition"] == 1
    with pytest.raises(ValueError, match="no schema"):
        parse("synapse", "text")


def test_template_labels_come_from_the_prompts() -> None:
    """The echo labels are read from the arms' own prompts, not from any session."""
    awm = labels(templates()["awm"])
    assert ("task",) in awm and ("successful", "trajectory") in awm
