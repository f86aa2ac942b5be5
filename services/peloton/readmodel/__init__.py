"""The read model: events projected into ClickHouse tables that the HTTP API queries."""

from peloton.readmodel.projector import Row, SourcePos, project
from peloton.readmodel.store import Store

__all__ = ["Row", "SourcePos", "Store", "project"]
