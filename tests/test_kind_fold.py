"""The template rule's folded read (``Reader.kind_first`` turn 7: the pool's nodes fetched with
the first round, scans that return their rows' vectors, the query's template embedded with the
pool's templates) answers exactly what the rule as first written (turn 6, kept below as
:class:`ReferenceReader`) answers, on random memories: same candidates, scores, order, slots,
chain and links, for plain, widened and filtered reads, on SQLite and in memory, with the IVF
path on and off. Also: ``core.slots.template`` (now cut from a cached word split) equals its
first form on random texts."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Collection
from dataclasses import replace
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from deltamem.core import ranking, slots
from deltamem.core.model import Node, Tree
from deltamem.core.ranking import POOL, Candidate
from deltamem.core.scoring import accepts, score
from deltamem.core.tree import discredited
from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.engine.read import Reader, Scanned, TreeRead, _slots
from deltamem.engine.results import cosine
from deltamem.extract.trace import TraceExtractor
from deltamem.store.base import Store, Vector
from deltamem.store.memory import InMemoryStore
from deltamem.store.sqlite import SQLiteStore
from helpers import TEST_SETTINGS, make_episode


class ReferenceReader(Reader):
    """The read path with the template rule as turn 6 wrote it: the pool's nodes fetched after
    the ranking, the template's own scan, then one ``vectors`` call for every candidate, the
    query's template embedded alone and the candidates' templates in a second call."""

    def task_ranked(self, query: Vector, need: int, *, pool: bool = False
                    ) -> tuple[list[Candidate], dict[str, Node], list[Candidate] | None,
                               Scanned]:
        k = max(need, POOL)
        first: list[Candidate] | None = None
        while True:
            found = self.scan(Tree.TASK, query, k)
            if k == POOL:
                first = found
            ranked, nodes = self.fetching(
                found, ranking.first_round(found, need),
                lambda nodes, fetched, found=found, k=k: ranking.task_ranked(
                    found, nodes, need, self.settings.penalty, exhausted=len(found) < k,
                    fetched=fetched))
            if ranked.candidates is not None:
                return ranked.candidates, nodes, first, Scanned({}, {})
            k *= 4

    def kind_first(self, key: str, query: Vector, ranked: list[Candidate],
                   nodes: dict[str, Node], threshold: float, *, widen: bool = True,
                   vectors: dict[str, Vector] | None = None,
                   spare: dict[str, Node] | None = None
                   ) -> tuple[list[Candidate], dict[str, Node], frozenset[str]]:
        pool = ranked[:POOL]
        if self.kind_weight <= 0 or self.embed is None or not pool or not accepts(
                max(c.score for c in pool), threshold):
            return ranked, nodes, frozenset()
        nodes = self.nodes_of(pool, nodes)
        known = [(node.key, _slots(node)) for c in pool if (node := nodes.get(c.id)) is not None]
        votes = slots.slot_votes(known)
        mine = frozenset(w for w in set(slots.tokens(key)) if votes.get(w, 0) > 0)
        shape = _old_template(key, mine)
        if shape == key or not slots.tokens(shape):
            return ranked, nodes, mine
        top = nodes.get(pool[0].id)
        if top is None or not mine.intersection(_slots(top)):
            return ranked, nodes, mine
        [shaped] = self.embed([shape])
        have = {c.id for c in pool}
        extra = [c for c in self.scan(Tree.TASK, shaped, POOL) if c.id not in have] \
            if widen else []
        nodes = self.nodes_of(extra, nodes)
        vectors = self.store.vectors(self.space, [c.id for c in (*pool, *extra)])
        added = []
        for candidate in extra:
            node, vector = nodes.get(candidate.id), vectors.get(candidate.id)
            if node is None or vector is None:
                continue
            sim = cosine(query, vector)
            failure = candidate.failure or discredited(node)
            added.append(Candidate(candidate.id, sim, failure, candidate.depth,
                                   score(sim, failure, self.settings.penalty),
                                   discredited=failure and not candidate.failure))
        keyed: dict[str, str] = {}
        for node in nodes.values():
            if node.key not in keyed and (stored := _slots(node)):
                keyed[node.key] = _old_template(
                    node.key, tuple(w for w in stored if votes.get(w, 1) > 0))
        shapes = {i: keyed[node.key] for i in vectors
                  if (node := nodes.get(i)) is not None and node.key in keyed}
        texts = sorted(set(shapes.values()))
        embedded = dict(zip(texts, self.embed(texts), strict=True)) if texts else {}
        kinds = {i: cosine(shaped, embedded[shapes[i]] if i in shapes else v)
                 for i, v in vectors.items()}
        merged = sorted([*ranked, *added], key=lambda c: -c.score)
        order = ranking.kind_first(merged[: len(pool) + len(added)], kinds, threshold,
                                   self.kind_weight)
        return [*order, *merged[len(pool) + len(added):]], nodes, mine


_OLD_SPLIT = re.compile(r"\S+")


def _old_template(text: str, cut: Collection[str]) -> str:
    """``core.slots.template`` as turn 6 wrote it."""
    if not cut:
        return text
    kept = []
    for word in _OLD_SPLIT.findall(text):
        letters = slots.tokens(word)
        if not letters or not all(w in cut for w in letters):
            kept.append(word)
    return " ".join(kept)


VERBS = [("heat", "microwave"), ("cool", "fridge"), ("clean", "sinkbasin"), ("slice", "knife")]
OBJECTS = ["mug", "apple", "egg", "plate", "bread", "cup"]
UNSEEN = ["kettle", "pear"]
PLACES = ["countertop", "shelf", "drawer", "cabinet", "table"]
PHRASES = ["{v} some {o} and put it in {d}", "put a {v} {o} in {d}.",
           "Your task is to: {v} the {o}, then place it on the {d}"]

episodes = st.lists(st.tuples(st.integers(0, len(VERBS) - 1), st.sampled_from(OBJECTS),
                              st.sampled_from(PLACES), st.integers(0, len(PHRASES) - 1),
                              st.booleans(), st.integers(0, 4), st.sampled_from(["a", "b"])),
                    min_size=20, max_size=56)
queries = st.lists(st.tuples(st.integers(0, len(VERBS) - 1), st.sampled_from(OBJECTS + UNSEEN),
                             st.sampled_from(PLACES + ["floor"]),
                             st.integers(0, len(PHRASES) - 1)), min_size=4, max_size=8)


def _episode(verb: int, obj: str, place: str, phrase: int, success: bool, shape: int,
             project: str) -> Any:
    v, tool = VERBS[verb]
    task = PHRASES[phrase].format(v=v, o=obj, d=place)
    actions = [f"go to {place} 1", f"take {obj} 1 from {place} 1", f"go to {tool} 1",
               f"{v} {obj} 1 with {tool} 1", f"move {obj} 1 to {place} 1"]
    if shape == 1:  # acts on a frame word: "the" becomes one of this key's slots
        actions.insert(0, "go to the shelf")
    elif shape == 2:  # the verb is an argument only: it becomes a slot of this key
        actions.append(f"look at {v} 1")
    elif shape == 3:  # another trajectory of a repeated key: other slots
        actions = actions[2:]
    elif shape == 4:  # acts on no word of its key: stored without slots
        actions = ["look around", "wait 1"]
    return make_episode(task=task, actions=tuple(actions), success=success, project=project)


def _reads(reader: Reader, mem: DeltaMem, task: str, k: int,
           filters: dict[str, Any] | None) -> TreeRead:
    [query] = mem._embed([task], _usage())
    return reader.tree(Tree.TASK, task, query, k, scene="", filters=filters)


def _usage() -> Any:
    from deltamem.engine.results import Usage

    return Usage()


def _view(read: TreeRead) -> tuple[Any, ...]:
    r = read.recall
    return (r.candidates, r.best, r.slots, [n.id for n in r.chain], r.links,
            None if read.ranked is None else list(read.ranked), read.scanned)


@settings(max_examples=25)
@given(episodes, queries, st.sampled_from(["sqlite", "memory"]), st.sampled_from([0, 16]),
       st.lists(st.integers(0, 200), max_size=4))
def test_the_folded_read_answers_what_the_reference_answers(learned, asked, backend, ann,
                                                            discredit):
    with tempfile.TemporaryDirectory() as tmp:
        store: Store = SQLiteStore(Path(tmp) / "f.db") if backend == "sqlite" \
            else InMemoryStore()
        with DeltaMem(store, HashingEmbedder(), TraceExtractor(),
                      settings=replace(TEST_SETTINGS, ann_from=ann)) as mem:
            for item in learned:
                mem.learn(_episode(*item))
            task_nodes = [n for n in store.nodes(mem.space, Tree.TASK)]
            with store.write(mem.space):
                for i in discredit:  # a skill whose record is mostly failures
                    if task_nodes:
                        store.bump(mem.space, task_nodes[i % len(task_nodes)].id, failures=5)
            for verb, obj, place, phrase in asked:
                _compare(mem, PHRASES[phrase].format(v=VERBS[verb][0], o=obj, d=place))


def _compare(mem: DeltaMem, task: str) -> list[TreeRead]:
    """The folded and the reference reads of ``task`` (k 1, 3, past the pool, filtered) are
    equal; the folded ones."""
    reader = mem.reader
    reference = ReferenceReader(mem.store, mem.space, mem.settings, reader.signature,
                                reader.contents, reader.embed)
    out = []
    for k, filters in ((1, None), (3, None), (POOL + 8, None), (1, {"project": "a"})):
        folded = _reads(reader, mem, task, k, filters)
        assert _view(folded) == _view(_reads(reference, mem, task, k, filters)), \
            (task, k, filters)
        out.append(folded)
    return out


def test_the_fold_is_exercised_where_the_template_scan_adds_candidates(tmp_path):
    """A memory past the pool where the rule fires and the template's scan brings keys the
    query's scan did not: the folded read makes one scan with vectors for the template and no
    ``vectors`` call, and answers as the reference does."""
    store = SQLiteStore(tmp_path / "x.db")
    with DeltaMem(store, HashingEmbedder(), TraceExtractor(), settings=TEST_SETTINGS) as mem:
        for i, (verb, obj, place) in enumerate(
                (v, o, d) for v in range(len(VERBS)) for o in OBJECTS for d in PLACES[:3]):
            mem.learn(_episode(verb, obj, place, i % 2, True, 0, "a"))
        assert sum(1 for _ in store.nodes(mem.space, Tree.TASK)) > POOL
        calls: list[str] = []
        for name in ("scan", "scan_vectors", "vectors", "get_nodes"):
            original = getattr(store, name)
            setattr(store, name, _spy(original, name, calls))
        reads = _compare(mem, "heat some mug and put it in table")
        assert reads[0].recall.slots  # the rule ran: the query has slots
        calls.clear()
        _reads(mem.reader, mem, "cool some egg and put it in table", 1, None)
        assert calls.count("scan_vectors") == 2 and "scan" not in calls
        assert calls.count("get_nodes") <= 3  # pool (ahead), extras, chain's link nodes


def _spy(method: Any, name: str, calls: list[str]) -> Any:
    def spied(*args: Any, **kwargs: Any) -> Any:
        calls.append(name)
        return method(*args, **kwargs)
    return spied


@given(st.text(alphabet=st.sampled_from(list("ab c-1.\tAé_")), max_size=40),
       st.sets(st.sampled_from(["a", "b", "ab", "c", "é", "ba"]), max_size=4))
def test_the_cached_template_cut_equals_the_first_one(text, cut):
    assert slots.template(text, cut) == _old_template(text, cut)
    assert slots.template(text, tuple(cut)) == _old_template(text, tuple(cut))
    assert slots.key_words(text) == frozenset(slots.tokens(text))
