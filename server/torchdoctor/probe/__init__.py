"""Probe a model in a separate torch process and bring back a measured report."""
