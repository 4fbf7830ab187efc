#!/usr/bin/env python3
"""Writes chat_template_cases.json: chat templates rendered by the real jinja2 as HF transformers
renders them (ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) + loopcontrols,
raise_exception, strftime_now, HF's tojson). A dev-time oracle: chat_template_test.cc checks the
C++ engine against the JSON byte for byte, without Python.

    python3 tests/tokenizer/make_chat_template_cases.py   # jinja2 3.1.x

Contexts have their dict keys sorted, as the engine sees them (nlohmann::json keeps no order)."""
import json
import os

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


class AssistantTracker(jinja2.ext.Extension):
    """HF's {% generation %} ... {% endgeneration %}: renders its body as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render", []), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def sort_keys(x):
    if isinstance(x, dict):
        return {k: sort_keys(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [sort_keys(v) for v in x]
    return x


SYS = {"role": "system", "content": "You are a helpful assistant."}
U1 = {"role": "user", "content": "Hello!"}
A1 = {"role": "assistant", "content": "Hi there. How can I help?"}
U2 = {"role": "user", "content": "  What is 2+2?\n"}
A2 = {"role": "assistant", "content": "4"}
UNI = {"role": "user", "content": "héllo wörld — 日本語 😀 \"quoted\" \\ back"}

CONVERSATIONS = {
    "single": {"messages": [U1], "add_generation_prompt": True},
    "system_multi": {"messages": [SYS, U1, A1, U2], "add_generation_prompt": True},
    "multi_no_prompt": {"messages": [U1, A1, U2, A2], "add_generation_prompt": False},
    "unicode": {"messages": [SYS, UNI], "add_generation_prompt": True},
}
TOKENS = {"bos_token": "<s>", "eos_token": "</s>"}

FAMILIES = {
    "chatml": (
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
    ),
    "zephyr": (
        "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n"
        "{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n"
        "{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
        "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}"
    ),
    "llama2": (
        "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}"
        "{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
        "{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
        "{% else %}{% set content = message['content'] %}{% endif %}"
        "{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
    ),
    "mistral_v01": (
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
        "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
        "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
    ),
    "mistral_v03": (
        "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n"
        "    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n"
        "{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n"
        "{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n"
        "{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n"
        "        {%- if tools is not none and (message == user_messages[-1]) %}\n"
        "            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools %}\n"
        "                {{- tool | tojson }}\n                {%- if not loop.last %}{{- \", \" }}{%- endif %}\n"
        "            {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n        {%- endif %}\n"
        "        {%- if loop.last and system_message is defined %}\n"
        "            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n"
        "        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n"
        "    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n"
        "    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}\n"
        "    {%- endif %}\n{%- endfor %}\n"
    ),
    "gemma": (
        "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
        "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
        "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
        "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}"
        "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
    ),
    "phi3": (
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|system|>' + '\n' + message['content'] + '<|end|>' + '\n'}}"
        "{% elif (message['role'] == 'user') %}{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}"
        "{% elif message['role'] == 'assistant' %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}"
    ),
    "llama3": (
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}"
        "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
    ),
    "llama31_tools": (
        "{{- bos_token }}\n{%- if custom_tools is defined %}\n    {%- set tools = custom_tools %}\n{%- endif %}\n"
        "{%- if not tools_in_user_message is defined %}\n    {%- set tools_in_user_message = true %}\n{%- endif %}\n"
        "{%- if not date_string is defined %}\n    {%- set date_string = \"26 Jul 2024\" %}\n{%- endif %}\n"
        "{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n\n"
        "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content']|trim %}\n"
        "    {%- set messages = messages[1:] %}\n{%- else %}\n    {%- set system_message = \"\" %}\n{%- endif %}\n\n"
        "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n{%- if tools is not none %}\n    {{- \"Environment: ipython\\n\" }}\n{%- endif %}\n"
        "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n{{- \"Today Date: \" + date_string + \"\\n\\n\" }}\n"
        "{%- if tools is not none and not tools_in_user_message %}\n    {{- \"You have access to the following functions.\\n\\n\" }}\n"
        "    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n{%- endif %}\n"
        "{{- system_message }}\n{{- \"<|eot_id|>\" }}\n\n"
        "{%- if tools_in_user_message and not tools is none %}\n"
        "    {%- if messages | length != 0 %}\n        {%- set first_user_message = messages[0]['content']|trim %}\n"
        "        {%- set messages = messages[1:] %}\n    {%- else %}\n"
        "        {{- raise_exception(\"Cannot put tools in the first user message when there's no first user message!\") }}\n{%- endif %}\n"
        "    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}\n"
        "    {{- \"Given the following functions, please respond with a JSON for a function call \" }}\n"
        "    {{- \"with its proper arguments that best answers the given prompt.\\n\\n\" }}\n"
        "    {%- for t in tools %}\n        {{- t | tojson(indent=4) }}\n        {{- \"\\n\\n\" }}\n    {%- endfor %}\n"
        "    {{- first_user_message + \"<|eot_id|>\"}}\n{%- endif %}\n\n"
        "{%- for message in messages %}\n    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}\n"
        "        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}\n"
        "    {%- elif 'tool_calls' in message %}\n        {%- if not message.tool_calls|length == 1 %}\n"
        "            {{- raise_exception(\"This model only supports single tool-calls at once!\") }}\n        {%- endif %}\n"
        "        {%- set tool_call = message.tool_calls[0].function %}\n"
        "        {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}\n"
        "        {{- '{\"name\": \"' + tool_call.name + '\", ' }}\n        {{- '\"parameters\": ' }}\n"
        "        {{- tool_call.arguments | tojson }}\n        {{- \"}\" }}\n        {{- \"<|eot_id|>\" }}\n"
        "    {%- elif message.role == \"tool\" or message.role == \"ipython\" %}\n"
        "        {{- \"<|start_header_id|>ipython<|end_header_id|>\\n\\n\" }}\n"
        "        {%- if message.content is mapping or message.content is iterable %}\n            {{- message.content | tojson }}\n"
        "        {%- else %}\n            {{- message.content }}\n        {%- endif %}\n        {{- \"<|eot_id|>\" }}\n    {%- endif %}\n{%- endfor %}\n"
        "{%- if add_generation_prompt %}\n    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}\n{%- endif %}\n"
    ),
    "falcon": (
        "{% for message in messages %}{% if not loop.first %}{{ '\n' }}{% endif %}"
        "{% if message['role'] == 'system' %}{{ 'System: ' }}{% elif message['role'] == 'user' %}{{ 'User: ' }}"
        "{% elif message['role'] == 'assistant' %}{{ 'Falcon: ' }}{% endif %}{{ message['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '\n' + 'Falcon:' }}{% endif %}"
    ),
    "deepseek": (
        "{% if not add_generation_prompt is defined %}{% set add_generation_prompt = false %}{% endif %}"
        "{% set ns = namespace(is_first=false, is_tool=false, is_output_first=true, system_prompt='') %}"
        "{%- for message in messages %}{%- if message['role'] == 'system' %}{% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}"
        "{{bos_token}}{{ns.system_prompt}}"
        "{%- for message in messages %}{%- if message['role'] == 'user' %}{%- set ns.is_tool = false -%}{{'<｜User｜>' + message['content']}}{%- endif %}"
        "{%- if message['role'] == 'assistant' and message['content'] is not none %}"
        "{% set content = message['content'] %}{% if '</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}"
        "{{'<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>'}}{%- endif %}{%- endfor -%}"
        "{% if add_generation_prompt %}{{'<｜Assistant｜><think>\\n'}}{% endif %}"
    ),
}

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"], "type": "string"}},
                         "required": ["city"]}}}]
EXTRA_CONTEXTS = {
    "llama31_tools": [
        ("tools", {"messages": [SYS, U1], "tools": TOOLS, "add_generation_prompt": True}),
        ("tool_call", {"messages": [U1, {"role": "assistant", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                                    {"role": "tool", "content": "22 C"}], "tools": TOOLS, "add_generation_prompt": True}),
    ],
    "mistral_v03": [("tools", {"messages": [U1, A1, U2], "tools": TOOLS})],
    "deepseek": [("think", {"messages": [U1, {"role": "assistant", "content": "<think>hmm</think>Answer"}, U2], "add_generation_prompt": True})],
    "llama2": [("alternation_error", {"messages": [U1, U2]})],
    "gemma": [("system_error", {"messages": [SYS, U1]})],
}

# (name, template, context)
FEATURES = [
    ("ws_dash", "a  {{- 'b' -}}  c\n  {%- if true -%}  d  {%- endif -%}  e", {}),
    ("ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("ws_lstrip_blocks", "x\n    {% if true %}\n    in\n    {% endif %}\ny", {}),
    ("ws_lstrip_not_var", "x\n    {{ 'v' }}\n  {# c #}\nz", {}),
    ("ws_plus", "x\n    {%+ if true %}a{% endif +%}\nb", {}),
    ("ws_dash_lstrip", "x  \n  {%- if true %}\n  y\n  {%- endif %}\n", {}),
    ("ws_var_dash_newlines", "a\n\n  {{- 'b' }}\n\n{{ 'c' -}}\n\n d", {}),
    ("ws_comment_lstrip", "a\n   {# c #}\nb\n  {#- c -#}  \nc", {}),
    ("ws_tabs", "\t\t{% for i in [1,2] %}\n\t{{ i }}\n\t\t{% endfor %}\nend", {}),
    ("ws_text_then_tag", "abc  {% if true %}z{% endif %}", {}),
    ("ws_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", {}),
    ("ws_trailing_newline", "line\n", {}),
    ("comment", "a{# comment #}b\n{# line comment #}\nc{#- x -#}  d", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}|{%- raw -%}  x  {%- endraw %}", {}),
    ("loop_vars", "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", {}),
    ("loop_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}|{% for x in xs if x > 1 %}{{ x }}{{ loop.index }}{% endfor %}", {"xs": [1, 2, 3]}),
    ("loop_dict_items", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", {"d": {"a": 1, "b": [1, 2]}}),
    ("loop_scope", "{% set x = 1 %}{% for i in range(3) %}{{ x }}{% set x = x + 1 %}{{ x }},{% endfor %}{{ x }}", {}),
    ("loop_break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i > 4 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_nested", "{% for a in [1,2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% endfor %}{{ ns.n }} {{ ns.s }}", {}),
    ("set_tuple", "{% set a, b = 1, 'two' %}{{ a }}{{ b }}{% set t = (1, 2) %}{{ t }}", {}),
    ("set_block", "{% set body %}hello {{ name }}{% endset %}[{{ body | upper }}]", {"name": "x"}),
    ("macro", "{% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('a') }} {{ greet('b', 'Yo') }} {{ greet(greeting='Hey', name='c') }}", {}),
    ("macro_recursion", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", {}),
    ("macro_sees_globals", "{% set g = 'G' %}{% macro m() %}{{ g }}{{ bos_token }}{{ x }}{% endmacro %}{% set x = 'later' %}{{ m() }}", {"bos_token": "<s>"}),
    ("string_escapes", "{{ 'a\\nb\\tc\\\\d\\'e\"f' }}|{{ \"q\\\"q\" }}|{{ '\\u00e9\\u4e2d' }}|{{ 'x' 'y' }}", {}),
    ("unicode", "{{ s|length }} {{ s[0] }} {{ s[-1] }} {{ s[1:3] }} {{ s|upper }} {{ s|reverse }}", {"s": "héllo😀"}),
    ("numbers", "{{ 1 }} {{ 1.0 }} {{ 0.5 }} {{ 1e-5 }} {{ 1.5e16 }} {{ 3/2 }} {{ 4/2 }} {{ 7//2 }} {{ -7//2 }} {{ 7%3 }} {{ -7%3 }} {{ 2**10 }} {{ 2**-1 }} {{ 0.1+0.2 }} {{ 1_000 }} {{ -3|abs }} {{ 100000000000000000.0 }} {{ 123456.789 }}", {}),
    ("number_ops_mixed", "{{ 1 + 2.0 }} {{ true + 1 }} {{ 10 - 2.5 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 2.5|round }} {{ 3.14159|round(2) }} {{ 2.5|round(0, 'floor') }} {{ 42|round }}", {}),
    ("literals", "{{ [1, 'a', none, true, 1.5] }} {{ {'k': 'v', 'n': [1, 2]} }} {{ (1,) }} {{ () }} {{ True }} {{ none }} {{ \"it's\" }}", {}),
    ("comparisons", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'a' != 'b' }} {{ 2 >= 2 }} {{ [1,2] == [1,2] }} {{ 'b' in 'abc' }} {{ 1 not in [1,2] }} {{ 'k' in {'k': 1} }}", {}),
    ("logic", "{{ true and 'x' }} {{ 0 or 'y' }} {{ not 0 }} {{ none or [] }} {{ 'a' if false else 'b' }} [{{ 'a' if false }}] {{ 1 if 2 > 1 else 3 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 'a' ~ (1 + 2) }} {{ 1 ~ 2 + 3 ~ 'b' if false else 'c' }} {{ not true == false }} {{ -3|abs }} {{ 10 - 2 - 3 }}", {}),
    ("tests", "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ 1 is number }} {{ 1.5 is integer }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is sequence }} {{ true is boolean }} {{ false is false }} {{ 4 is even }} {{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 'a' is equalto 'a' }} {{ 1 is eq 2 }} {{ x is not none }} {{ 1 is true }}", {"x": 1}),
    ("filters_string", "{{ '  a b  '|trim }}|{{ 'xxaxx'|trim('x') }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'a-b c'|title }}|{{ 'abc'|replace('b', 'X') }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'ab'|upper }}{{ 'AB'|lower }}", {}),
    ("filters_seq", "{{ [3,1,2]|sort }} {{ [3,1,2]|sort(reverse=true) }} {{ ['b','A','c']|sort }} {{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ [1,2,3]|length }} {{ 'abc'|list }} {{ [1,1,2,'a','A']|unique|list }} {{ [1,2,3]|reverse|list }} {{ [1,2,3]|join(', ') }} {{ [4,2,8]|max }} {{ [4,2,8]|min }} {{ [1,2,3]|sum }} {{ xs|count }}", {"xs": [1, 2]}),
    ("filters_map_select", "{{ msgs|map(attribute='role')|list }} {{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('|') }} {{ msgs|rejectattr('role', 'eq', 'user')|list|length }} {{ [1,2,3,4]|select('even')|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ ['a','b']|map('upper')|list }} {{ msgs|selectattr('content')|list|length }} {{ msgs|sort(attribute='content')|map(attribute='content')|first }}", {"msgs": [U1, A1, U2]}),
    ("filters_default", "{{ missing|default('d') }} {{ ''|default('e') }} {{ ''|default('e', true) }} {{ none|d('n') }} {{ x|default('no') }}", {"x": 0}),
    ("filters_convert", "{{ '42'|int + 1 }} {{ '3.7'|int }} {{ 'abc'|int }} {{ 'abc'|int(5) }} {{ '2.5'|float }} {{ 3|float }} {{ 1|string ~ 2 }} {{ 12|string|length }} {{ 3.0|int }}", {}),
    ("filters_dict", "{{ d|items|list }} {{ d|dictsort }} {{ d|length }} {% for k, v in d|dictsort(reverse=true) %}{{ k }}{{ v }}{% endfor %}", {"d": {"b": 2, "a": 1}}),
    ("filters_misc", "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'x y  z'|wordcount }}|{{ '<a href=\"x\">&</a>'|e }}|{{ 'safe'|safe }}", {}),
    ("tojson", "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ [1, 'é', none, true, 1.5]|tojson }}|{{ 'a\"b\\n'|tojson }}|{{ {}|tojson }}|{{ []|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ {'z': 1, 'a': 2}|tojson(sort_keys=true) }}", {"d": {"a": [1, {"b": None}], "c": "日本"}}),
    ("methods_str", "{{ '  x  '.strip() }}|{{ 'xxyxx'.strip('x') }}|{{ '  x'.lstrip() }}|{{ 'x  '.rstrip() }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'hello world'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'abc'.replace('b', '') }}|{{ 'abcb'.find('b') }}{{ 'abc'.find('z') }}|{{ 'abab'.count('ab') }}|{{ '-'.join(['a', 'b']) }}|{{ 'AbC'.upper() }}{{ 'AbC'.lower() }}", {}),
    ("methods_dict", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.a }} {{ d['a'] }}", {"d": {"a": 1, "b": 2}}),
    ("subscripts", "{{ xs[0] }} {{ xs[-1] }} {{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[5] }}| {{ 'hello'[1:4] }} {{ 'hello'[::-1] }} {{ xs.0 }} {{ m['k'] }} {{ m.k }} {{ m.nope }}|", {"xs": [1, 2, 3, 4], "m": {"k": "v"}}),
    ("undefined", "[{{ nope }}] {{ nope is defined }} {{ nope|length }} {{ nope ~ 'x' }} {% if nope %}t{% else %}f{% endif %} {% for x in nope %}{{ x }}{% endfor %} {{ not nope }} {{ nope == nope }} {{ d.missing is defined }} {{ d.missing|default('m') }}", {"d": {}}),
    ("none_print", "{{ none }} {{ n }} {{ [none] }} {{ n is none }}", {"n": None}),
    ("bool_print", "{{ true }} {{ false }} {{ t }} {{ [true, false] }}", {"t": True}),
    ("int_print_big", "{{ 9007199254740993 }} {{ n }} {{ -0.0 }} {{ 1e100 }} {{ 2.0**0.5 }}", {"n": 123456789012}),
    ("generation_tag", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}", {"messages": [U1, A1]}),
    ("dict_literal_order", "{% set d = {'z': 1, 'a': 2, 'm': 3} %}{{ d }} {{ d|tojson }} {% for k in d %}{{ k }}{% endfor %}", {}),
    ("dict_global", "{% set d = dict(a=1, b='x') %}{{ d.a }}{{ d.b }}", {}),
    ("range", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(10, 0, -3)|list }} {{ range(0)|list }}", {}),
    ("concat_types", "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 }} {{ [1] + [2] }} {{ 'a' + 'b' }}", {}),
    ("raise", "{% if x %}{{ raise_exception('Bad thing: ' ~ x) }}{% endif %}ok", {"x": "boom"}),
    ("err_syntax", "line1\n{% if %}\n{% endif %}", {}),
    ("err_unclosed", "a\n{% for x in xs %}\nb", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_undefined_attr", "{{ nope.attr }}", {}),
    ("err_undefined_add", "{{ nope + 'a' }}", {}),
    ("err_type_compare", "{{ 'a' < 1 }}", {}),
    ("err_list_append", "{% set xs = [] %}{{ xs.append(1) }}", {}),
    ("err_unknown_filter", "{% if x %}{{ x|nofilter }}{% endif %}", {"x": 1}),
    ("err_div_zero", "{{ 1 // 0 }}", {}),
    ("err_range_too_big", "{% for i in range(10**9) %}{{ i }}{% endfor %}", {}),
    ("err_call_undefined", "{{ nofunc() }}", {}),
    ("err_str_plus_int", "{{ 'a' + 1 }}", {}),
]

# Expected error texts where jinja2's differ (this engine's are checked instead).
ERROR_CONTAINS = {
    "err_syntax": "line 2",
    "err_unclosed": "unexpected end of template",
    "err_unknown_tag": "unknown tag 'frobnicate'",
    "err_undefined_attr": "'nope' is undefined",
    "err_undefined_add": "'nope' is undefined",
    "err_type_compare": "'<' not supported between instances of 'str' and 'int'",
    "err_list_append": "access to attribute 'append' of 'list' object is unsafe.",
    "err_unknown_filter": "No filter named 'nofilter'",
    "err_div_zero": "division or modulo by zero",
    "err_range_too_big": "Range too big",
    "err_call_undefined": "'nofunc' is undefined",
    "err_str_plus_int": "can only concatenate str",
}


def render(env, template, context):
    try:
        return {"expected": env.from_string(template).render(**context)}
    except jinja2.exceptions.TemplateSyntaxError as e:
        return {"error": f"syntax: line {e.lineno}: {e.message}"}
    except Exception as e:  # noqa: BLE001 - the oracle records every failure
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    env = make_env()
    cases = []
    for fam, template in FAMILIES.items():
        ctxs = [(n, c) for n, c in CONVERSATIONS.items()] + EXTRA_CONTEXTS.get(fam, [])
        for cname, ctx in ctxs:
            ctx = sort_keys({**TOKENS, **ctx})
            cases.append((f"{fam}/{cname}", template, ctx))
    for name, template, ctx in FEATURES:
        cases.append((f"feature/{name}", template, sort_keys(ctx)))
    out = []
    for name, template, ctx in cases:
        r = render(env, template, ctx)
        case = {"name": name, "template": template, "context": ctx}
        short = name.split("/", 1)[1]
        if "expected" in r:
            case["expected"] = r["expected"]
        else:
            # raise_exception texts are exact; others: a stable part of the message
            msg = r["error"]
            if msg.startswith("TemplateError: "):
                case["error_exact"] = msg[len("TemplateError: "):]
            else:
                case["error_contains"] = ERROR_CONTAINS.get(short, msg)
            case["jinja2_error"] = msg
        out.append(case)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "chat_template_cases.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(out)} cases -> {path}")


if __name__ == "__main__":
    main()
