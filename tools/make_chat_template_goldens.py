#!/usr/bin/env python3
"""Golden renderings of chat templates by Python's jinja2, for Switchyard's tests/text/ tests.

Renders assets/chat_templates/{mixtral,qwen2_moe,qwen3_moe}.jinja over a set of conversations, and
a set of small templates exercising each Jinja feature the engine supports, and writes
tests/golden/data/chat_templates/<name>.json: for every case the context given to the template
and either the rendered text or the error jinja2 raised.

The environment is the one transformers builds in
transformers/utils/chat_template_utils.py::_cached_compile_jinja_template (transformers 5.23.0):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
with its tojson filter (json.dumps, ensure_ascii=False), raise_exception, strftime_now, dict and
namespace globals, and its AssistantTracker extension's {% generation %} tag (here without the
token-mask tracking, which does not change the text). render_jinja_template passes messages, tools, documents,
add_generation_prompt and the caller's keyword arguments (bos_token, eos_token, enable_thinking,
...); messages carrying reasoning get the "thinking"/"reasoning_content" aliases of
_alias_reasoning_fields. The contexts written here are exactly what jinja2 received.

It also writes tool_requests.json: OpenAI chat requests with tools and tool-calling turns as a
client sends them (arguments as JSON text, fields in any order), the context vLLM builds from
each for the template (vllm_context below: its request model's dump of the tools, its message
parsing and _postprocess_messages, which turns arguments' JSON text into objects), and what the
qwen templates render from it; the HTTP server's tests feed the requests through its own parsing.

Run it through tools/make_chat_template_goldens.sh (pinned jinja2 in a virtual environment).
Deterministic: rerunning rewrites identical files. With --verify-with-transformers (in an
environment that also has transformers) every conversation is rendered again through
transformers' own render_jinja_template, and any difference from the goldens is an error.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import warnings
from datetime import datetime
from pathlib import Path

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

REPO_ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = REPO_ROOT / "assets" / "chat_templates"
OUT = REPO_ROOT / "tests" / "golden" / "data" / "chat_templates"


# ---- transformers' environment (chat_template_utils.py, transformers 5.23.0) ----

def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


class TemplateDict:
    def __call__(self, *args, **kwargs):
        return dict(*args, **kwargs)

    def fromkeys(self, *args, **kwargs):
        return dict.fromkeys(*args, **kwargs)


class TemplateNamespace(jinja2.utils.Namespace):
    def __init__(*args, **kwargs):
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name, value):
        TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name):
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


class AssistantTracker(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _generation_support(self, context, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def alias_reasoning(messages):
    out = []
    for message in messages:
        reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def chat_context(messages, add_generation_prompt, tools=None, **kwargs):
    """The variables render_jinja_template hands to jinja2."""
    ctx = {
        "messages": alias_reasoning(messages),
        "tools": tools,
        "documents": None,
        "add_generation_prompt": add_generation_prompt,
    }
    ctx.update(kwargs)
    return ctx


def render_case(env, name, source, context):
    case = {"name": name, "context": context}
    try:
        template = env.from_string(source)
        case["output"] = template.render(**context)
    except jinja2.exceptions.TemplateError as e:
        case["error"] = f"{type(e).__name__}: {e}"
        # raise_exception's message is the template's own; the engine must report it verbatim.
        if type(e) is jinja2.exceptions.TemplateError:
            case["error_contains"] = str(e)
    except Exception as e:  # TypeError, ZeroDivisionError, ...: jinja2 lets Python's errors through
        case["error"] = f"{type(e).__name__}: {e}"
    return case


# ---- conversations ----

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
U1 = {"role": "user", "content": "What is the capital of France?"}
A1 = {"role": "assistant", "content": "Paris."}
U2 = {"role": "user", "content": "And of Japan?"}
A2 = {"role": "assistant", "content": "Tokyo."}
U_UNICODE = {"role": "user", "content": "Grüße aus Zürich! 東京は？ Ünïcödé “quotes” — emoji 🚀🤖 and tabs\tand\nnewlines"}
A_UNICODE = {"role": "assistant", "content": "Привет 👋 — ça va? «d'accord» 你好"}
U_SPACES = {"role": "user", "content": "  leading and trailing spaces  \n\n"}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "The city, e.g. Zürich"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two numbers",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
        },
    },
]

TOOL_CALL_TURN = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich, and 2.5 + 4?"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}}},
            {"type": "function", "function": {"name": "add", "arguments": "{\"a\": 2.5, \"b\": 4}"}},
        ],
    },
    {"role": "tool", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
    {"role": "tool", "content": "6.5"},
]


def mixtral_cases():
    tok = {"bos_token": "<s>", "eos_token": "</s>"}
    cases = [
        ("user_only", [U1], True),
        ("user_only_no_generation_prompt", [U1], False),
        ("system_and_user", [SYSTEM, U1], True),
        ("multi_turn", [U1, A1, U2], True),
        ("multi_turn_with_system", [SYSTEM, U1, A1, U2, A2], False),
        ("non_ascii", [U_UNICODE, A_UNICODE, U_SPACES], True),
        ("empty_messages", [], True),
        ("error_two_users", [U1, U2], True),
        ("error_assistant_first", [A1, U1], True),
        ("error_tool_role", [U1, A1, {"role": "tool", "content": "x"}], True),
    ]
    return [(name, chat_context(msgs, agp, **tok)) for name, msgs, agp in cases]


def qwen_common_cases():
    return [
        ("user_only", [U1], True, None, {}),
        ("user_only_no_generation_prompt", [U1], False, None, {}),
        ("system_and_user", [SYSTEM, U1], True, None, {}),
        ("multi_turn", [U1, A1, U2], True, None, {}),
        ("multi_turn_with_system", [SYSTEM, U1, A1, U2, A2], False, None, {}),
        ("non_ascii", [U_UNICODE, A_UNICODE, U_SPACES], True, None, {}),
    ]


def qwen2_cases():
    tok = {"bos_token": None, "eos_token": "<|im_end|>"}
    cases = qwen_common_cases() + [
        ("empty_messages", [], True, None, {}),
        ("tool_messages_are_plain_roles", TOOL_CALL_TURN[:2] + [{"role": "tool", "content": "21.5"}], True, None, {}),
    ]
    return [(name, chat_context(msgs, agp, tools=tools, **tok, **extra)) for name, msgs, agp, tools, extra in cases]


def qwen3_cases():
    tok = {"bos_token": None, "eos_token": "<|im_end|>"}
    think = {"role": "assistant", "content": "<think>\nThe user asks about France.\n</think>\n\nParis."}
    reasoning = {"role": "assistant", "content": "Tokyo.", "reasoning_content": "Japan's capital is Tokyo."}
    cases = qwen_common_cases() + [
        ("enable_thinking_false", [U1], True, None, {"enable_thinking": False}),
        ("enable_thinking_true", [U1], True, None, {"enable_thinking": True}),
        ("history_with_think_in_content", [U1, think, U2], True, None, {}),
        ("last_assistant_with_think_in_content", [U1, think], False, None, {}),
        ("reasoning_content_field_last_turn", [U1, A1, U2, reasoning], False, None, {}),
        ("reasoning_content_field_history", [U1, reasoning, U2], True, None, {"enable_thinking": False}),
        ("tools_defined", [U1], True, TOOLS, {}),
        ("tools_with_system", [SYSTEM, U1], True, TOOLS, {}),
        ("tool_calls_and_responses", TOOL_CALL_TURN, True, TOOLS, {}),
        ("tool_calls_then_answer", TOOL_CALL_TURN + [{"role": "assistant", "content": "It is 21.5 °C; 2.5 + 4 = 6.5."}],
         False, TOOLS, {}),
        ("tool_call_with_content", [U1, {"role": "assistant", "content": "Let me check.",
                                         "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
                                    {"role": "tool", "content": "sunny"}], True, TOOLS, {}),
        ("user_message_that_looks_like_tool_response",
         [U1, A1, {"role": "user", "content": "<tool_response>\nok\n</tool_response>"}], True, None, {}),
        ("system_not_first", [U1, {"role": "system", "content": "Be brief."}, A1], False, None, {}),
        ("error_content_missing", [{"role": "user"}], True, None, {}),
    ]
    return [(name, chat_context(msgs, agp, tools=tools, **tok, **extra)) for name, msgs, agp, tools, extra in cases]


# ---- chat requests with tools, as vLLM hands them to the template ----

def vllm_tool(tool):
    """ChatCompletionToolsParam(...).model_dump(): declared fields first (None when absent), then extras."""
    fn = tool["function"]
    function = {"name": fn["name"], "description": fn.get("description"), "parameters": fn.get("parameters")}
    function.update({k: v for k, v in fn.items() if k not in function})
    out = {"type": tool.get("type", "function"), "function": function}
    out.update({k: v for k, v in tool.items() if k not in out})
    return out


def vllm_messages(messages):
    """vLLM's parse_chat_messages for string-content templates, then _postprocess_messages."""
    out = []
    for m in messages:
        content = m.get("content")
        if content is None:
            text = ""
        elif isinstance(content, str):
            text = content
        else:
            text = "\n".join(part["text"] for part in content)
        msg = {"role": m["role"], "content": text}
        if m["role"] == "assistant" and m.get("tool_calls") is not None:
            msg["tool_calls"] = copy.deepcopy(list(m["tool_calls"]))
        elif m["role"] == "tool" and "tool_call_id" in m:
            msg["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        out.append(msg)
    for msg in out:
        if msg["role"] == "assistant" and isinstance(msg.get("tool_calls"), list):
            if not msg["tool_calls"]:
                del msg["tool_calls"]  # an empty list is dropped
                continue
            for item in msg["tool_calls"]:
                if args := item["function"].get("arguments"):
                    if not isinstance(args, (dict, list)):
                        item["function"]["arguments"] = json.loads(args)
                else:
                    item["function"]["arguments"] = {}
    return out


def vllm_context(request):
    tools = request.get("tools")  # also with tool_choice "none" (vLLM's default)
    return chat_context(vllm_messages(request["messages"]), True,
                        tools=None if tools is None else [vllm_tool(t) for t in tools],
                        bos_token=None, eos_token="<|im_end|>")


CLIENT_TOOLS = [
    {"function": {"parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                                 "required": ["city"]},
                  "name": "get_weather", "description": "Weather in a city, e.g. Zürich", "strict": True},
     "type": "function"},
    {"type": "function", "function": {"name": "now"}},
]

CLIENT_CALL_TURN = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Zürich for 2 days, and the time?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "chatcmpl-tool-1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"days\": 2, \"city\": \"Zürich\"}"}},
        {"id": "chatcmpl-tool-2", "type": "function", "function": {"name": "now", "arguments": ""}}]},
    {"role": "tool", "tool_call_id": "chatcmpl-tool-1", "content": "{\"temperature\": 21.5}"},
    {"role": "tool", "tool_call_id": "chatcmpl-tool-2", "content": [{"type": "text", "text": "12:00"}]},
]


def tool_request_cases():
    """(name, template, request): requests as an OpenAI client sends them."""
    cases = []
    for template in ("qwen3_moe", "qwen2_moe"):
        cases += [
            (f"{template}_tools_as_clients_send_them", template,
             {"messages": [U1], "tools": CLIENT_TOOLS}),
            (f"{template}_tools_with_system", template,
             {"messages": [SYSTEM, U1], "tools": CLIENT_TOOLS, "tool_choice": "none"}),
            (f"{template}_tool_calls_and_answers", template,
             {"messages": CLIENT_CALL_TURN, "tools": CLIENT_TOOLS}),
            (f"{template}_content_with_a_call_then_user", template,
             {"messages": [U1, {"role": "assistant", "content": "Let me check.", "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
                           {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
                           {"role": "assistant", "content": "It is noon."},
                           {"role": "user", "content": "Thanks!"}],
              "tools": CLIENT_TOOLS}),
            (f"{template}_tool_turns_without_tools", template, {"messages": CLIENT_CALL_TURN}),
        ]
    return cases


# ---- feature snippets: (name, template, context) ----

PEOPLE = [
    {"name": "Ada", "age": 36, "admin": True, "tags": ["math", "code"]},
    {"name": "bob", "age": 7, "admin": False, "tags": []},
    {"name": "Cy", "age": 36, "tags": ["x"]},
]

SNIPPETS = [
    # output and literals
    ("text_only", "hello\nworld\n", {}),
    ("print_string", "{{ 'a' }}{{ \"b\" }}{{ 'c' 'd' }}", {}),
    ("print_numbers", "{{ 1 }} {{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-7 }} {{ 0.0001 }} {{ -0.0 }} {{ 2.50 }} {{ 1_000 }}", {}),
    ("print_bool_none", "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}", {}),
    ("print_containers", "{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 'n': [1]} }} {{ (1, 'x') }} {{ (1,) }} {{ () }}", {}),
    ("print_string_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'tab\\tnl\\n', 'ü'] }}", {}),
    ("print_context_values", "{{ s }}|{{ i }}|{{ f }}|{{ b }}|{{ n }}|{{ l }}|{{ d }}", {"s": "str", "i": 42, "f": 2.0, "b": False, "n": None, "l": [1, 2.5, "x"], "d": {"b": 1, "a": [True]}}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\\x41\\u00e9\\U0001F600\\101\\q' }}", {}),
    ("comments", "a{# a comment #}b{#- stripped -#}  c  {# trailing #}\nd", {}),
    ("raw_block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}!", {}),
    # whitespace control
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "    {% if true %}\n    indented\n    {% endif %}\n  end", {}),
    ("lstrip_not_for_variables", "    {{ 'v' }}\n", {}),
    ("minus_strips", "a   {{- 'b' -}}   c\n  {%- if true -%}  \n d {%- endif %}", {}),
    ("plus_disables_lstrip", "  {%+ if true %}x{% endif %}\n", {}),
    ("plus_disables_trim", "{% if true +%}\nx{% endif %}", {}),
    ("trailing_newline_dropped", "x\n", {}),
    ("crlf_newlines", "a\r\nb{% if true %}\r\nc{% endif %}\r\n", {}),
    ("lstrip_after_text_on_line", "text {% if true %}x{% endif %}\n", {}),
    ("whitespace_mix", "{% for i in [1,2] %}\n  {{ i }}\n{% endfor %}\n", {}),
    ("comment_lstrip_trim", "a\n    {# c #}\nb", {}),
    # if / elif / else
    ("if_elif_else", "{% for x in [0, 1, 2] %}{% if x == 0 %}zero{% elif x == 1 %}one{% else %}many{% endif %},{% endfor %}", {}),
    ("if_truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, none, 0.0] %}{{ 'T' if v else 'F' }}{% endfor %}", {}),
    ("ternary_without_else", "[{{ 'yes' if false }}]", {}),
    # for loops
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1,2,3] %}{{ loop.previtem }}<{{ x }}>{{ loop.nextitem }} {% endfor %}", {}),
    ("for_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in [1] %}{{ x }}{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for p in people if p.age > 10 %}{{ p.name }}{{ loop.index }}/{{ loop.length }} {% endfor %}", {"people": PEOPLE}),
    ("for_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("for_unpack_tuple", "{% for a, b in [(1, 2), [3, 4]] %}{{ a + b }} {% endfor %}", {}),
    ("for_nested_loop_vars", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("for_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("for_scope_does_not_leak", "{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{{ x }}{% endfor %} {{ x }}", {}),
    ("for_undefined_is_empty", "[{% for x in missing %}{{ x }}{% endfor %}]", {}),
    ("for_string_chars", "{% for c in 'héllo' %}{{ c }}.{% endfor %}", {}),
    ("for_reverse_slice", "{% for m in msgs[::-1] %}{{ m }}{% endfor %}", {"msgs": ["a", "b", "c"]}),
    ("loop_in_filter_iterations", "{% for x in [1,2,3,4] if x is even %}{{ loop.index }}:{{ x }}{{ ',' if not loop.last }}{% endfor %}", {}),
    ("for_else_after_continue_or_break", "{% for i in [1, 2] %}{% continue %}{% else %}else1{% endfor %}|{% for i in [1, 2] %}{% break %}{% else %}else2{% endfor %}|{% for i in [1, 2] %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% else %}else3{% endfor %}|{% for i in [1, 2] %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% else %}else4{% endfor %}", {}),
    ("for_else_scope", "{% set x = 'outer' %}{% for i in [] %}{% else %}{% set x = 'else' %}{{ x }}{% endfor %}|{{ x }}", {}),
    # set, namespace, block set
    ("set_simple", "{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}", {}),
    ("set_in_if_leaks", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for i in [1,2,3] %}{% set ns.count = ns.count + i %}{% endfor %}{% set ns.found = true %}{{ ns.count }} {{ ns.found }} {{ ns.new is defined }}", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("namespace_underscore_rejected", "{% set ns = namespace(_x=1) %}{{ ns._x }}", {}),
    ("block_set", "{% set block %}\n  hi {{ 1 + 1 }}\n{% endset %}[{{ block }}]", {}),
    ("block_set_filter", "{% set shout | upper | trim %}  quiet  {% endset %}[{{ shout }}]", {}),
    ("set_undefined_name_then_defined", "{{ x is defined }}{% set x = none %}{{ x is defined }}{{ x is none }}", {}),
    # macros
    ("macro_basic", "{% macro greet(name, greeting='Hello') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Ada') }} {{ greet('Bob', greeting='Hi') }} {{ greet(name='Cy', greeting='Yo') }}", {}),
    ("macro_missing_arg", "{% macro m(a, b) %}[{{ a }}][{{ b }}][{{ b is defined }}]{% endmacro %}{{ m(1) }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ ctx }}{% endmacro %}{{ m() }}", {"ctx": "C"}),
    ("macro_whitespace", "{%- macro item(x) -%}\n  <{{ x }}>\n{%- endmacro -%}\n{{ item(1) }}{{ item(2) }}", {}),
    ("macro_too_many_args", "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}", {}),
    # attribute and subscript access
    ("attr_and_item", "{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d['b']['c'] }} {{ l[0] }} {{ l[-1] }} {{ l.1 }}", {"d": {"a": 1, "b": {"c": "deep"}}, "l": [10, 20, 30]}),
    ("missing_attr_is_undefined", "[{{ d.missing }}][{{ d['missing'] }}][{{ l[10] }}][{{ d.missing is defined }}]", {"d": {"a": 1}, "l": [1]}),
    ("attr_of_undefined_errors", "{{ missing.attr }}", {}),
    ("attr_of_none_is_undefined", "[{{ n.attr }}][{{ n.attr is defined }}]", {"n": None}),
    ("slices", "{{ l[1:] }}{{ l[:2] }}{{ l[::-1] }}{{ l[-2:] }}{{ l[::2] }}{{ l[1:-1] }}{{ l[5:] }}{{ l[:-10] }}{{ s[1:4] }}{{ s[::-1] }}", {"l": [1, 2, 3, 4], "s": "héllo wörld"}),
    ("string_index", "{{ s[0] }}{{ s[-1] }}{{ s[1] }}", {"s": "äbc"}),
    ("dict_literal_order", "{{ {'b': 1, 'a': 2, 'b': 3} }}", {}),
    # operators
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + 2.5 }} {{ true + 1 }}", {}),
    ("precedence", "{{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ (1 + 2) ~ 3 }} {{ not true or true }} {{ 10 - 2 - 3 }}", {}),
    ("concat_binds_tighter_than_plus", "{{ 1 + 2 ~ 3 }}", {}),
    ("string_ops", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ 1 ~ 'x' ~ none ~ true ~ 1.0 }} {{ [1] + [2] }} {{ [0] * 3 }}", {}),
    ("concat_undefined", "[{{ missing ~ 'x' }}]", {}),
    ("add_undefined_errors", "{{ missing + 'x' }}", {}),
    ("add_type_error", "{{ 'a' + 1 }}", {}),
    ("division_by_zero", "{{ 1 / 0 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }} {{ none == none }} {{ missing == none }}", {}),
    ("compare_type_error", "{{ 1 < 'a' }}", {}),
    ("in_operator", "{{ 'a' in 'cat' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'x' not in 'abc' }} {{ 3 not in [3] }} {{ 'x' in missing }}", {}),
    ("and_or_values", "{{ 0 or 'fallback' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or [] }} {{ not 0 }} {{ not 'x' }}", {}),
    ("ternary", "{{ 'a' if 1 else 'b' }} {{ 'a' if 0 else 'b' }} {{ 'x' if false else 'y' if true else 'z' }}", {}),
    # tests
    ("tests_types", "{% for v in [1, 1.5, 'a', [1], {'a': 1}, none, true, false] %}{{ v is number }}{{ v is integer }}{{ v is float }}{{ v is string }}{{ v is mapping }}{{ v is sequence }}{{ v is iterable }}{{ v is boolean }}{{ v is none }}{{ v is true }}{{ v is false }}|{% endfor %}", {}),
    ("tests_defined", "{{ x is defined }} {{ x is undefined }} {{ y is defined }} {{ y is not defined }} {{ y is iterable }} {{ y is sequence }} {{ y is mapping }} {{ d.k is defined }}", {"x": 0, "d": {"k": None}}),
    ("tests_values", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 1 is eq 1 }} {{ 1 is equalto 2 }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 2 is le 1 }} {{ 1 is ne 2 }} {{ 2 is in [1, 2] }} {{ false is sameas false }} {{ none is sameas none }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }}", {}),
    ("test_is_not", "{{ none is not none }} {{ 'x' is not string }} {{ 1 is not even }}", {}),
    # filters
    ("filter_length", "{{ 'héllo'|length }} {{ [1, 2]|length }} {{ {'a': 1}|count }} {{ missing|length }}", {}),
    ("filter_trim", "[{{ '  x \n'|trim }}][{{ 'xxhixx'|trim('x') }}][{{ missing|trim }}]", {}),
    ("filter_tojson", "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ d|tojson(separators=(',', ':')) }}\n{{ d|tojson(sort_keys=true) }}\n{{ d|tojson(ensure_ascii=true) }}", {"d": {"z": "Zürich 🚀", "a": [1, 2.5, None, True, {}], "q": "\"quoted\"\n\t\u0001", "e": [], "n": 1e100}}),
    ("filter_tojson_scalars", "{{ 'a'|tojson }} {{ 1|tojson }} {{ 1.0|tojson }} {{ none|tojson }} {{ true|tojson }} {{ [(1, 2)]|tojson }} {{ {1: 'int key'}|tojson }}", {}),
    ("filter_tojson_indent_nested", "{{ d|tojson(indent=4) }}", {"d": {"a": {"b": [1, {"c": []}]}, "e": "x"}}),
    ("filter_tojson_undefined", "{{ missing|tojson }}", {}),
    ("filter_string_int_float", "{{ 5|string + 'x' }} {{ '42'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 2|float }} {{ 'x'|float }} {{ true|int }} {{ ' 12 '|int }}", {}),
    ("filter_list_join", "{{ 'abc'|list }} {{ [1, 2, 3]|join(', ') }} {{ people|join('/', attribute='name') }} {{ {'a': 1, 'b': 2}|list }} {{ ['a', none, 1]|join }}", {"people": PEOPLE}),
    ("filter_first_last_reverse", "{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ 'abc'|first }} {{ [1, 2, 3]|reverse|list }} {{ 'abc'|reverse }} [{{ []|first }}]", {}),
    ("filter_case", "{{ 'hello WORLD'|upper }} {{ 'Hello WORLD'|lower }} {{ 'hello wORLD it\\'s'|title }} {{ 'hello WORLD'|capitalize }} {{ 'ünïcode'|upper }} {{ 'ÄÖÜ'|lower }}", {}),
    ("filter_default", "{{ missing|default('dflt') }} {{ missing|d('d') }} {{ ''|default('empty') }} {{ ''|default('empty', true) }} {{ none|default('n') }} {{ none|default('n', boolean=true) }} [{{ missing|default }}]", {}),
    ("filter_items", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}[{% for x in missing|items %}{{ x }}{% endfor %}]", {"d": {"b": 1, "a": 2}}),
    ("filter_selectattr", "{{ people|selectattr('admin')|map(attribute='name')|list }} {{ people|rejectattr('admin')|map(attribute='name')|list }} {{ people|selectattr('age', 'equalto', 36)|map(attribute='name')|join(',') }} {{ people|selectattr('admin', 'defined')|list|length }} {{ people|selectattr('age', 'gt', 10)|list|length }}", {"people": PEOPLE}),
    ("filter_select_reject", "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|select|list }} {{ [1, 5, 10]|select('gt', 3)|list }}", {}),
    ("filter_map", "{{ people|map(attribute='name')|map('upper')|join(' ') }} {{ people|map(attribute='missing', default='?')|list }} {{ ['1', '2']|map('int')|sum }} {{ people|map(attribute='tags.0')|list }}", {"people": PEOPLE}),
    ("filter_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'hello'|replace('', '-') }}", {}),
    ("filter_safe", "{{ '<b>&</b>'|safe }} {{ '<b>' }}", {}),
    ("filter_indent", "[{{ 'a\nb\n\nc'|indent }}]\n[{{ 'a\nb\n\nc'|indent(2, true) }}]\n[{{ 'a\nb\n\nc'|indent(width='> ', first=false, blank=true) }}]", {}),
    ("filter_unique_sort", "{{ ['b', 'A', 'a', 'c', 'B']|unique|list }} {{ ['b', 'A', 'a', 'c']|sort }} {{ ['b', 'A', 'a', 'c']|sort(case_sensitive=true) }} {{ [3, 1, 2]|sort(reverse=true) }} {{ people|sort(attribute='age')|map(attribute='name')|list }} {{ people|unique(attribute='age')|map(attribute='name')|list }}", {"people": PEOPLE}),
    ("filter_dictsort", "{{ {'b': 1, 'A': 3, 'a': 2}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}", {}),
    ("filter_abs_sum", "{{ -3|abs }} {{ (-3.5)|abs }} {{ [1, 2, 3.5]|sum }} {{ people|sum(attribute='age') }}", {"people": PEOPLE}),
    ("filter_chain_precedence", "{{ -1|abs }} {{ 'a' ~ 'b'|upper }} {{ [3,1]|sort|first + 1 }} {{ ('x' if true else 'y')|upper }}", {}),
    # methods
    ("str_methods", "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith('lo') }} {{ 'Hello'.startswith(('x', 'H')) }} [{{ '  x  '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\n\nx\n'.lstrip('\n') }}][{{ 'x  '.rstrip() }}]", {}),
    ("str_split", "{{ 'a,b,,c'.split(',') }} {{ '  a  b  '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x</think>y</think>z'.split('</think>')[-1] }} {{ '  a  b  '.rsplit(none, 1) }} {{ ''.split() }} {{ ''.split(',') }}", {}),
    ("str_methods_more", "{{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'a-b c'.title() }} {{ 'hELLO'.capitalize() }} {{ 'aaa'.replace('a', 'x', 1) }} {{ 'hello'.find('l') }} {{ 'hello'.rfind('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a', 'b']) }} {{ 'a\nb\r\nc'.splitlines() }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }} {{ 'abc'.islower() }}", {}),
    ("str_isnumeric", "{{ '½'.isnumeric() }} {{ '一'.isnumeric() }} {{ '٣'.isnumeric() }} {{ '²'.isnumeric() }} {{ 'Ⅻ'.isnumeric() }} {{ '12'.isnumeric() }} {{ 'x'.isnumeric() }} {{ ''.isnumeric() }} {{ '1.5'.isnumeric() }} {{ '中'.isnumeric() }}", {}),
    ("escapes_in_long_runs", "{{ ['plain ascii a\\x00b\\x7fc\\u0085d\\u00a0e\\u200bf\\U0001F600g\\\\h' ~ \"'\", 'x\"y', 'é\\t'] }} {{ ['a\\x00b\\x7fc\\u0085é\\U0001F600\\\\\"'] | tojson }} {{ ['a\\x7f\\U0001F600é'] | tojson(ensure_ascii=true) }} {{ 'abcd'|replace('', '-', 2) }} [{{ '\\n\\nx\\n'|indent(2, true) }}] {{ 'x\\r\\ny'.splitlines() }} {{ 'é'|first }}{{ 'aé'|last }}{{ ''|first is defined }}", {}),
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }}", {"d": {"a": 1, "b": [2]}}),
    ("list_methods", "{{ [1, 2, 1].count(1) }} {{ ['a', 'b'].index('b') }}", {}),
    ("method_on_undefined_errors", "{{ missing.strip() }}", {}),
    ("unknown_method_errors", "{{ 'abc'.nosuchmethod() }}", {}),
    ("mutating_method_rejected", "{% set l = [1] %}{{ l.append(2) }}", {}),
    # globals
    ("range", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}", {}),
    ("dict_global", "{{ dict(a=1, b='x') }} {{ dict({'k': 1}, z=2) }}", {}),
    ("raise_exception", "{% if true %}{{ raise_exception('Bad input: ' ~ 42) }}{% endif %}", {}),
    ("strftime_now_exists", "{{ strftime_now('%Y')|length }}", {}),
    # scoping and undefined corner cases
    ("set_in_loop_reads_outer", "{% set x = 'o' %}{% for i in [1, 2] %}{% set x = x ~ i %}{{ x }}{% endfor %}{{ x }}", {}),
    ("loop_outside_for", "[{{ loop is defined }}]", {}),
    ("attr_chain_on_missing_errors", "{{ d.missing.deeper }}", {"d": {}}),
    ("defined_test_on_missing_chain_errors", "{{ d.missing.deeper is defined }}", {"d": {}}),
    ("dunder_attribute_is_undefined", "[{{ (0.5).__class__ }}][{{ 'x'.__class__ is defined }}]", {}),
    ("float_specials", "{{ 1e300 * 1e10 }} {{ -1e300 * 1e10 }} {{ 6 // 4 }} {{ 2 ** 0.5 }} {{ 10 / 4 }} {{ 1 / 3 }} {{ 123456789.123456789 }} {{ 0.000123 }}", {}),
    ("unicode_whitespace_strip", "[{{ '\u3000\u00a0x y\u2003'.strip() }}][{{ '\u3000a\u3000b'.split() }}]", {}),
    ("dict_keys_mixed", "{{ {1: 'a', true: 'b', 'k': 'c'} }} {{ 1 in {true: 1} }} {{ d[1] }}", {"d": {"1": "string key"}}),
    ("nested_macro_calls", "{% macro b(x) %}<{{ x }}>{% endmacro %}{% macro a(x) %}{{ b(x ~ '!') }}{{ b(x) }}{% endmacro %}{{ a('hi') }}", {}),
    ("for_over_dict_with_filter", "{% for k in d if d[k] > 1 %}{{ k }}{{ loop.length }}{% endfor %}", {"d": {"a": 1, "b": 2, "c": 3}}),
    ("whitespace_lstrip_nested", "<ul>\n  {% for x in [1, 2] %}\n    {% if x %}\n    <li>{{ x }}</li>\n    {% endif %}\n  {% endfor %}\n</ul>\n", {}),
    ("minus_and_trim_blocks", "{% for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}\nend", {}),
    ("string_multiplication_in_condition", "{{ '=' * 3 if true }}", {}),
    ("tojson_in_string_concat", "{{ 'args: ' + {'a': [1, 'é']}|tojson }}", {}),
    ("length_of_namespace_errors", "{{ namespace(a=1)|length }}", {}),
    ("generation_tag", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{{ eos }}{% endgeneration %}{% else %}[{{ m.content }}]{% endif %}\n{% endfor %}", {"messages": [U1, A1], "eos": "</s>"}),
    # lexer corner cases
    ("block_at_template_start_indented", "   {% if true %}x{% endif %}\n  {%- if true %} y{% endif %}", {}),
    ("tabs_lstrip", "\t\t{% if true %}\n\tz\n\t{% endif %}\n", {}),
    ("delimiters_in_strings", "{{ '{{' }}{{ '}}' }}{{ '{%' ~ '%}' }}{{ \"{#\" }}{{ {'a': {'b': 1}}['a'] }}", {}),
    ("lone_braces_in_text", "a { b } c {{ '{' }}% d %} {", {}),
    ("tag_spanning_lines", "{% if\n   x\n   and y %}both{% endif %}{{\n  x\n}}", {"x": 1, "y": 2}),
    ("comment_with_delimiters", "a{# {% if %} {{ x }} #}b{#\nmulti\nline\n#}\nc", {}),
    ("raw_with_whitespace_control", "x  {%- raw -%}  {{ y }}  {%- endraw -%}  z", {}),
    ("separator_loop", "{% for x in [1, 2, 3] %}{{ x }}{% if not loop.last %}, {% endif %}{% endfor %}", {}),
    ("literal_subscripts", "{{ 'abc'[1:] }}{{ [1, 2, 3][1] }}{{ {'k': 'v'}.k }}{{ (1, 2)[0] }}", {}),
    ("list_concat_set", "{% set x = [1, 2] + [3] %}{{ x|length }}{{ x }}", {}),
    ("slice_of_non_sequence_errors", "{{ n[1:] }}", {"n": 5}),
    ("slice_of_dict_errors", "{{ d[:1] }}", {"d": {"a": 1}}),
    ("select_map_of_false_value", "{{ 0|select|list }} {{ false|map('string')|list }}", {}),
    ("odd_even_floats", "{{ 3.0 is odd }} {{ 2.5 is odd }} {{ 4.0 is even }} {{ true is odd }}", {}),
    ("indent_of_non_string_errors", "{{ 5|indent }}", {}),
    ("list_in_dict_errors", "{{ [1] in {'a': 1} }}", {}),
    # errors jinja2 raises at parse time
    ("syntax_error_unclosed", "{% if true %}x", {}),
    ("syntax_error_bad_expr", "{{ 1 + }}", {}),
    ("unknown_filter", "{{ 'x'|nosuchfilter }}", {}),
    ("unknown_test", "{{ 'x' is nosuchtest }}", {}),
    ("unknown_tag", "{% nosuchtag %}", {}),
    ("include_needs_loader", "{% include 'other.jinja' %}", {}),
    ("call_undefined", "{{ nosuchfunction() }}", {}),
]


def verify_with_transformers(suites):
    """Renders the model-template cases with transformers itself; returns the number of differences."""
    from transformers.utils.chat_template_utils import render_jinja_template

    bad = 0
    for name, cases in suites.items():
        source = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
        for case in cases:
            ctx = dict(case["context"])
            msgs, tools, docs, agp = (ctx.pop(k) for k in ("messages", "tools", "documents", "add_generation_prompt"))
            try:
                rendered, _ = render_jinja_template(
                    [msgs], tools=tools, documents=docs, chat_template=source, add_generation_prompt=agp, **ctx
                )
                same = case.get("output") == rendered[0]
            except Exception:  # noqa: BLE001 - any error counts as "raised", as in the goldens
                same = "error" in case
            if not same:
                bad += 1
                print(f"transformers differs: {name} {case['name']}")
    return bad


# ---- random expressions: a seeded differential run over values, operators, filters, methods ----
# (Without '%' string formatting and slices of non-sequences, the documented differences.)

RANDOM_ATOMS = ["1", "0", "-3", "2.5", "0.1", "'abc'", "' a b '", "'Ünï'", "''", "'x,y,,z'", "none", "true", "false",
                "[1, 2, 3]", "['b', 'A', 'a']", "[]", "{'k': 1, 'a': [2]}", "{}", "s", "n", "l", "d", "missing",
                "(1, 'x')", "'\\n\\t q '"]
RANDOM_FILTERS = ["length", "trim", "upper", "lower", "title", "capitalize", "first", "last", "reverse|list",
                  "join('-')", "tojson", "string", "int", "float", "list", "default('D')", "sort", "unique|list",
                  "items|list", "abs", "count", "tojson(indent=1)", "replace('a', 'b')", "select|list",
                  "map('string')|list", "indent(2)", "dictsort", "sum"]
RANDOM_METHODS = ["strip()", "split()", "split(',')", "startswith('a')", "upper()", "lower()", "replace(' ', '_')",
                  "keys()|list", "items()|list", "get('k')", "lstrip(' a')", "rsplit(',', 1)", "title()"]
RANDOM_BINOPS = ["+", "-", "*", "/", "//", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
RANDOM_TESTS = ["defined", "none", "string", "number", "mapping", "sequence", "iterable", "integer", "float", "boolean",
                "odd", "true"]
RANDOM_CONTEXT = {"s": "Hello, World", "n": 7, "l": [3, 1, 2], "d": {"z": 1, "a": 2}}


def random_expression(rng, depth=0):
    r = rng.random()
    if depth > 2 or r < 0.3:
        return rng.choice(RANDOM_ATOMS)
    sub = lambda: random_expression(rng, depth + 1)  # noqa: E731
    if r < 0.5:
        return f"({sub()} {rng.choice(RANDOM_BINOPS)} {sub()})"
    if r < 0.65:
        return f"({sub()})|{rng.choice(RANDOM_FILTERS)}"
    if r < 0.77:
        return f"({sub()}).{rng.choice(RANDOM_METHODS)}"
    if r < 0.85:
        return f"({sub()} is {rng.choice(['', 'not '])}{rng.choice(RANDOM_TESTS)})"
    if r < 0.9:
        index = rng.choice(["0", "-1", "'k'", "5"])
        return f"({sub()})[{index}]"
    if r < 0.95:
        return f"(not {sub()})"
    return f"({sub()} if {sub()} else {sub()})"


def random_cases(seed=20261125, count=600):
    rng = random.Random(seed)
    return [(f"random_{i}", "{{ " + random_expression(rng) + " }}", RANDOM_CONTEXT) for i in range(count)]


RANDOM_ITERABLES = ["l", "d", "s", "[1, 2, 3]", "d.items()", "l|reverse", "missing", "[]", "range(3)"]


def random_statements(rng, depth=0):
    """Random if/for/set/macro nesting with whitespace control, around random expressions."""
    w = lambda: rng.choice(["", "-"])  # noqa: E731
    e = lambda: random_expression(rng, 3)  # noqa: E731 (an atom: the statements are what is under test)
    r = rng.random()
    if depth > 1 or r < 0.25:
        return rng.choice([f"{{{{{w()} {e()} {w()}}}}}", "\n  text ", "{{ x }}{{ ns.v }}{{ loop.index if loop is defined }}{{ item }}", "  ", "\n"])
    body = lambda: "".join(random_statements(rng, depth + 1) for _ in range(rng.randint(1, 3)))  # noqa: E731
    if r < 0.45:
        iterable = rng.choice(RANDOM_ITERABLES)
        target = "k, v" if iterable == "d.items()" else "item"
        cond = f" if {e()}" if rng.random() < 0.2 else ""
        other = f"{{%{w()} else {w()}%}}{body()}" if rng.random() < 0.3 else ""
        control = rng.choice(["", "", "{% if loop.index > 1 %}{% break %}{% endif %}", "{% continue %}"])
        return (f"{{%{w()} for {target} in {iterable}{cond} {w()}%}}\n{body()}{control}{other}"
                f"{{%{w()} endfor {w()}%}}\n")
    if r < 0.65:
        return (f"  {{%{w()} if {e()} {w()}%}}{body()}{{%{w()} elif {e()} %}}{body()}{{% else %}}{body()}"
                f"{{%{w()} endif {w()}%}}\n")
    if r < 0.85:
        return f"{{%{w()} set {rng.choice(['x', 'y', 'ns.v'])} = {e()} {w()}%}}\n"
    return f"{{% macro m{depth}(a, b='B') %}}[{{{{ a }}}}{{{{ b }}}}]{body()}{{% endmacro %}}{{{{ m{depth}({e()}) }}}}"


def random_template_cases(seed=20261126, count=100):
    rng = random.Random(seed)
    cases = []
    for i in range(count):
        body = "".join(random_statements(rng) for _ in range(3))
        t = "{% set ns = namespace(v=0) %}{% set x = 'X' %}" + body + "|{{ x }}{{ ns.v }}"
        cases.append((f"random_template_{i}", t, RANDOM_CONTEXT))
    return cases


def main():
    warnings.simplefilter("ignore", SyntaxWarning)  # jinja2 compiling constant subscripts of random expressions
    verify = "--verify-with-transformers" in sys.argv[1:]
    env = make_env()
    OUT.mkdir(parents=True, exist_ok=True)
    suites = {"mixtral": mixtral_cases(), "qwen2_moe": qwen2_cases(), "qwen3_moe": qwen3_cases()}
    rendered = {}
    for name, cases in suites.items():
        path = TEMPLATES / f"{name}.jinja"
        source = path.read_text(encoding="utf-8")
        rendered[name] = [render_case(env, case_name, source, ctx) for case_name, ctx in cases]
        doc = {
            "generator": "tools/make_chat_template_goldens.py",
            "jinja2": jinja2.__version__,
            "template": str(path.relative_to(REPO_ROOT)),
            "cases": rendered[name],
        }
        write(OUT / f"{name}.json", doc)
    cases = []
    for name, template, request in tool_request_cases():
        path = TEMPLATES / f"{template}.jinja"
        case = render_case(env, name, path.read_text(encoding="utf-8"), vllm_context(request))
        cases.append({"name": name, "template": str(path.relative_to(REPO_ROOT)), "request": request, **case})
    write(OUT / "tool_requests.json", {"generator": "tools/make_chat_template_goldens.py", "jinja2": jinja2.__version__,
                                       "cases": cases})
    doc = {
        "generator": "tools/make_chat_template_goldens.py",
        "jinja2": jinja2.__version__,
        "cases": [dict(render_case(env, n, t, c), template=t) for n, t, c in SNIPPETS],
    }
    write(OUT / "snippets.json", doc)
    doc = {
        "generator": "tools/make_chat_template_goldens.py",
        "jinja2": jinja2.__version__,
        "cases": [dict(render_case(env, n, t, c), template=t) for n, t, c in random_cases() + random_template_cases()],
    }
    write(OUT / "expressions.json", doc)
    if verify:
        bad = verify_with_transformers(rendered)
        n = sum(len(c) for c in rendered.values())
        print(f"transformers: {n} conversations rendered, {bad} differ")
        if bad:
            sys.exit(1)


def write(path, doc):
    text = json.dumps(doc, ensure_ascii=False, indent=1) + "\n"
    path.write_text(text, encoding="utf-8")
    n = len(doc["cases"])
    errors = sum(1 for c in doc["cases"] if "error" in c)
    print(f"{path.relative_to(REPO_ROOT)}: {n} cases ({errors} errors)")


if __name__ == "__main__":
    main()
