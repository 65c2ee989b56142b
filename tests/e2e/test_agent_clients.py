"""Coding-agent clients, unmodified, against `tessera serve` on Qwen2.5-Coder-0.5B-Instruct:

- the OpenAI Agents SDK (`openai-agents`): an Agent with one function tool runs through
  OpenAIResponsesModel (`/v1/responses`) on an AsyncOpenAI client with base_url; the tool is called
  (forced by ModelSettings.tool_choice: the SDK drops the forcing after the call, so the next turn
  answers in text) and the run finishes with that text; non-streamed and streamed runs;
- Claude Code: the `claude` CLI that the claude-agent-sdk wheel bundles, `claude -p ...
  --output-format json` with ANTHROPIC_BASE_URL at the server, a fresh HOME, must finish with
  `is_error: false`. Its first request is ~49 KB (three system blocks, a system message, 12 tools:
  about 13k Qwen tokens), so the server gets a 16k context. Marked `claude_code` (pytest -m
  claude_code; ctest runs it as its own test `e2e_claude_code`, label e2e): the prefill of 13k tokens
  takes minutes on a small CPU (measured: 11,639 prompt tokens, 4 min on a loaded 2-core machine,
  ~5 min for the whole test with the server start).
"""
import json
import os
import subprocess
import tempfile

import pytest

from conftest import QWEN_MODEL, SERVED_NAME, require_environment

WEATHER_QUESTION = "What is the weather like in Paris today?"


@pytest.fixture
def agents():
    return pytest.importorskip("agents", reason="pip install openai-agents (scripts/setup.sh installs it)")


def weather_agent(agents, base, tool_choice, calls):
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        calls.append(city)
        return json.dumps({"temperature_c": 21, "sky": "sunny"})

    client = AsyncOpenAI(base_url=base + "/v1", api_key="unused", max_retries=0, timeout=600)
    return agents.Agent(
        name="weather", tools=[get_weather],
        instructions="You are a weather assistant. When a tool result arrives, answer the user in one plain English sentence.",
        model=agents.OpenAIResponsesModel(model=SERVED_NAME, openai_client=client),
        model_settings=agents.ModelSettings(tool_choice=tool_choice, temperature=0, max_tokens=64))


@pytest.mark.parametrize("tool_choice", ["get_weather", "required"])
def test_agents_sdk_run_calls_tool(agents, qwen_server, tool_choice):
    calls = []
    result = agents.Runner.run_sync(weather_agent(agents, qwen_server.base, tool_choice, calls), WEATHER_QUESTION,
                                    max_turns=4)
    assert calls == ["Paris"]
    kinds = [item.type for item in result.new_items]
    assert kinds[:2] == ["tool_call_item", "tool_call_output_item"] and kinds[-1] == "message_output_item"
    assert isinstance(result.final_output, str) and "21" in result.final_output


def test_agents_sdk_streamed_run(agents, qwen_server):
    import asyncio

    calls = []

    async def run():
        r = agents.Runner.run_streamed(weather_agent(agents, qwen_server.base, "get_weather", calls), WEATHER_QUESTION,
                                       max_turns=4)
        raw = [e.data.type async for e in r.stream_events() if e.type == "raw_response_event"]
        return r, raw
    result, raw = asyncio.run(run())
    assert calls == ["Paris"]
    assert raw.count("response.created") == raw.count("response.completed") == 2  # the call, then the answer
    assert "response.function_call_arguments.delta" in raw and "response.output_text.delta" in raw
    assert isinstance(result.final_output, str) and "21" in result.final_output


def claude_cli():
    try:
        import claude_agent_sdk
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(claude_agent_sdk.__file__), "_bundled", "claude")
    return path if os.access(path, os.X_OK) else None


# Context for Claude Code's ~13k-token first request plus its answer; 12 KiB of f16 K+V per token
# for Qwen2.5-0.5B (24 layers x 2 KV heads x 64 dims x K,V x 2 bytes) => 16k tokens = 192 MiB.
CLAUDE_CONTEXT = "16384"
CLAUDE_KV = "256MiB"
CLAUDE_TIMEOUT_S = 1500


@pytest.mark.claude_code
def test_claude_code_print_mode(start_server):
    require_environment()
    cli = claude_cli()
    if cli is None:
        pytest.skip("the claude CLI is missing (pip install claude-agent-sdk; scripts/setup.sh installs it)")
    if not os.path.exists(QWEN_MODEL):
        pytest.skip(f"{QWEN_MODEL} is missing (scripts/fetch_models.sh)")
    s = start_server("--max-model-len", CLAUDE_CONTEXT, "--kv-cache", CLAUDE_KV, model=QWEN_MODEL)
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cwd:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE_"))}
        env.update(HOME=home, ANTHROPIC_BASE_URL=s.base, ANTHROPIC_API_KEY="unused", ANTHROPIC_MODEL=SERVED_NAME,
                   DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   # Its request timeout (600 s by default) against a slow machine's prefill.
                   API_TIMEOUT_MS=str(CLAUDE_TIMEOUT_S * 1000))
        out = subprocess.run([cli, "-p", "Say hello in one short sentence.", "--output-format", "json", "--max-turns", "2"],
                             cwd=cwd, env=env, capture_output=True, text=True, timeout=CLAUDE_TIMEOUT_S)
    # A model name Claude Code does not know makes it print a warning line before the JSON result.
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    assert lines, f"no output (exit {out.returncode}): {out.stderr[-2000:]}\nserver: {s.read_log()}"
    result = json.loads(lines[-1])
    assert result["is_error"] is False, f"{result.get('result')!r} ({result.get('api_error_status')})\n{result}\nserver: {s.read_log()}"
    assert result["subtype"] == "success" and out.returncode == 0
    assert isinstance(result["result"], str) and result["result"].strip()
    assert result["usage"]["input_tokens"] + result["usage"]["cache_read_input_tokens"] > 8000
