"""Prompts of the search agent, the budget-forcing turn and the verifier agent.

Their *structure* follows the authors' code (hkust-nlp/deepsearch-tts, ``scripts/deep_search.py``), reworded and
shortened for small local models:

* solver: a search assistant told its tool budget ("at most N tool calls") that ends with a final answer;
* budget forcing: a user turn granting N more tool calls and encouraging other search paths;
* verifier: its only task is to check a predicted answer, not to answer; it lists the conditions the question
  imposes, checks each against the documents, and reports score = satisfied conditions / all conditions in [0, 1].

smolagents' ``ToolCallingAgent`` prompt templates are used for everything else (its default YAML), so any smolagents
model class works with them; only ``system_prompt`` is replaced.
"""

from __future__ import annotations

import importlib.resources

import yaml


SOLVER_SYSTEM_PROMPT = """You are a search assistant. You answer the user's question by searching a document collection.
Write exactly one action per turn as JSON, then stop and wait for the observation.
Tools:
{%- for tool in tools.values() %}
- {{ tool.name }}: {{ tool.description }}
{%- endfor %}
Example:
Question: What is the capital of the country where the river Ostra rises?
Action: {"name": "search", "arguments": {"query": "river Ostra rises"}}
Observation: [1] Ostra: The Ostra is a river that rises in the mountains of Velmar.
Action: {"name": "search", "arguments": {"query": "Velmar capital"}}
Observation: [1] Velmar: Velmar is a small country. Its capital is Dunholt.
Action: {"name": "final_answer", "arguments": {"answer": "Dunholt"}}
{%- if custom_instructions %}
{{ custom_instructions }}
{%- endif %}"""

VERIFIER_SYSTEM_PROMPT = """You are a fact-checking assistant with a document collection. Your only task is to verify a \
predicted answer to a question, not to answer the question yourself.
1. List the conditions that the question requires of a correct answer.
2. Check each condition for the predicted answer with the tools.
3. Score = (conditions confirmed by the documents) / (all conditions), a number between 0 and 1 (0 if there is no \
clear predicted answer).
Write exactly one action per turn as JSON, then stop and wait for the observation.
Tools:
{%- for tool in tools.values() %}
- {{ tool.name }}: {{ tool.description }}
{%- endfor %}
Example:
Question: What is the capital of the country where the river Ostra rises? Predicted answer: Dunholt
Action: {"name": "search", "arguments": {"query": "Dunholt capital Velmar Ostra"}}
Observation: [1] Velmar: Velmar is a small country. Its capital is Dunholt. The river Ostra rises in Velmar.
Action: {"name": "final_answer", "arguments": {"answer": "1.0"}}
{%- if custom_instructions %}
{{ custom_instructions }}
{%- endif %}"""

TEXT_ACTION_SOLVER_PROMPT = """Answer the question from the search results. One action per turn:
search: <keywords>
browse: <page title>
answer: <the answer>
{%- if custom_instructions %}
{{ custom_instructions }}
{%- endif %}"""
"""For small local models (``BatchedTransformersModel(text_actions=True)``): plain-text actions, no worked example
(a 135M model copies the example's answer)."""

TEXT_ACTION_VERIFIER_PROMPT = """Check a predicted answer against the search results; do not answer the question yourself. One action per turn:
search: <keywords>
answer: <score>, 1 if the search results confirm the predicted answer, 0 if they do not.
{%- if custom_instructions %}
{{ custom_instructions }}
{%- endif %}"""

SOLVER_INSTRUCTIONS = "At most {budget} tool calls, then answer."
VERIFIER_INSTRUCTIONS = "At most {budget} tool calls, then give the score."
VERIFIER_TASK = "Question: {question}\nPredicted answer: {answer}"
BUDGET_FORCING_PROMPT = (
    "Do not stop yet. You may use the tools up to {extra} more times to check or improve your answer; trying "
    "other searches or another solution path is encouraged. Then give your final answer again."
)


def prompt_templates(system_prompt: str) -> dict:
    """smolagents' ``ToolCallingAgent`` templates with ``system_prompt`` replaced."""
    text = importlib.resources.files("smolagents.prompts").joinpath("toolcalling_agent.yaml").read_text()
    templates = yaml.safe_load(text)
    templates["system_prompt"] = system_prompt
    return templates
