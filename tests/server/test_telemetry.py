"""OpenTelemetry spans (the `otel` extra): recall is search_memory, learn is upsert_memory,
following the GenAI memory conventions, captured with the SDK's InMemorySpanExporter."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from server_live import ServerThread, make_spaces

from deltamem.embed.hashing import HashingEmbedder
from deltamem.engine.memory import DeltaMem
from deltamem.faces.server.rest import create_app
from helpers import TEST_SETTINGS, make_episode


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """Spans of this test only: an SDK provider with an in-memory exporter, in place of the
    global provider (which OpenTelemetry lets a process set just once) for this test."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer", provider.get_tracer)
    yield exporter
    provider.shutdown()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def test_recall_and_learn_are_memory_spans(mem: DeltaMem,
                                           spans: InMemorySpanExporter) -> None:
    """learn: an upsert_memory span naming the episode (its own read of the trees is not a
    public recall, so no search_memory span); recall: a search_memory span saying what
    matched. No query text."""
    learned = mem.learn(make_episode())
    recalled = mem.recall("heat the apple", "a kitchen with a fridge, a microwave and a table")
    [upsert] = named(spans, "upsert_memory default")
    search = named(spans, "search_memory default")
    assert len(search) == 1
    assert upsert.attributes is not None and dict(upsert.attributes) == {
        "gen_ai.operation.name": "upsert_memory", "gen_ai.provider.name": "deltamem",
        "gen_ai.memory.store.id": "default", "gen_ai.memory.record.id": learned.episode_id,
        "deltamem.task.action": "root", "deltamem.env.action": "root",
        "deltamem.consolidated": 0}
    [outer] = search
    assert outer.parent is None or upsert.context is None or \
        outer.parent.span_id != upsert.context.span_id
    assert outer.attributes is not None
    assert outer.attributes["gen_ai.operation.name"] == "search_memory"
    assert outer.attributes["deltamem.task.matched"] is True
    assert outer.attributes["deltamem.task.node"] == recalled.task.chain[-1].id
    for span in spans.get_finished_spans():
        assert span.attributes is not None
        assert all("apple" not in str(v) for v in span.attributes.values())


def test_a_failed_operation_records_its_error(mem: DeltaMem,
                                              spans: InMemorySpanExporter) -> None:
    """An exception inside recall marks the span as an error with error.type."""
    mem.store.close()
    with pytest.raises(Exception) as raised:
        mem.recall("heat the apple")
    [span] = named(spans, "search_memory default")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == type(raised.value).__name__


def test_rest_requests_emit_spans_per_space(tmp_path: object,
                                            spans: InMemorySpanExporter) -> None:
    """Through the REST server the spans carry the requested space as the store id."""
    make_spaces(f"{tmp_path}/otel.db", "agent-7")  # reads of a missing space are 404
    app = create_app(f"{tmp_path}/otel.db", embedder=HashingEmbedder(), settings=TEST_SETTINGS,
                     require_keys=False)
    with ServerThread(app) as running, httpx.Client(
            base_url=f"http://127.0.0.1:{running.port}") as c:
        assert c.post("/v1/spaces/agent-7/recall", json={"task": "x"}).status_code == 200
    [span] = named(spans, "search_memory agent-7")
    assert span.attributes is not None
    assert span.attributes["gen_ai.memory.store.id"] == "agent-7"
