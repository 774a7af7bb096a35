"""Integrations with serving engines (vLLM). Submodules load their engine only when used: ``import hfx`` never
imports vLLM."""
