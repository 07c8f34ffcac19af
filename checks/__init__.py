"""Preflight checks: pure functions over ``Facts`` that return findings."""
