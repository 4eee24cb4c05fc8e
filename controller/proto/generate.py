"""Regenerate fabric_pb2.py and fabric_pb2_grpc.py from fabric.proto.

The generated files are committed: the runtime is protobuf 3.20 (pinned by p4runtime-shell),
and the code generator must come from a grpcio-tools release whose protoc is 3.20/3.21 (e.g.
1.51.x; newer ones emit code that demands protobuf >= 4). Run from the repository root with
such a grpcio-tools importable, e.g.

    pip install --target /tmp/gt --no-deps grpcio-tools==1.51.3
    PYTHONPATH=/tmp/gt .venv/bin/python controller/proto/generate.py
"""
import sys
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parents[2]

if __name__ == "__main__":
    rc = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={ROOT}", f"--grpc_python_out={ROOT}",
                      "controller/proto/fabric.proto"])
    sys.exit(rc)
