"""How a command line becomes a call: each command declares its arguments once, as a row of
argument kinds (`@command(TABLE, integer("entry handle"))`), and one wrapper splits the
line, checks the count in BMv2's words, converts each argument in order and prints a bad
input or a refused operation as BMv2's CLI prints it; the CLI then goes on."""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from ..thrift import simple_pre, simple_switch, standard
from ..thrift.idl import ThriftError
from .values import DataError, InputError, KeyError_

# exception class -> (its error-code enum, the words BMv2's CLI prints before the code)
_ERRORS = [
    (standard.InvalidTableOperation, standard.TableOperationErrorCode, "table"),
    (standard.InvalidCounterOperation, standard.CounterOperationErrorCode, "counter"),
    (standard.InvalidMeterOperation, standard.MeterOperationErrorCode, "meter"),
    (standard.InvalidRegisterOperation, standard.RegisterOperationErrorCode, "register"),
    (standard.InvalidLearnOperation, standard.LearnOperationErrorCode, "learn"),
    (standard.InvalidSwapOperation, standard.SwapOperationErrorCode, "swap"),
    (standard.InvalidDevMgrOperation, standard.DevMgrErrorCode, "device manager"),
    (standard.InvalidCrcOperation, standard.CrcErrorCode, "crc"),
    (standard.InvalidToeplitzHashOperation, standard.ToeplitzHashErrorCode, "Toeplitz hash"),
    (standard.InvalidParseVSetOperation, standard.ParseVSetOperationErrorCode,
     "parser value set"),
    (simple_pre.InvalidMcOperation, simple_pre.McOperationErrorCode, "PRE"),
    (simple_switch.InvalidMirroringOperation, simple_switch.MirroringOperationErrorCode,
     "mirroring"),
]


def to_int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"Bad format for {what}") from None


@dataclass(frozen=True)
class Arg:
    """One positional argument: how its word becomes a value (given the CLI, for names)."""
    read: Callable[[object, str], object]


def integer(what: str) -> Arg:
    return Arg(lambda cli, text: to_int(text, what))


def named(kind: str, words: str) -> Arg:
    """An object of the program, by full name or unique suffix."""
    def find(cli, text):
        obj = cli.program.find(kind, text)
        if obj is None:
            raise InputError(f"Invalid {words} name ({text})")
        return obj
    return Arg(find)


def checked(arg: Arg, check: Callable[[object], None]) -> Arg:
    """`arg`, then `check` on its value (which raises InputError when it does not fit)."""
    def read(cli, text):
        value = arg.read(cli, text)
        check(value)
        return value
    return Arg(read)


WORD = Arg(lambda cli, text: text)
TABLE = named("table", "table")
PROFILE = named("profile", "action profile")
COUNTER = named("counter", "counter")
METER = named("meter", "meter")
REGISTER = named("register", "register")
VALUE_SET = named("value_set", "parser value set")
INDEX = integer("index")


def command(*spec: Arg, rest: bool = False, minimum: int | None = None):
    """`do_X(self, words, *values[, rest])`: exactly len(spec) words, or with `rest` at least
    `minimum` (default len(spec)) and the words past the spec's as a list."""
    least = len(spec) if minimum is None else minimum

    def wrap(f):
        @functools.wraps(f)
        def do(self, line):
            words = line.split()
            try:
                if rest and len(words) < least:
                    raise InputError("Insufficient number of args")
                if not rest and len(words) != len(spec):
                    raise InputError(f"Wrong number of args, expected {len(spec)} but got "
                                     f"{len(words)}")
                values = [arg.read(self, word) for arg, word in zip(spec, words, strict=False)]
                if rest:
                    values.append(words[len(spec):])
                return f(self, words, *values)
            except InputError as exc:
                print(_input_error(exc))
            except ThriftError as exc:
                print(_refusal(exc))
        return do
    return wrap


def _input_error(exc: InputError) -> str:
    if isinstance(exc, KeyError_):
        return f"Invalid match key: {exc}"
    if isinstance(exc, DataError):
        return f"Invalid runtime data: {exc}"
    return f"Error: {exc}"


def _refusal(exc: ThriftError) -> str:
    for cls, codes, words in _ERRORS:
        if isinstance(exc, cls):
            return f"Invalid {words} operation ({codes._VALUES_TO_NAMES[exc.code]})"
    raise exc
