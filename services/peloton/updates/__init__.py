"""Rolling updates, host drains and daemon placement: pure decision cores in `domain/`.

The services (job manager, host manager, placement) call these cores; nothing here reads
a clock, draws a random number or does I/O.
"""
