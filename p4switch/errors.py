"""The one error type of the frontend: a message tied to a place in the original source."""
from __future__ import annotations


class P4CompileError(Exception):
    """`str(e)` is `file:line:col: error: message`, the source line and a caret under col."""

    def __init__(self, file: str, line: int, col: int, message: str, source_line: str | None = None):
        self.file, self.line, self.col, self.message = file, line, col, message
        self.source_line = source_line if source_line is not None else _read_line(file, line)
        super().__init__(str(self))

    def __str__(self) -> str:
        text = f"{self.file}:{self.line}:{self.col}: error: {self.message}"
        if self.source_line is not None:
            text += f"\n{self.source_line}\n{' ' * max(self.col - 1, 0)}^"
        return text


class InternalCompilerError(P4CompileError):
    """The compiler failed on a program it should have compiled or refused with a reason: a
    p4switch bug (or a construct it does not support and does not yet name). The original
    exception is its `__cause__`, so the traceback stays with whoever logs it."""


def _read_line(file: str, line: int) -> str | None:
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            for number, text in enumerate(fh, 1):
                if number == line:
                    return text.rstrip("\n")
    except OSError:
        return None
    return None
