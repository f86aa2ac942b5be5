"""Pure cores for issue 9's operations.

- `states`: the update state machine as data (pause/resume/abort/rollback).
- `rolling`: the rolling-update planner (Peloton's UpdateSpec plus maxUnavailable, canary).
- `drain`: which runs to move off a host in maintenance, within every job's SLA.
- `daemons`: which hosts need a daemon instance and which instances must go.
"""
