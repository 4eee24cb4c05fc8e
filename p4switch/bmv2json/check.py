"""Path-carrying access to a BMv2 JSON document: every read names where it looked, so a bad
document gets an error like `pipelines[0].tables[3].key[1].match_type: unknown 'foo'`."""
from __future__ import annotations


class BadJson(ValueError):
    """A BMv2 JSON p4switch cannot read or run; str() starts with the path of the object."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path}: {message}" if path else message)
        self.path, self.message = path, message


def _kind(value) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number", type(None): "null"}.get(type(value), "a value")


class J:
    """A JSON value and the path it was found at."""

    __slots__ = ("value", "path")

    def __init__(self, value, path=""):
        self.value, self.path = value, path

    def fail(self, message: str):
        raise BadJson(self.path, message)

    # ------------------------------------------------------------ navigation
    def _child(self, key) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def has(self, key) -> bool:
        return isinstance(self.value, dict) and key in self.value and self.value[key] is not None

    def get(self, key, default=None) -> J:
        self.obj()
        return J(self.value.get(key, default), self._child(key))

    def __getitem__(self, key) -> J:
        if isinstance(key, int):
            items = self.arr()
            if not 0 <= key < len(items):
                self.fail(f"has no element {key}")
            return J(items[key], self._child(key))
        self.obj()
        if key not in self.value:
            raise BadJson(self._child(key), "missing")
        return J(self.value[key], self._child(key))

    def items(self) -> list[J]:
        return [J(v, self._child(i)) for i, v in enumerate(self.arr())]

    # ------------------------------------------------------------ typed reads
    def obj(self) -> dict:
        if not isinstance(self.value, dict):
            self.fail(f"must be an object, not {_kind(self.value)}")
        return self.value

    def arr(self, length=None) -> list:
        if not isinstance(self.value, list):
            self.fail(f"must be an array, not {_kind(self.value)}")
        if length is not None and len(self.value) != length:
            self.fail(f"must have {length} elements, not {len(self.value)}")
        return self.value

    def str(self) -> str:
        if not isinstance(self.value, str):
            self.fail(f"must be a string, not {_kind(self.value)}")
        return self.value

    def opt_str(self) -> str | None:
        return None if self.value is None else self.str()

    def int(self, low=None, high=None) -> int:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            self.fail(f"must be an integer, not {_kind(self.value)}")
        if low is not None and self.value < low:
            self.fail(f"must be at least {low}, not {self.value}")
        if high is not None and self.value > high:
            self.fail(f"must be at most {high}, not {self.value}")
        return self.value

    def bool(self) -> bool:
        if not isinstance(self.value, bool):
            self.fail(f"must be a boolean, not {_kind(self.value)}")
        return self.value

    def hexstr(self) -> int:
        """A BMv2 hexstring ("0x0a", "-0x1"); also a JSON integer, which some writers use."""
        if isinstance(self.value, int) and not isinstance(self.value, bool):
            return self.value
        text = self.str()
        neg = text.startswith("-")
        body = text[1:] if neg else text
        digits = body[2:] if body.lower().startswith("0x") else body   # BMv2 takes both
        try:
            if not digits or not digits.isalnum():
                raise ValueError
            value = int(digits, 16)
        except ValueError:
            self.fail(f"must be a hexstring like '0x0a', not {text!r}")
        return -value if neg else value

    def one_of(self, choices) -> str:
        text = self.str()
        if text not in choices:
            self.fail(f"unknown {text!r} (one of {', '.join(sorted(choices))})")
        return text
