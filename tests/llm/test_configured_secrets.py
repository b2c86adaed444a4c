"""Configured secrets (issue 34 item 2): a key read with a trailing newline is normalised, and
neither it nor a piece of it appears in any text that leaves the process: provider errors,
echoed model answers (422 bodies), REST error bodies, CLI errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from fake_openai_server import FakeOpenAIServer, Reply, ok

from deltamem.config import llm_endpoint, secret
from deltamem.errors import ConfigError, ExtractionError, ProviderError
from deltamem.faces.server.http_errors import error_body, library_error_body
from deltamem.llm.openai_compat import OpenAICompatLLM

pytestmark = pytest.mark.server

KEY = "sk-FAKE4089920bb6fa57a060d732fed5f5d2a1d4ad26c9"
MESSAGES = [{"role": "user", "content": "hi"}]


def pieces(text: str, secret_value: str = KEY, size: int = 8) -> list[str]:
    """Every piece of ``secret_value`` of ``size`` characters found in ``text``."""
    return [secret_value[i:i + size] for i in range(len(secret_value) - size + 1)
            if secret_value[i:i + size] in text]


def test_a_key_ending_in_a_newline_is_normalised():
    env = {"DELTAMEM_LLM_API_KEY": KEY + "\n", "DELTAMEM_LLM_BASE_URL": " http://h:1/v1\n",
           "DELTAMEM_LLM_MODEL": "m\r\n"}
    assert llm_endpoint(env) == {"base_url": "http://h:1/v1", "model": "m", "api_key": KEY}
    assert llm_endpoint({"DELTAMEM_LLM_API_KEY": " \n"})["api_key"] is None


@pytest.mark.parametrize("bad", [KEY + "\r\nX-Injected: 1", "sk-ünïcode-1234567890", "a b c d e f"])
def test_a_key_with_a_character_no_header_can_carry_is_refused_without_showing_it(bad):
    with pytest.raises(ConfigError) as caught:
        secret("DELTAMEM_LLM_API_KEY", bad)
    assert "DELTAMEM_LLM_API_KEY" in str(caught.value)
    assert pieces(str(caught.value), bad.strip(), 6) == []


def test_the_header_carries_the_stripped_key(fake_server: FakeOpenAIServer):
    fake_server.replies = [ok("hello")]
    llm = OpenAICompatLLM(fake_server.url, "m", api_key=KEY + "\n", sleep=lambda _: None)
    assert llm.complete(MESSAGES).text == "hello"
    assert fake_server.received[0].headers["authorization"] == f"Bearer {KEY}"


def test_an_escaped_echo_of_the_key_is_redacted(fake_server: FakeOpenAIServer):
    escaped = KEY.replace("-", "\\u002d")
    fake_server.replies = [Reply(400, f'{{"error": "bad key \\"{escaped}\\""}}')]
    llm = OpenAICompatLLM(fake_server.url, "m", api_key=KEY + "\n", max_retries=0,
                          sleep=lambda _: None)
    with pytest.raises(ProviderError) as caught:
        llm.complete(MESSAGES)
    assert pieces(str(caught.value)) == []


def test_rest_bodies_never_show_the_key():
    secret("DELTAMEM_LLM_API_KEY", KEY + "\n")
    answer = ExtractionError("the model's answer never validated", raw=f"sure: {KEY}")
    body = json.dumps(library_error_body(answer))
    assert pieces(body) == [] and "last answer" in body
    body = json.dumps(error_body("ProviderError",
                                 f"Illegal header value b'Bearer {KEY}\\n'"))
    assert pieces(body) == []


def test_cli_errors_never_show_the_key(tmp_path, fake_server: FakeOpenAIServer):
    """The model answers with the key itself: the CLI's error (exit 7) does not show it."""
    fake_server.replies = [ok(f"my key is {KEY}") for _ in range(20)]
    episodes = tmp_path / "one.jsonl"
    episodes.write_text(json.dumps({"task": "boil water", "env": "a kitchen", "success": True,
                                    "steps": [{"action": "go to stove", "observation": "ok"}]})
                        + "\n")
    env = {**os.environ, "DELTAMEM_LLM_API_KEY": KEY + "\n", "DELTAMEM_EMBEDDER": "hashing"}
    proc = subprocess.run(
        [sys.executable, "-m", "deltamem", "learn", str(episodes), "--db",
         str(tmp_path / "m.db"), "--extractor", "llm", "--base-url", fake_server.url,
         "--model", "m"], capture_output=True, text=True, env=env, check=False, timeout=120)
    assert proc.returncode == 7, proc.stderr
    assert pieces(proc.stdout + proc.stderr) == []
    assert fake_server.received[0].headers["authorization"] == f"Bearer {KEY}"
