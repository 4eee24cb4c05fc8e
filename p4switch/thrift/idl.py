"""Thrift IDL concepts as Python declarations, read and written by PyPI `thrift`'s binary
protocol: a struct or exception is a class with a `thrift_spec` (the layout `thrift -gen py`
emits, which TProtocol.readStruct/writeStruct walk), a service is a table of methods with
their argument and result structs. Server side: `Processor` dispatches a call to a handler
method of the same name; client side: `Client` turns attribute calls into requests."""
from __future__ import annotations

from dataclasses import dataclass

from thrift.protocol.TBase import TBase, TExceptionBase
from thrift.Thrift import TApplicationException, TMessageType, TProcessor, TType

# field types: (ttype, type_args) as thrift_spec wants them
BOOL = (TType.BOOL, None)
BYTE = (TType.BYTE, None)
I16 = (TType.I16, None)
I32 = (TType.I32, None)
I64 = (TType.I64, None)
DOUBLE = (TType.DOUBLE, None)
STRING = (TType.STRING, "UTF8")
BINARY = (TType.STRING, "BINARY")


def list_of(elem):
    return (TType.LIST, (elem[0], elem[1], False))


def map_of(key, value):
    return (TType.MAP, (key[0], key[1], value[0], value[1], False))


def struct(cls):
    return (TType.STRUCT, [cls, None])


def _spec(fields):
    """[(id, name, type), ...] -> thrift_spec tuple indexed by field id."""
    top = max((f[0] for f in fields), default=0)
    spec = [None] * (top + 1)
    for fid, name, (ttype, args) in fields:
        spec[fid] = (fid, ttype, name, args, None)
    return tuple(spec)


class _Fields:
    """__init__ by keyword or position in field-id order, equality, and the repr that
    generated code prints (`Name(a=1, b=None)`: simple_switch_CLI's mirroring_get shows it)."""

    fields: tuple = ()

    def __init__(self, *args, **kwargs):
        names = [f[1] for f in self.fields]
        for name, value in zip(names, args, strict=False):
            kwargs.setdefault(name, value)
        for name in names:
            setattr(self, name, kwargs.pop(name, None))
        if kwargs:
            raise TypeError(f"{type(self).__name__} has no field {', '.join(kwargs)}")

    def __repr__(self):
        body = ", ".join(f"{f[1]}={getattr(self, f[1])!r}" for f in self.fields)
        return f"{type(self).__name__}({body})"

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __ne__(self, other):
        return not self == other

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.thrift_spec = _spec(cls.fields)
        # struct references name their class; the spec needs the class and its spec
        for entry in cls.thrift_spec:
            if entry and entry[1] == TType.STRUCT and entry[3][1] is None:
                entry[3][1] = entry[3][0].thrift_spec
            elif entry and entry[1] == TType.LIST and entry[3][0] == TType.STRUCT:
                ref = entry[3][1]
                if ref[1] is None:
                    ref[1] = ref[0].thrift_spec


class Struct(_Fields, TBase):
    __hash__ = None


class ThriftError(_Fields, TExceptionBase):
    """An IDL exception: raised by handlers, read back by clients."""

    def __str__(self):
        return repr(self)


def enum(name: str, **values):
    """An IDL enum: a class of int constants with _VALUES_TO_NAMES, as generated code has."""
    attrs = dict(values)
    attrs["_VALUES_TO_NAMES"] = {v: k for k, v in values.items()}
    attrs["_NAMES_TO_VALUES"] = dict(values)
    return type(name, (), attrs)


@dataclass(frozen=True)
class Method:
    name: str
    args: type
    result: type
    oneway: bool = False


def method(name, args=(), returns=None, throws=()):
    """One service method: argument fields (id, name, type), the return type (None: void)
    and the exceptions it may raise (id, name, class)."""
    arg_cls = type(f"{name}_args", (Struct,), {"fields": tuple(args)})
    result_fields = ((0, "success", returns),) if returns else ()
    result_fields += tuple((fid, fname, struct(cls)) for fid, fname, cls in throws)
    result_cls = type(f"{name}_result", (Struct,), {"fields": result_fields,
                                                    "throws": tuple(throws)})
    return Method(name, arg_cls, result_cls)


def service(*methods: Method) -> dict[str, Method]:
    return {m.name: m for m in methods}


class Processor(TProcessor):
    """Serves one service: each call goes to `handler.<method name>(*args)`; an IDL exception
    it raises goes back as the method's declared exception; any other error as an
    INTERNAL_ERROR application exception (the connection stays usable)."""

    def __init__(self, methods: dict[str, Method], handler):
        self.methods, self.handler = methods, handler

    def process(self, iprot, oprot):
        name, _, seqid = iprot.readMessageBegin()
        m = self.methods.get(name)
        if m is None or not hasattr(self.handler, name):
            iprot.skip(TType.STRUCT)
            iprot.readMessageEnd()
            self._reply(oprot, name, seqid, TMessageType.EXCEPTION, TApplicationException(
                TApplicationException.UNKNOWN_METHOD, f"unknown method {name}"))
            return True
        args = m.args()
        args.read(iprot)
        iprot.readMessageEnd()
        result = m.result()
        try:
            value = getattr(self.handler, name)(*(getattr(args, f[1]) for f in m.args.fields))
            if m.result.fields and m.result.fields[0][0] == 0:
                result.success = value
        except ThriftError as exc:
            for _fid, fname, cls in m.result.throws:
                if isinstance(exc, cls):
                    setattr(result, fname, exc)
                    break
            else:
                raise
        except Exception as exc:  # a bug must not kill the connection's thread silently
            self._reply(oprot, name, seqid, TMessageType.EXCEPTION, TApplicationException(
                TApplicationException.INTERNAL_ERROR, f"{name}: {type(exc).__name__}: {exc}"))
            return True
        self._reply(oprot, name, seqid, TMessageType.REPLY, result)
        return True

    @staticmethod
    def _reply(oprot, name, seqid, kind, body):
        oprot.writeMessageBegin(name, kind, seqid)
        body.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()


class Client:
    """`Client(methods, protocol).bm_mt_get_num_entries(0, "t")`: one request, one reply;
    a declared exception is raised as its class."""

    def __init__(self, methods: dict[str, Method], protocol):
        self._methods, self._prot, self._seqid = methods, protocol, 0

    def __getattr__(self, name):
        m = self._methods.get(name)
        if m is None:
            raise AttributeError(name)
        return lambda *args, **kwargs: self._call(m, args, kwargs)

    def _call(self, m: Method, args, kwargs):
        self._seqid += 1
        prot = self._prot
        prot.writeMessageBegin(m.name, TMessageType.CALL, self._seqid)
        m.args(*args, **kwargs).write(prot)
        prot.writeMessageEnd()
        prot.trans.flush()
        _, kind, _ = prot.readMessageBegin()
        if kind == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(prot)
            prot.readMessageEnd()
            raise exc
        result = m.result()
        result.read(prot)
        prot.readMessageEnd()
        for _, fname, _ in m.result.throws:
            if getattr(result, fname) is not None:
                raise getattr(result, fname)
        if m.result.fields and m.result.fields[0][0] == 0:
            return result.success
        return None
