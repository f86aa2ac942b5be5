"""Placement plugins, one per module; registry.py lists which run where."""
