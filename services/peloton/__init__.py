"""Peloton-py: a unified resource scheduler over an event backbone."""
