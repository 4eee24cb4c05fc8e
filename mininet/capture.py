"""One pcap per switch port, as p4-utils writes them: a tcpdump on each of the switches'
interfaces (both directions in one file, `DIR/<interface>.pcap`). It works the same for
p4switch and BMv2, whichever backend forwards, because it captures at the veth. Wireshark
and tshark decode the RoCEv2 in them (UDP 4791)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

READY_S = 10.0


class PortCaptures:
    """`with PortCaptures(interfaces, directory):` captures while the block runs."""

    def __init__(self, interfaces: list[str], directory: Path, netns: str | None = None):
        self.interfaces, self.directory, self.netns = interfaces, Path(directory), netns
        self.procs: list[tuple[subprocess.Popen, Path]] = []

    def __enter__(self) -> PortCaptures:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> PortCaptures:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            for intf in self.interfaces:
                self.procs.append(self._start(intf))
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, intf: str) -> tuple[subprocess.Popen, Path]:
        # -U: each packet reaches the file when captured, so a file is whole at any moment
        cmd = ["tcpdump", "-i", intf, "-w", str(self.directory / f"{intf}.pcap"), "-U", "-n",
               "-s", "0", "--immediate-mode"]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        log = self.directory / f".{intf}.tcpdump.log"
        with open(log, "w") as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        return proc, log

    def _wait_ready(self) -> None:
        """Until every tcpdump says it is listening (packets before that would be missed)."""
        deadline = time.monotonic() + READY_S
        for proc, log in self.procs:
            while "listening on" not in log.read_text():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"tcpdump did not start: {log.read_text().strip()}")
                time.sleep(0.05)

    def stop(self) -> None:
        for proc, _ in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc, log in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.unlink(missing_ok=True)
        self.procs.clear()


def switch_interfaces(net) -> list[str]:
    """Every switch port of a Mininet network (the veth ends in the root namespace)."""
    return sorted(intf.name for sw in net.switches for intf in sw.intfList()
                  if intf.name != "lo")
