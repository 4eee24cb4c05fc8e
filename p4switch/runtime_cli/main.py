"""`simple_switch_CLI` (also `p4switch cli`): connect to a switch's Thrift runtime server,
learn the program's names from the switch (or --json), then read commands from the terminal
or from standard input (`simple_switch_CLI --thrift-port 9090 < commands.txt`)."""
from __future__ import annotations

import argparse
import hashlib
import sys

from thrift.protocol import TBinaryProtocol, TMultiplexedProtocol
from thrift.transport import TSocket, TTransport

from ..thrift.idl import Client
from ..thrift.simple_pre import SIMPLE_PRE, SIMPLE_PRE_LAG
from ..thrift.simple_switch import SIMPLE_SWITCH
from ..thrift.standard import STANDARD
from .commands import RuntimeCLI
from .program import ProgramError, load

PRE_TYPES = ("None", "SimplePre", "SimplePreLAG")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="simple_switch_CLI",
                                description="Runtime CLI of a p4switch (or BMv2) switch, "
                                "over its Thrift server")
    p.add_argument("--thrift-port", type=int, default=9090,
                   help="Thrift server port for table updates")
    p.add_argument("--thrift-ip", default="localhost", help="Thrift IP address")
    p.add_argument("--json", help="JSON description of the P4 program (default: the "
                   "switch's own)")
    p.add_argument("--pre", choices=PRE_TYPES, default="SimplePreLAG",
                   help="Packet Replication Engine used by the target")
    return p


def connect(host: str, port: int, pre: str):
    """-> (standard, PRE or None, simple_switch) clients on one connection; exits 1 saying
    so when nothing listens there."""
    transport = TTransport.TBufferedTransport(TSocket.TSocket(host, port))
    protocol = TBinaryProtocol.TBinaryProtocol(transport)

    def client(methods, name):
        return Client(methods, TMultiplexedProtocol.TMultiplexedProtocol(protocol, name))
    try:
        transport.open()
    except TTransport.TTransportException:
        print(f"Could not connect to thrift client on port {port}")
        print("Make sure the switch is running and that you have the right port")
        sys.exit(1)
    mc = {"SimplePre": lambda: client(SIMPLE_PRE, "simple_pre"),
          "SimplePreLAG": lambda: client(SIMPLE_PRE_LAG, "simple_pre_lag")}.get(pre)
    return client(STANDARD, "standard"), mc() if mc else None, \
        client(SIMPLE_SWITCH, "simple_switch")


def program_text(standard, json_path: str | None) -> str:
    if json_path:
        with open(json_path, "rb") as f:
            data = f.read()
        if hashlib.md5(data).digest() != standard.bm_get_config_md5():
            print("**********")
            print("WARNING: the JSON files loaded into the switch and the one you just "
                  "provided to this CLI don't have the same md5 sum. Are you sure they "
                  "describe the same program?")
            print("**********")
        return data.decode()
    print("Obtaining JSON from switch...")
    text = standard.bm_get_config()
    print("Done")
    return text


def main(argv=None) -> None:
    args = parser().parse_args(argv)
    standard, mc, sswitch = connect(args.thrift_ip, args.thrift_port, args.pre)
    try:
        program = load(program_text(standard, args.json) or "{}")
    except (ProgramError, OSError) as exc:
        print(f"simple_switch_CLI: {exc}", file=sys.stderr)
        sys.exit(1)
    RuntimeCLI(program, standard, mc, sswitch, lag=args.pre == "SimplePreLAG").cmdloop()


if __name__ == "__main__":
    main()
