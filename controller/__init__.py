"""Control plane for the ML-training fabric: planners, intent, P4Runtime client, fabricd."""
