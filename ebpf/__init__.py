"""Host-side eBPF programs (tc clsact) for RoCEv2 entropy control and loss injection."""
from .impair import Impair, ImpairCounters
from .pin import Pin, PinEntry
from .program import EbpfCompileError, EbpfUnavailable, Program
from .reps import Reps, RepsState
from .spray import Spray
from .tc import TcError

PROGRAMS = {"pin": Pin, "reps": Reps, "spray": Spray, "impair": Impair}

__all__ = ["PROGRAMS", "EbpfCompileError", "EbpfUnavailable", "Impair", "ImpairCounters",
           "Pin", "PinEntry", "Program", "Reps", "RepsState", "Spray", "TcError"]
