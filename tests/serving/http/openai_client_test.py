"""`switchyard serve` through the `openai` Python package: plain and streaming completions (and
chat once the server reads text), greedy answers identical to `switchyard generate`, the
errors a client sees, SIGTERM ending the server with its summary, and tool calls (whole, and
streamed as the client's own stream helper assembles them).

Usage: openai_client_test.py SWITCHYARD_BIN WORK_DIR. Exits 77 (skipped) when openai is missing.
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

try:
    import openai
except ImportError:
    print("SKIPPED: the openai package is not installed (PyPI unreachable when the test set-up ran)")
    sys.exit(77)

BIN, WORK = sys.argv[1], sys.argv[2]
FAILURES = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def switchyard(*args):
    return subprocess.run([BIN, "--threads", "1", *args], check=True, capture_output=True, text=True).stdout


def generate(model, prompt, n):
    out = switchyard("generate", "--model", model, "--tokens", ",".join(map(str, prompt)),
                     "--max-new-tokens", str(n))
    return json.loads(out)


def start_server(model, *extra):
    proc = subprocess.Popen([BIN, "--threads", "1", "serve", "--model", model, "--port", "0", "--no-telemetry",
                             "--no-console", *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    for line in proc.stdout:
        m = re.search(r"API at (http://\S+/v1)", line)
        if m:
            return proc, m.group(1)
        if time.time() > deadline:
            break
    proc.kill()
    raise SystemExit("the server did not say where it listens")


def check_logprobs(client, name, prompt):
    """Log-probabilities: shapes, values ≤ 0, the greedy token is the top alternative, the
    alternatives' probabilities sum to at most 1; chat and streaming too; out of range: 400."""
    import math
    r = client.completions.create(model=name, prompt=prompt, max_tokens=6, temperature=0, logprobs=5)
    lp = r.choices[0].logprobs
    n = len(r.choices[0].model_extra["token_ids"])
    check(lp is not None and len(lp.tokens) == n and len(lp.token_logprobs) == n and len(lp.top_logprobs) == n
          and len(lp.text_offset) == n, "completions logprobs: one entry per token in each list")
    check(all(v <= 0 for v in lp.token_logprobs), "completions logprobs are <= 0")
    check(all(top[tok] == max(top.values()) and top[tok] == v
              for tok, v, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)),
          "completions: the greedy token is the top alternative")
    check(all(len(top) <= 6 and sum(math.exp(x) for x in top.values()) <= 1 + 1e-5 for top in lp.top_logprobs),
          "completions: at most logprobs+1 alternatives, probabilities summing to <= 1")
    check(lp.text_offset == sorted(lp.text_offset), "text offsets grow")
    plain = client.completions.create(model=name, prompt=prompt, max_tokens=6, temperature=0)
    check(plain.choices[0].logprobs is None, "no logprobs unless asked for")
    streamed = []
    for chunk in client.completions.create(model=name, prompt=prompt, max_tokens=6, temperature=0, logprobs=2,
                                           stream=True):
        for choice in chunk.choices:
            if choice.logprobs is not None:
                streamed += choice.logprobs.token_logprobs
    check(len(streamed) == n and all(abs(a - b) < 1e-6 for a, b in zip(streamed, lp.token_logprobs)),
          "streamed completion logprobs equal the whole answer's")

    messages = [{"role": "user", "content": "Hello!"}]
    try:
        c = client.chat.completions.create(model=name, messages=messages, max_tokens=6, temperature=0, logprobs=True,
                                           top_logprobs=4)
    except openai.BadRequestError as e:
        check("tokenizer" in str(e), "chat logprobs without a tokenizer: 400 that says so")
        return
    content = c.choices[0].logprobs.content
    check(len(content) == c.usage.completion_tokens, "chat logprobs: one entry per token")
    check(all(t.logprob <= 0 and len(t.top_logprobs) == 4 for t in content), "chat logprobs <= 0, 4 alternatives each")
    check(all(t.top_logprobs[0].logprob == t.logprob and t.top_logprobs[0].token == t.token for t in content),
          "chat: the greedy token is the top-1 alternative")
    check(all(sum(math.exp(a.logprob) for a in t.top_logprobs) <= 1 + 1e-5 for t in content),
          "chat: sum(exp(top_logprobs)) <= 1")
    check(all(bytes(t.bytes).decode("utf-8", "replace") == t.token for t in content), "chat: bytes spell the token")
    streamed = []
    for chunk in client.chat.completions.create(model=name, messages=messages, max_tokens=6, temperature=0,
                                                logprobs=True, top_logprobs=1, stream=True):
        for choice in chunk.choices:
            if choice.logprobs is not None:
                streamed += [t.logprob for t in choice.logprobs.content]
    check(len(streamed) == len(content) and all(abs(a - t.logprob) < 1e-6 for a, t in zip(streamed, content)),
          "streamed chat logprobs equal the whole answer's")
    for bad in ({"logprobs": True, "top_logprobs": 21}, {"top_logprobs": 3}):
        try:
            client.chat.completions.create(model=name, messages=messages, max_tokens=2, **bad)
            check(False, f"{bad} is refused")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "top_logprobs", f"{bad}: 400 naming top_logprobs")
    try:
        client.completions.create(model=name, prompt=prompt, max_tokens=2, logprobs=21)
        check(False, "logprobs=21 is refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "logprobs", "logprobs=21: 400 naming logprobs")


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}


def check_tool_calls():
    """serve --enable-auto-tool-choice --tool-call-parser hermes on a tiny qwen3_moe model. A random
    model writes no call on its own: its tokenizer's added token </think> is made to decode to a
    call, and logit_bias makes the model write it twice."""
    model = os.path.join(WORK, "qwen3")
    switchyard("make-model", "--arch", "qwen3_moe", "--preset", "tiny", "--seed", "1", "--dtype", "f32", "--out", model)
    path = os.path.join(model, "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    forced = next(t for t in tok["added_tokens"] if t["content"] == "</think>")
    forced["content"] = ("Checking. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                         "{\"city\": \"Zürich\", \"days\": 2}}\n</tool_call>")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    proc, base_url = start_server(model, "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    try:
        client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
        request = dict(model="qwen3", messages=[{"role": "user", "content": "Weather in Zürich?"}], tools=[WEATHER_TOOL],
                       max_tokens=2, temperature=0, logit_bias={str(forced["id"]): 100})
        r = client.chat.completions.create(**request)
        m = r.choices[0].message
        calls = [(c.type, c.function.name, c.function.arguments) for c in m.tool_calls or []]
        check(r.choices[0].finish_reason == "tool_calls" and m.content == "Checking. "
              and calls == [("function", "get_weather", '{"city": "Zürich", "days": 2}')] * 2,
              f"a whole answer's tool calls ({m.content!r}, {calls})")
        check(all(re.fullmatch(r"chatcmpl-tool-[0-9a-f]{32}", c.id) for c in m.tool_calls)
              and m.tool_calls[0].id != m.tool_calls[1].id, "tool call ids")
        # The client's own assembly of a stream (ChatCompletionStreamState, behind
        # client.chat.completions.stream) gives the same message.
        from openai.lib.streaming.chat import ChatCompletionStreamState
        state = ChatCompletionStreamState()
        for chunk in client.chat.completions.create(**request, stream=True):
            state.handle_chunk(chunk)
        final = state.get_final_completion().choices[0]
        streamed_calls = [(c.type, c.function.name, c.function.arguments) for c in final.message.tool_calls or []]
        check(final.finish_reason == "tool_calls" and final.message.content == m.content and streamed_calls == calls
              and all(re.fullmatch(r"chatcmpl-tool-[0-9a-f]{32}", c.id) for c in final.message.tool_calls),
              f"the streamed tool calls as the client assembles them ({final.message.content!r}, {streamed_calls})")
        # Sent back as the next turn's history, with the tool's answer.
        history = request["messages"] + [m.model_dump(exclude_none=True),
                                         {"role": "tool", "tool_call_id": m.tool_calls[0].id, "content": "sunny"}]
        nxt = client.chat.completions.create(**dict(request, messages=history, tool_choice="none", logit_bias=None))
        check(nxt.choices[0].message.tool_calls is None and nxt.usage.prompt_tokens > r.usage.prompt_tokens,
              "the calls and the tool's answer go back as history")
        # A named function: guided decoding holds the random model to its parameters' schema (a
        # small one, so that answers end within max_tokens).
        pick = {"type": "function", "function": {"name": "pick", "parameters": {
            "type": "object", "properties": {"color": {"enum": ["red", "green"]}}, "required": ["color"],
            "additionalProperties": False}}}
        named = client.chat.completions.create(**dict(
            request, tools=[WEATHER_TOOL, pick], tool_choice={"type": "function", "function": {"name": "pick"}},
            logit_bias=None, max_tokens=400, temperature=1, seed=1, n=4))
        ended = [c for c in named.choices if c.finish_reason == "stop"]
        check(ended and all(c.message.content == "" and len(c.message.tool_calls) == 1
                            and c.message.tool_calls[0].function.name == "pick" for c in named.choices)
              and all(json.loads(c.message.tool_calls[0].function.arguments) in ({"color": "red"}, {"color": "green"})
                      for c in ended),
              f"a named tool choice: one call of that function, arguments following its schema ({len(ended)} of 4 ended)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    model = os.path.join(WORK, "model")
    switchyard("make-model", "--arch", "mixtral", "--preset", "tiny", "--seed", "1", "--dtype", "f32", "--out", model)
    proc, base_url = start_server(model)
    try:
        client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
        models = client.models.list()
        name = models.data[0].id
        check(name == "model", f"models.list names the served model ({name})")

        prompt = [5, 17, 42, 99, 3]
        expected = generate(model, prompt, 12)
        r = client.completions.create(model=name, prompt=prompt, max_tokens=12, temperature=0)
        ids = r.choices[0].model_extra["token_ids"]
        check(ids == expected, f"greedy completion equals generate ({ids} vs {expected})")
        check(r.usage.prompt_tokens == 5 and r.usage.completion_tokens == len(expected), "usage counts the tokens")
        check(r.choices[0].finish_reason in ("length", "stop"), "finish_reason")

        streamed, reasons, usage = [], [], None
        for chunk in client.completions.create(model=name, prompt=prompt, max_tokens=12, temperature=0, stream=True):
            for choice in chunk.choices:
                streamed += choice.model_extra["token_ids"]
                if choice.finish_reason:
                    reasons.append(choice.finish_reason)
            usage = chunk.usage or usage
        check(streamed == expected, f"streamed greedy completion equals generate ({streamed})")
        check(len(reasons) == 1, "one finish_reason at the end of the stream")
        check(usage is not None and usage.completion_tokens == len(expected), "usage on the last chunk")

        chunks = list(client.completions.create(model=name, prompt=prompt, max_tokens=4, temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        check(chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 9,
              "stream_options.include_usage: a last chunk with only usage")

        a = client.completions.create(model=name, prompt=prompt, max_tokens=8, temperature=1.0, seed=7)
        b = client.completions.create(model=name, prompt=prompt, max_tokens=8, temperature=1.0, seed=7)
        check(a.choices[0].model_extra["token_ids"] == b.choices[0].model_extra["token_ids"],
              "the same seed samples the same tokens")

        check_logprobs(client, name, prompt)

        try:
            client.completions.create(model=name, prompt=prompt, max_tokens=100000)
            check(False, "max_tokens beyond the context is refused")
        except openai.BadRequestError as e:
            check("maximum context length" in str(e) and e.body.get("param") == "max_tokens",
                  "max_tokens beyond the context: 400 naming max_tokens")
        try:
            client.completions.create(model="gpt-4", prompt=prompt)
            check(False, "an unknown model is refused")
        except openai.NotFoundError:
            check(True, "an unknown model: 404")
        # n choices: choice i samples with seed + i; streamed, the chunks carry their index.
        many = client.completions.create(model=name, prompt=prompt, max_tokens=8, temperature=1.0, seed=7, n=2)
        second = client.completions.create(model=name, prompt=prompt, max_tokens=8, temperature=1.0, seed=8)
        check([c.index for c in many.choices] == [0, 1]
              and many.choices[0].model_extra["token_ids"] == a.choices[0].model_extra["token_ids"]
              and many.choices[1].model_extra["token_ids"] == second.choices[0].model_extra["token_ids"]
              and many.usage.completion_tokens == 16 and many.usage.prompt_tokens == len(prompt),
              "n=2: choice i is the answer with seed + i, usage over both")
        by_index = {0: [], 1: []}
        for chunk in client.completions.create(model=name, prompt=prompt, max_tokens=8, temperature=1.0, seed=7, n=2,
                                               stream=True):
            for ch in chunk.choices:
                by_index[ch.index] += ch.model_extra["token_ids"]
        check(by_index[0] == many.choices[0].model_extra["token_ids"]
              and by_index[1] == many.choices[1].model_extra["token_ids"], "n=2 streamed: the same tokens per index")
        try:
            client.completions.create(model=name, prompt=prompt, n=17)
            check(False, "n=17 is refused")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "n", "n=17: 400 naming n")
        # A list of prompts (lm-eval's batch form): choice p * n + i is prompt p alone with seed + i,
        # usage counts each prompt once.
        other = [9, 8, 7]
        batch = client.completions.create(model=name, prompt=[prompt, other], max_tokens=8, temperature=1.0, seed=7, n=2)
        alone = client.completions.create(model=name, prompt=other, max_tokens=8, temperature=1.0, seed=8)
        check([c.index for c in batch.choices] == [0, 1, 2, 3]
              and batch.choices[0].model_extra["token_ids"] == a.choices[0].model_extra["token_ids"]
              and batch.choices[3].model_extra["token_ids"] == alone.choices[0].model_extra["token_ids"]
              and batch.usage.prompt_tokens == len(prompt) + len(other),
              "a list of prompts: choice p * n + i is prompt p alone with seed + i")

        try:
            t = client.completions.create(model=name, prompt="Once upon a time", max_tokens=16, temperature=0,
                                          extra_body={"ignore_eos": True})
            text = t.choices[0].text
            check(isinstance(text, str) and len(text) > 0 and t.usage.completion_tokens == 16, "a text prompt")
            pieces = "".join(ch.choices[0].text for ch in client.completions.create(
                model=name, prompt="Once upon a time", max_tokens=16, temperature=0, stream=True,
                extra_body={"ignore_eos": True}) if ch.choices)
            check(pieces == text, "streamed text equals the whole answer")
            stop = text[len(text) // 2:len(text) // 2 + 2]
            s = client.completions.create(model=name, prompt="Once upon a time", max_tokens=16, temperature=0,
                                          stop=[stop], extra_body={"ignore_eos": True})
            check(s.choices[0].text == text[:text.find(stop)] and s.choices[0].finish_reason == "stop",
                  f"the stop string {stop!r} ends the answer before it")
        except openai.BadRequestError as e:
            check("tokenizer" in str(e), "text without a tokenizer: 400 that says so")

        messages = [{"role": "user", "content": "Hello!"}]
        try:
            c = client.chat.completions.create(model=name, messages=messages, max_tokens=8, temperature=0)
            check(c.choices[0].message.role == "assistant" and c.usage.completion_tokens > 0, "chat completion")
            text = "".join(ch.choices[0].delta.content or "" for ch in client.chat.completions.create(
                model=name, messages=messages, max_tokens=8, temperature=0, stream=True) if ch.choices)
            check(text == c.choices[0].message.content, "streamed chat equals the whole answer")
        except openai.BadRequestError as e:
            # Until the server reads the model's tokenizer and chat template.
            check("tokenizer" in str(e), "chat without a tokenizer: 400 that says so")
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    check(proc.returncode == 0, f"SIGTERM ends the server cleanly (exit {proc.returncode})")
    check("interrupted:" in out and "TTFT" in out, "with the summary")
    check_tool_calls()
    if FAILURES:
        print(f"{len(FAILURES)} checks failed")
        sys.exit(1)


main()
