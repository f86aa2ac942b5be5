"""The host agent's pure bookkeeping (no asyncio, no clock: time is passed in)."""
