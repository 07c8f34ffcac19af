"""Evidence sources: each collects one kind of evidence about a target, within a deadline."""
