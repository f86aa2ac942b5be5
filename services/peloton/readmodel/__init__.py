"""The read model: events projected into ClickHouse tables that the HTTP API queries.

`projector` is pure (events -> rows); `store` holds the ClickHouse side (import it from
`peloton.readmodel.store`, so pure callers do not load the ClickHouse client).
"""

from peloton.readmodel.projector import Row, SourcePos, project

__all__ = ["Row", "SourcePos", "project"]
