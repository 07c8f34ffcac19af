"""The launch prologue: env policy, preflight gate, registry, agent, then the entrypoint."""
