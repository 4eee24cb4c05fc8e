"""BMv2's Thrift runtime API (services, structs, server) over p4switch's P4Runtime state."""
