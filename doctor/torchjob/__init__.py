"""The job's PyTorch: how it reads its variables, what each backend does alone, torch as a need."""
