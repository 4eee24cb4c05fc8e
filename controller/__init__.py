"""Control plane for the ML-training fabric: topology model, path and slice algorithms."""
