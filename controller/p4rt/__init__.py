"""P4Runtime client: one session per switch, names resolved through the P4Info, state reconciled."""
from .connection import Connection
from .device import Device, Pipeline
from .entities import CloneSession, CounterCell, MulticastGroup, TableEntry
from .errors import NotPrimaryError, P4RuntimeError, WriteError
from .schema import Schema, SchemaError
from .sync import State

__all__ = ["CloneSession", "Connection", "CounterCell", "Device", "MulticastGroup",
           "NotPrimaryError", "P4RuntimeError", "Pipeline", "Schema",
           "SchemaError", "State", "TableEntry", "WriteError"]
