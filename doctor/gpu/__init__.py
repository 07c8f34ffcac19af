"""GPU state through NVML, its codes, and a fake NVML that answers from fleets in data."""
