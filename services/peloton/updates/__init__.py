"""Rolling updates, host drains and daemon placement: pure decision cores in `domain/`.

Groundwork for issue 9: no service calls these cores yet (the job manager, host manager
and placement will). Nothing here reads a clock, draws a random number or does I/O.
"""
