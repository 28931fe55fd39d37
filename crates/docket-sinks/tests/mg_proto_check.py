"""Reads docket's mg_proto Kafka messages with Apache Thrift's own Python library.

Each line of stdin is `{"kind": "event" | "lifecycle", "hex": "<the message's bytes>"}`. The
bytes are decoded as machinegun-proto's `SinkEvent` / `LifecycleEvent` (the structs below follow
event_sink.thrift, lifecycle_sink.thrift, state_processing.thrift and msgpack.thrift of
valitydev/machinegun-proto: field ids and types), written again with Thrift's strict binary
protocol, and the two byte strings must be equal: what docket wrote is what a Thrift encoder
writes for the same value. Each decoded message is printed as one JSON line for the Rust test
(crates/docket-sinks/tests/sinks.rs) to compare with what it sent; binaries as {"bin": hex}.
"""

import json
import sys

from thrift.protocol import TBinaryProtocol
from thrift.protocol.TBase import TBase
from thrift.Thrift import TType
from thrift.transport import TTransport


class S(TBase):
    """A struct read and written by thrift's generic code from its `thrift_spec`."""

    def __init__(self, **kw):
        for f in self.thrift_spec[1:]:
            if f is not None:
                setattr(self, f[2], kw.get(f[2]))

    def __hash__(self):  # Value is a map key
        return hash(repr(sorted(self.__dict__.items(), key=lambda kv: kv[0])))


def struct(name, fields):
    """A struct class: fields [(id, ttype, name, type_args)]."""
    spec = [None] * (max([f[0] for f in fields], default=0) + 1)
    for fid, ttype, fname, args in fields:
        spec[fid] = (fid, ttype, fname, args, None)
    return type(name, (S,), {"thrift_spec": tuple(spec)})


Nil = struct("Nil", [])
Value = type("Value", (S,), {"thrift_spec": ()})
Value.thrift_spec = struct("V", [
    (1, TType.STRUCT, "nl", [Nil, None]),
    (2, TType.BOOL, "b", None),
    (3, TType.I64, "i", None),
    (4, TType.DOUBLE, "flt", None),
    (5, TType.STRING, "str", "UTF8"),
    (6, TType.STRING, "bin", "BINARY"),
    (7, TType.MAP, "obj", (TType.STRUCT, [Value, None], TType.STRUCT, [Value, None], False)),
    (8, TType.LIST, "arr", (TType.STRUCT, [Value, None], False)),
]).thrift_spec
MachineEvent = struct("MachineEvent", [
    (1, TType.STRING, "source_ns", "UTF8"),
    (2, TType.STRING, "source_id", "UTF8"),
    (3, TType.I64, "event_id", None),
    (4, TType.STRING, "created_at", "UTF8"),
    (5, TType.I32, "format_version", None),
    (6, TType.STRUCT, "data", [Value, None]),
])
SinkEvent = struct("SinkEvent", [(1, TType.STRUCT, "event", [MachineEvent, None])])
Working = struct("MachineStatusWorking", [])
Failed = struct("MachineStatusFailed", [(1, TType.STRING, "reason", "UTF8")])
Status = struct("MachineStatus", [
    (1, TType.STRUCT, "working", [Working, None]),
    (2, TType.STRUCT, "failed", [Failed, None]),
])
Created = struct("MachineLifecycleCreatedEvent", [])
Changed = struct("MachineLifecycleStatusChangedEvent", [
    (1, TType.STRUCT, "new_status", [Status, None]),
])
Removed = struct("MachineLifecycleRemovedEvent", [])
Machine = struct("MachineLifecycleEvent", [
    (1, TType.STRUCT, "created", [Created, None]),
    (2, TType.STRUCT, "status_changed", [Changed, None]),
    (3, TType.STRUCT, "removed", [Removed, None]),
])
Data = struct("LifecycleEventData", [(1, TType.STRUCT, "machine", [Machine, None])])
LifecycleEvent = struct("LifecycleEvent", [
    (1, TType.STRING, "machine_ns", "UTF8"),
    (2, TType.STRING, "machine_id", "UTF8"),
    (3, TType.STRING, "created_at", "UTF8"),
    (4, TType.STRUCT, "data", [Data, None]),
])


def plain(v):
    """A decoded struct as JSON: set fields only, binaries as {"bin": hex}, maps as pairs."""
    if isinstance(v, S):
        return {k: plain(x) for k, x in sorted(v.__dict__.items()) if x is not None}
    if isinstance(v, bytes):
        return {"hex": v.hex()}
    if isinstance(v, dict):
        return [[plain(k), plain(x)] for k, x in v.items()]
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def main():
    for line in sys.stdin:
        msg = json.loads(line)
        raw = bytes.fromhex(msg["hex"])
        cls = SinkEvent if msg["kind"] == "event" else LifecycleEvent
        obj = cls()
        obj.read(TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(raw)))
        out = TTransport.TMemoryBuffer()
        obj.write(TBinaryProtocol.TBinaryProtocol(out, strictRead=True, strictWrite=True))
        if out.getvalue() != raw:
            sys.exit(f"re-encoded differently:\n{raw.hex()}\n{out.getvalue().hex()}")
        print(json.dumps(plain(obj)), flush=True)


if __name__ == "__main__":
    main()
