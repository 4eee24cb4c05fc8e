"""`p4switch compile --bmv2-json OUT.json`: a compiled program in the format p4c-bm2-ss writes,
read back from the lowered program (the generated Python both backends run, whose expressions
already carry P4's widths as masks: BMv2's unbounded-integer meaning) and the checker's types.

It writes: headers, header stacks and metadata (flattened into `scalars`, as p4c does); the
parser (extract into headers and stack `next`, field assignments, select on one or more keys
with values, masks, ranges and default); ingress and egress (tables with exact, lpm, ternary,
range and optional keys on fields, default actions, direct counters; if/else, hit/miss,
switch on action_run; apply-block statements as p4c writes them, actions run from key-less
tables named tbl_*); actions (assignments, setValid/setInvalid, mark_to_drop, counters,
registers, clone, resubmit, recirculate, digest); the deparser. Anything else is refused with
CannotWrite naming the construct and its place."""
from __future__ import annotations

import ast

from .. import types as T
from .names import V1_STANDARD
from .write_controls import Controls
from .write_exprs import CannotWrite, hexstr

__all__ = ["CannotWrite", "write"]

_STANDARD = [(n, w) for n, w in V1_STANDARD.items()]


def write(source) -> dict:
    """Preprocessed P4 (a parse.SourceMap) -> the BMv2 JSON document. Raises CannotWrite, or
    P4CompileError for a program that does not compile."""
    from .. import parse, passes
    from ..ir import Fail, pos
    try:
        unit = passes.lower(parse.parse(source), source)
        prog = unit.program
    except Fail as exc:
        line, col = pos(exc.where)
        raise source.error(line, col, exc.message) from None
    try:
        return Document(prog, unit.lowering).build()
    except CannotWrite:
        raise
    except (LookupError, AttributeError, TypeError, ValueError) as exc:
        # a lowered form the writer does not know: refused, never a partial document
        raise CannotWrite(f"a construct the writer does not know ({type(exc).__name__}: "
                          f"{exc})") from None


class Document(Controls):
    def __init__(self, prog, compiler):
        self.prog = prog
        self.tree = ast.parse(prog.source)
        self.funcs = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)}
        self.types = {compiler.classes[id(t)]: t for t in compiler.class_types
                      if id(t) in compiler.classes}
        self.var_types = compiler.var_types
        self.roles = {}
        for n in self.tree.body:
            if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and \
                    n.targets[0].id in ("HDR", "META", "SM"):
                self.roles[n.targets[0].id] = n.value.id
        self.header_types, self.headers, self.stacks = [], [], []
        self.scalars: list[tuple[str, int]] = []
        self.meta_fields: dict[tuple, str] = {}       # attribute path under meta -> field
        self.hdr_members: dict[str, tuple] = {}       # member -> ('header'|'stack', ...)

    def fail(self, what):
        raise CannotWrite(what)

    # ------------------------------------------------------------------ headers
    def _htype(self, t: T.HeaderT) -> str:
        name = t.name
        if not any(h["name"] == name for h in self.header_types):
            fields = []
            for f, ft in t.fields:
                st = T.strip(ft)
                if isinstance(st, T.BitsT):
                    fields.append([f, st.width, st.signed])
                elif st is T.BOOL:
                    fields.append([f, 1, False])
                else:
                    self.fail(f"field {name}.{f} of type {type(st).__name__} (fixed-width "
                              "bit/int/bool fields only)")
            self.header_types.append({"name": name, "id": len(self.header_types),
                                      "fields": fields})
        return name

    def build_headers(self):
        std = [[n, w, False] for n, w in _STANDARD]
        pad = -sum(w for _, w in _STANDARD) % 8
        if pad:
            std.append(["_padding", pad, False])
        hdr_t = self.types[self.roles["HDR"]]
        for m, mt in hdr_t.fields:
            st = T.strip(mt)
            if isinstance(st, T.HeaderT):
                self._htype(st)
                self.headers.append({"name": m, "id": 0, "header_type": st.name,
                                     "metadata": False})
                self.hdr_members[m] = ("header", m)
            elif isinstance(st, T.StackT) and isinstance(T.strip(st.elem), T.HeaderT):
                et = T.strip(st.elem)
                self._htype(et)
                ids = []
                for i in range(st.size):
                    self.headers.append({"name": f"{m}[{i}]", "id": 0, "header_type": et.name,
                                         "metadata": False})
                    ids.append(len(self.headers) - 1)
                self.stacks.append({"name": m, "id": len(self.stacks), "header_type": et.name,
                                    "size": st.size, "ids": ids})
                self.hdr_members[m] = ("stack", m, st.size)
            else:
                self.fail(f"headers member {m} of kind {type(st).__name__} (headers and "
                          "header stacks only)")
        self._flatten(self.types[self.roles["META"]], ())
        fixed = [{"name": "scalars", "header_type": "scalars_0", "metadata": True},
                 {"name": "standard_metadata", "header_type": "standard_metadata",
                  "metadata": True}]
        self.header_types = [{"name": "scalars_0", "id": 0, "fields": []},
                             {"name": "standard_metadata", "id": 1, "fields": std}] + \
            self.header_types
        for i, h in enumerate(self.header_types):
            h["id"] = i
        self.headers = fixed + self.headers
        for i, h in enumerate(self.headers):
            h["id"] = i
        for s in self.stacks:
            s["header_ids"] = [i + 2 for i in s.pop("ids")]
            s.pop("size")

    def _flatten(self, t, path):
        for f, ft in t.fields:
            st = T.strip(ft)
            if isinstance(st, T.StructT):
                self._flatten(st, path + (f,))
            elif isinstance(st, T.BitsT) or st is T.BOOL:
                name = ".".join(path + (f,))
                self.scalars.append((name, st.width if st is not T.BOOL else 1))
                self.meta_fields[path + (f,)] = name
            else:
                self.fail(f"metadata field {'.'.join(path + (f,))} of kind "
                          f"{type(st).__name__} (bit/int/bool fields and structs of them only)")

    # ------------------------------------------------------------------ references
    def resolve(self, role: str, rest: list[str], node):
        """(role, attribute path) -> ('field', [header, field]) | ('header', name) | ..."""
        if role == "SM":
            if len(rest) == 1 and rest[0] in V1_STANDARD:
                return "field", ["standard_metadata", rest[0]]
        elif role == "META":
            name = self.meta_fields.get(tuple(rest))
            if name is not None:
                return "field", ["scalars", name]
        elif role == "HDR" and rest:
            base, _, index = rest[0].partition("[")
            if index and self.hdr_members.get(base, ("",))[0] == "stack":
                if int(index[:-1]) >= self.hdr_members[base][2]:
                    return self.fail_at(node, rest, role)
                if len(rest) == 1:
                    return "header", rest[0]
                if len(rest) == 2:
                    return "field", [rest[0], rest[1]]
            m = self.hdr_members.get(rest[0])
            if m is not None and m[0] == "header":
                if len(rest) == 1:
                    return "header", rest[0]
                if len(rest) == 2:
                    return "field", [rest[0], rest[1]]
            if m is not None and m[0] == "stack" and len(rest) >= 2 and rest[1] in ("_next",):
                return ("stack_next", rest[0]) if len(rest) == 2 else self.fail_at(node, rest)
            if m is not None and m[0] == "stack" and len(rest) == 1:
                return "stack", rest[0]
        return self.fail_at(node, rest, role)

    def fail_at(self, node, rest, role=""):
        raise CannotWrite(f"{self.where}: reference {'.'.join(rest)} of {role or 'a frame'} "
                          f"(line {getattr(node, 'lineno', '?')} of the lowered program)")

    # ------------------------------------------------------------------ the document
    def build(self) -> dict:
        self.where = "headers"
        self.build_headers()
        glue = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef)
                and n.name in ("PARSE", "VERIFY", "INGRESS", "EGRESS", "COMPUTE", "DEPARSE")}
        doc = {"__meta__": {"version": [2, 23], "compiler": "p4switch"},
               "header_types": self.header_types, "headers": self.headers,
               "header_stacks": self.stacks, "header_union_types": [], "header_unions": [],
               "header_union_stacks": [], "field_lists": [], "errors": [
                   [e, i] for i, e in enumerate(self.prog.errors or ["NoError"])],
               "enums": [], "parse_vsets": [], "meter_arrays": [], "counter_arrays": [],
               "register_arrays": [], "calculations": [], "learn_lists": [], "actions": [],
               "pipelines": [], "checksums": [], "force_arith": [], "extern_instances": [],
               "field_aliases": [["queueing_metadata.enq_timestamp", ["standard_metadata", "enq_timestamp"]],
                                 ["intrinsic_metadata.mcast_grp", ["standard_metadata", "mcast_grp"]],
                                 ["intrinsic_metadata.egress_rid", ["standard_metadata", "egress_rid"]]]}
        self.doc = doc
        self.externs_to_json()
        doc["parsers"] = [self.parser(glue["PARSE"])]
        for stage in ("VERIFY", "COMPUTE"):
            self.checksum_control(glue[stage], stage)
        doc["pipelines"] = [self.pipeline(glue["INGRESS"], "ingress"),
                            self.pipeline(glue["EGRESS"], "egress")]
        doc["deparsers"] = [self.deparser(glue["DEPARSE"])]
        pad = -sum(w for _, w in self.scalars) % 8
        self.header_types[0]["fields"] = [[n, w, False] for n, w in self.scalars] + \
            ([["_padding_0", pad, False]] if pad else [])
        return doc

    def local_temp(self, key: str, width: int) -> dict:
        name = "local." + key
        if not any(n == name for n, _ in self.scalars):
            self.scalars.append((name, width))
        return {"type": "field", "value": ["scalars", name]}

    def width_of(self, ref) -> int:
        h, f = ref
        if h == "scalars":
            return next(w for n, w in self.scalars if n == f)
        if h == "standard_metadata":
            return V1_STANDARD[f]
        return self.field_width(ref)

    def local(self, key: str, node) -> tuple[str, list[str]]:
        """A variable of a control or action: a field of `scalars`, as p4c writes it."""
        t = self.var_types.get(key)
        st = T.strip(t) if t is not None else None
        if not (isinstance(st, T.BitsT) or st is T.BOOL):
            raise CannotWrite(f"{self.where}: variable {key.rsplit('.', 1)[-1]} "
                              f"{'of this type ' if st is not None else ''}(line "
                              f"{getattr(node, 'lineno', '?')} of the lowered program)")
        name = "local." + key
        if not any(n == name for n, _ in self.scalars):
            self.scalars.append((name, st.width if st is not T.BOOL else 1))
        return "field", ["scalars", name]

    def control_of(self, glue: ast.FunctionDef):
        """The control function a glue function calls and its parameter -> role map."""
        call = glue.body[0].value
        fn = self.funcs[call.func.id]
        roles = {}
        for p, a in zip(fn.args.args, call.args, strict=True):
            if isinstance(a, ast.Attribute):
                roles[p.arg] = {"hdr": "HDR", "meta": "META", "sm": "SM"}[a.attr]
            else:
                roles[p.arg] = "PKT"
        return fn, roles

    def checksum_control(self, glue, stage):
        """verify_checksum / update_checksum calls -> `checksums` with their calculations."""
        fn, roles = self.control_of(glue)
        self.where = f"{stage.lower()} checksum control {fn.name[2:]}"
        frame = {st.targets[0].attr: roles[st.value.id] for st in fn.body
                 if _is_frame_setup(st) and isinstance(st.value, ast.Name)}
        self.frame, self.frame_cls = frame, None
        ex = self.writer()
        for st in fn.body:
            if isinstance(st, ast.Pass) or _is_frame_setup(st):
                continue
            cond, assign = None, st
            if isinstance(st, ast.If) and len(st.body) == 1 and not st.orelse:
                cond, assign = st.test, st.body[0]
            if stage == "COMPUTE" and isinstance(assign, ast.Assign):
                target, calc = assign.targets[0], _strip_mask(assign.value)
                if_cond = ex.boolean(cond) if cond is not None else None
            elif stage == "VERIFY" and cond is not None and isinstance(cond, ast.BoolOp) and \
                    isinstance(cond.op, ast.And) and isinstance(cond.values[-1], ast.Compare):
                cmp = cond.values[-1]
                calc, target = cmp.left, cmp.comparators[0]
                rest = cond.values[:-1]
                if_cond = ex.boolean(rest[0] if len(rest) == 1 else ast.BoolOp(ast.And(), rest))
            elif stage == "VERIFY" and cond is not None and isinstance(cond, ast.Compare):
                calc, target, if_cond = cond.left, cond.comparators[0], None
            else:
                raise CannotWrite(f"{self.where}: statement at line {st.lineno}")
            algo, inputs = self.hash_input(calc, ex, st)
            name = f"calc_{len(self.doc['calculations'])}"
            self.doc["calculations"].append({"name": name, "id": len(self.doc["calculations"]),
                                             "algo": algo, "input": inputs})
            self.doc["checksums"].append({
                "name": f"cksum_{len(self.doc['checksums'])}", "id": len(self.doc["checksums"]),
                "target": ex.data(target)["value"], "type": "generic", "calculation": name,
                "verify": stage == "VERIFY", "update": stage == "COMPUTE", "if_cond": if_cond})

    def hash_input(self, node, ex, st):
        """`_hash(algo, _bytes(f1 << s1 | ... | fn, W))` -> (algo, calculation inputs)."""
        if not (isinstance(node, ast.Call) and ast.unparse(node.func) == "_hash" and
                isinstance(node.args[1], ast.Call) and ast.unparse(node.args[1].func) == "_bytes"):
            ex.fail(st, "a hash or checksum over something other than fields")
        algo = node.args[0].value
        if algo not in ("crc16", "crc32", "csum16", "xor16", "identity"):
            ex.fail(st, f"hash algorithm {algo}")
        concat, total = node.args[1].args
        terms = _or_terms(concat)
        inputs, bits = [], 0
        for term in terms:
            if isinstance(term, ast.BinOp) and isinstance(term.op, ast.LShift):
                term = term.left
            v = ex.data(term)
            if v.get("type") != "field":
                ex.fail(st, "a hash input that is not a field")
            inputs.append(v)
            bits += self.width_of(v["value"])
        if bits != total.value:
            ex.fail(st, "a hash over a field list with padding or a payload")
        return algo, inputs

    # ------------------------------------------------------------------ parser
    def parser(self, glue) -> dict:
        fn, roles = self.control_of(glue)
        self.where = f"parser {fn.name[2:]}"
        loop = [s for s in fn.body if isinstance(s, ast.While)]
        if len(loop) != 1:
            self.fail(f"{self.where}: parser form")
        chain = loop[0].body[0]
        branches = []
        while isinstance(chain, ast.If):
            k = chain.test.comparators[0].value
            branches.append((k, chain.body))
            chain = chain.orelse[0] if chain.orelse else None
        names = {k: _log_name(body, f"state{k}") for k, body in branches}
        states = []
        for k, body in branches:
            states.append(self.state(k, body, names, roles))
        return {"name": "parser", "id": 0, "init_state": names[0], "parse_states": states}

    def pref(self, roles):
        def refs(parts, node):
            role = roles.get(parts[0])
            if role is None:
                self.fail_at(node, parts)
            return self.resolve(role, parts[1:], node)
        return refs

    def state(self, k, body, names, roles):
        from .write_exprs import ExprWriter
        ex = ExprWriter(self.pref(roles), self.where)
        ops, keys, transitions = [], [], None
        keyvars = {}
        for st in body:
            if _is_log(st):
                continue
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "_ext" \
                    and _stack_call(st.value.func.value, "_next"):
                parts = ex.chain(_stack_call(st.value.func.value, "_next"))
                kind, name = self.pref(roles)(parts, st)
                if kind != "stack":
                    ex.fail(st, "extract target")
                ops.append({"op": "extract", "parameters": [{"type": "stack", "value": name}]})
                continue
            if isinstance(st, ast.AugAssign) and isinstance(st.target, ast.Attribute) and \
                    st.target.attr == "nxt":
                continue                      # the stack's next index: BMv2's extract moves it
            if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) and \
                    isinstance(st.value.func, ast.Attribute) and st.value.func.attr == "_ext":
                parts = ex.chain(st.value.func.value)
                if parts is None:
                    ex.fail(st, "extract target")
                kind, name = self.pref(roles)(parts, st)
                if kind == "header":
                    ops.append({"op": "extract", "parameters": [{"type": "regular", "value": name}]})
                elif kind == "stack_next":
                    ops.append({"op": "extract", "parameters": [{"type": "stack", "value": name}]})
                else:
                    ex.fail(st, "extract target")
            elif isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                    st.targets[0].id.startswith("_k"):
                keyvars[st.targets[0].id] = len(keys)
                last = st.value
                if isinstance(last, ast.Attribute) and _stack_call(last.value, "_last"):
                    kind, name = self.pref(roles)(ex.chain(_stack_call(last.value, "_last")), st)
                    if kind != "stack":
                        ex.fail(st, "a select key")
                    keys.append({"type": "stack_field", "value": [name, last.attr]})
                    continue
                v = ex.data(st.value)
                if v.get("type") not in ("field",):
                    ex.fail(st, "a select key that is not a field")
                keys.append(v)
            elif isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute):
                tgt = ex.data(st.targets[0])
                ops.append({"op": "set", "parameters": [tgt, ex.data(st.value)]})
            elif isinstance(st, ast.Return):
                transitions = [_default(None)]
            elif isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                    st.targets[0].id == "st":
                transitions = [_default(names[st.value.value])]
            elif isinstance(st, ast.Continue):
                continue
            elif isinstance(st, ast.If) and len(st.body) == 1 and isinstance(st.body[0], ast.Raise) \
                    and isinstance(st.test, ast.UnaryOp) and isinstance(st.test.op, ast.Not) and \
                    isinstance(st.body[0].exc, ast.Call) and ast.unparse(st.body[0].exc.func) == "_Reject":
                err = st.body[0].exc.args[0]
                ops.append({"op": "verify", "parameters": [ex.boolean(st.test.operand),
                                                           hexstr(err.value)]})
            elif isinstance(st, ast.If):
                transitions = self.select(st, keys, keyvars, names, ex)
            else:
                ex.fail(st, f"parser statement {type(st).__name__}")
        if transitions is None:
            ex.fail(body[0], "a parser state without a transition")
        return {"name": names[k], "id": k, "parser_ops": ops, "transition_key": keys,
                "transitions": transitions}

    def select(self, st, keys, keyvars, names, ex):
        widths = [self.field_width(k["value"], k["type"] == "stack_field") for k in keys]
        out = []
        while st is not None:
            target = _target_of(st.body, names, ex)
            if isinstance(st.test, ast.Constant) and st.test.value is True:
                out.append(_default(target))
                break
            values = [None] * len(keys)
            masks = [None] * len(keys)
            for cmp in (st.test.values if isinstance(st.test, ast.BoolOp) else [st.test]):
                if not (isinstance(cmp, ast.Compare) and isinstance(cmp.ops[0], ast.Eq)):
                    ex.fail(cmp, "a select case other than a value or a mask")
                left, right = cmp.left, cmp.comparators[0]
                if isinstance(left, ast.BinOp) and isinstance(left.op, ast.BitAnd):
                    i = keyvars[left.left.id]
                    masks[i] = left.right.value
                    values[i] = right.left.value & right.right.value
                elif isinstance(left, ast.Name) and isinstance(right, ast.Constant):
                    i = keyvars[left.id]
                    values[i] = right.value
                else:
                    ex.fail(cmp, "a select case other than a value or a mask")
            value, mask = 0, 0
            masked = any(m is not None for m in masks)
            for v, m, w in zip(values, masks, widths, strict=True):
                nbytes = (w + 7) // 8
                full = (1 << w) - 1
                value = (value << 8 * nbytes) | ((v or 0) & full)
                mask = (mask << 8 * nbytes) | (full if v is not None and m is None else (m or 0) & full)
            out.append({"type": "hexstr", "value": hex(value),
                        "mask": hex(mask) if masked or None in values else None,
                        "next_state": target})
            st = st.orelse[0] if st.orelse else None
            if st is not None and not isinstance(st, ast.If):
                ex.fail(st, "select form")
        return out

    def field_width(self, ref, stack=False) -> int:
        h, f = ref
        inst = next(x for x in self.headers if x["name"] == (f"{h}[0]" if stack else h))
        ht = next(x for x in self.header_types if x["name"] == inst["header_type"])
        return next(w for n, w, _ in ht["fields"] if n == f)

    # ------------------------------------------------------------------ deparser
    def deparser(self, glue) -> dict:
        fn, roles = self.control_of(glue)
        self.where = f"deparser {fn.name[2:]}"
        order = []
        for st in fn.body:
            if isinstance(st, ast.Pass) or _is_frame_setup(st):
                continue
            call = st.value if isinstance(st, ast.Expr) else None
            if call is None or not isinstance(call, ast.Call) or \
                    not isinstance(call.func, ast.Attribute) or call.func.attr != "_emit":
                raise CannotWrite(f"{self.where}: statement at line {st.lineno} (emits only)")
            parts = []
            node = call.func.value
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            parts = list(reversed(parts))
            if not parts or not isinstance(node, ast.Name):
                raise CannotWrite(f"{self.where}: emit at line {st.lineno}")
            if parts[0] != "hdr" and parts[0] not in self.frame_roles(fn, roles, "HDR"):
                raise CannotWrite(f"{self.where}: emit at line {st.lineno}")
            kind = self.resolve("HDR", parts[1:], st)
            if kind[0] == "header":
                order.append(kind[1])
            elif kind[0] == "stack":
                size = self.hdr_members[kind[1]][2]
                order += [f"{kind[1]}[{i}]" for i in range(size)]
            else:
                raise CannotWrite(f"{self.where}: emit at line {st.lineno}")
        return {"name": "deparser", "id": 0, "order": order}

    def frame_roles(self, fn, roles, want):
        """Frame attributes bound to the parameters of role `want` (`F.hdr = p_hdr`)."""
        out = []
        for st in fn.body:
            if _is_frame_setup(st) and isinstance(st.value, ast.Name) and \
                    roles.get(st.value.id) == want:
                out.append(st.targets[0].attr)
        return out


def _stack_call(node, method):
    """`X._next()` / `X._last()` -> X"""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == method and not node.args:
        return node.func.value
    return None


def _is_frame_setup(st) -> bool:
    if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
            st.targets[0].id == "F" and isinstance(st.value, ast.Call):
        return True
    return isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Attribute) and \
        isinstance(st.targets[0].value, ast.Name) and st.targets[0].value.id == "F" and \
        isinstance(st.value, ast.Name) and st.value.id.startswith("p_")


def _is_log(st) -> bool:
    return isinstance(st, ast.If) and isinstance(st.test, ast.Name) and st.test.id == "_LOG"


def _log_name(body, default):
    for st in body:
        if _is_log(st):
            call = st.body[0].value
            if isinstance(call, ast.Call) and isinstance(call.args[0], ast.BinOp):
                return call.args[0].right.value
    return default


def _strip_mask(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        return node.left
    return node


def _or_terms(node):
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _or_terms(node.left) + _or_terms(node.right)
    return [node]


def _default(target):
    return {"type": "default", "value": None, "mask": None, "next_state": target}


def _target_of(body, names, ex):
    for st in body:
        if isinstance(st, ast.Return):
            return None
        if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and \
                st.targets[0].id == "st":
            return names[st.value.value]
    ex.fail(body[0], "a select case body")
