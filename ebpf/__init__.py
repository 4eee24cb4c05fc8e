"""Host-side eBPF programs (tc clsact) for RoCEv2 entropy control and loss injection."""
from .flowsplit import Flowsplit, Split, SubflowCounters
from .impair import Impair, ImpairCounters
from .program import EbpfCompileError, EbpfUnavailable, Program
from .reps import Reps, RepsState
from .spray import Spray
from .tc import TcError

PROGRAMS = {"flowsplit": Flowsplit, "reps": Reps, "spray": Spray, "impair": Impair}

__all__ = ["PROGRAMS", "EbpfCompileError", "EbpfUnavailable", "Flowsplit", "Impair",
           "ImpairCounters", "Program", "Reps", "RepsState", "Spray", "Split",
           "SubflowCounters", "TcError"]
