"""`parsers`, `parse_vsets` and `deparsers` -> the P4 parser (states, extracts, selects on
values, masks and value sets) and deparser (emits in order)."""
from __future__ import annotations

from .check import J
from .names import Namer, p4_string


class Parsers:
    def read_value_sets(self, root: J):
        self.vsets: dict[str, tuple[str, int, J]] = {}
        for v in root.get("parse_vsets", []).items():
            name = v["name"].str()
            p4 = self.namer(name, "vs_")
            self.vsets[name] = (p4, v["compressed_bitwidth"].int(1, 64), v)
        self.vset_declared: set[str] = set()

    def declare_vset(self, name: str, width: int, where: J) -> str:
        """The value set's declaration, typed by the key it is matched on."""
        p4, bits, v = self.vsets[name]
        if width != bits:
            where.fail(f"value set {name!r} holds {bits}-bit values, the key has {width} bits")
        if name not in self.vset_declared:
            self.vset_declared.add(name)
            size = self.p4info_vset_sizes.get(name) or v.get("max_size", 64).int(1)
            self.vset_decls.append(f"    @name({p4_string('.' + name)}) value_set<bit<{width}>>"
                                   f"({size}) {p4};")
        return p4

    def parser(self, root: J) -> list[str]:
        parsers = root.get("parsers", []).items()
        if len(parsers) != 1:
            root.get("parsers").fail(f"v1model has one parser, this JSON has {len(parsers)}")
        p = parsers[0]
        self.vset_decls = []
        self.read_value_sets(root)
        states = p["parse_states"].items()
        names = Namer()
        init = p["init_state"].str()
        self.state_names = {}
        for s in states:
            n = s["name"].str()
            if n in self.state_names:
                s["name"].fail(f"parse state {n!r} is declared twice")
            self.state_names[n] = "start" if n == init else names(n, "s_")
        if init not in self.state_names:
            p["init_state"].fail(f"no parse state is named {init!r}")
        self.in_parser = True
        body = []
        for s in states:
            body += ["    " + x for x in self.state(s)]
        self.in_parser = False
        out = ["parser ParserImpl(packet_in packet, out headers_t hdr, inout meta_t meta, "
               "inout standard_metadata_t standard_metadata) {"]
        return out + self.vset_decls + body + ["}"]

    def state(self, s: J) -> list[str]:
        out = [f"state {self.state_names[s['name'].value]} {{"]
        self.locals = []
        for op in s["parser_ops"].items():
            out.append(f"    // json: {op.path}")
            out += ["    " + x for x in self.parser_op(op)]
        out.append(f"    // json: {s.path}.transitions")
        out += ["    " + x for x in self.transition(s)]
        out.append("}")
        return out

    def _extract_target(self, e: J) -> str:
        kind = e["type"].str()
        if kind == "regular":
            return self.header_code(e["value"]).code
        if kind == "stack":
            code = self.tv_header_stack(e["value"], e)[1]
            return f"{code}.next"
        if kind == "union_stack":
            e["value"].arr(2)
            _, code, utype = self.tv_header_union_stack(e["value"][0], e)
            m = [x for x in self.union_types[utype][1] if x[0] == e["value"][1].value]
            if not m:
                e["value"][1].fail(f"header union type {utype!r} has no member "
                                   f"{e['value'][1].value!r}")
            return f"{code}.next.{m[0][1]}"
        e["type"].fail(f"unknown extract target type {kind!r}")

    def parser_op(self, op: J) -> list[str]:
        kind = op["op"].str()
        params = op["parameters"].items()
        self.pre = []
        if kind == "extract":
            op["parameters"].arr(1)
            lines = [f"packet.extract({self._extract_target(params[0])});"]
        elif kind == "extract_VL":
            op["parameters"].arr(2)
            n = self.num(params[1])
            lines = [f"packet.extract({self._extract_target(params[0])}, {n.mod(32)});"]
        elif kind == "set":
            op["parameters"].arr(2)
            lines = self.store(self.lvalue(params[0]), params[1])
        elif kind == "verify":
            op["parameters"].arr(2)
            lines = [f"verify({self.boolean(params[0])}, {self.error_const(params[1])});"]
        elif kind == "shift":
            op["parameters"].arr(1)
            lines = [f"packet.advance({self.num(params[0]).mod(32)} << 3);"]
        elif kind == "advance":
            op["parameters"].arr(1)
            lines = [f"packet.advance({self.num(params[0]).mod(32)});"]
        elif kind == "primitive":
            op["parameters"].arr(1)
            return self.statement(params[0])
        else:
            op["op"].fail(f"unknown parser operation {kind!r}")
        return self.pre + lines

    def error_const(self, e: J) -> str:
        n = self.num(e)
        if n.const is None:
            e.fail("p4switch verifies with a constant error only")
        if n.const not in self.error_names:
            e.fail(f"no error has the value {n.const}")
        return f"error.{self.error_names[n.const]}"

    def transition(self, s: J) -> list[str]:
        keys = s.get("transition_key", []).items()
        trans = s["transitions"].items()
        self.pre = []
        key_nums = [self.num(k) for k in keys]
        widths = [k.width for k in key_nums]
        codes = [k.mod(k.width) for k in key_nums]
        cases = []
        has_default = False
        for t in trans:
            nxt = t["next_state"].opt_str()
            if nxt is None:
                target = "accept"
            elif nxt not in self.state_names:
                t["next_state"].fail(f"no parse state is named {nxt!r}")
            else:
                target = self.state_names[nxt]
            kind = t.get("type", "hexstr").str() if t.has("type") else \
                ("default" if t.get("value").value == "default" else "hexstr")
            if kind == "default":
                cases.append(("default", target))
                has_default = True
                break
            if not keys:
                t.fail("a value transition in a state without a transition key")
            mask = t["mask"].hexstr() if t.has("mask") else None
            if kind == "parse_vset":
                name = t["value"].str()
                if name not in self.vsets:
                    t["value"].fail(f"unknown parse value set {name!r}")
                if len(keys) != 1:
                    t.fail("p4switch matches a value set on a one-field key only (its compiler "
                           "does not run a value_set of a struct in a select of several keys)")
                if mask is not None and any(m != (1 << w) - 1 for m, w in
                                            zip(_split(mask, widths), widths, strict=True)):
                    t["mask"].fail("p4switch does not mask value set matches")
                cases.append((self.declare_vset(name, widths[0], t), target))
                continue
            if kind != "hexstr":
                t["type"].fail(f"unknown transition type {kind!r}")
            value = t["value"].hexstr()
            parts = _split(value, widths)
            mparts = _split(mask, widths) if mask is not None else None
            items = []
            for i, (v, w) in enumerate(zip(parts, widths, strict=True)):
                if mparts is None or mparts[i] & ((1 << w) - 1) == (1 << w) - 1:
                    items.append(f"{w}w{v & ((1 << w) - 1)}")
                else:
                    m = mparts[i] & ((1 << w) - 1)
                    items.append(f"{w}w{v & m} &&& {w}w{m}")
            cases.append((items[0] if len(items) == 1 else f"({', '.join(items)})", target))
        if not keys:
            target = cases[0][1] if cases else "accept"
            return self.pre + [f"transition {target};"]
        if not has_default:
            cases.append(("default", "accept"))     # BMv2: no match ends parsing, no error
        sel = ", ".join(codes)
        out = self.pre + [f"transition select({sel}) {{"]
        out += [f"    {label}: {target};" for label, target in cases]
        out.append("}")
        return out

    def deparser(self, root: J) -> list[str]:
        deps = root.get("deparsers", []).items()
        if len(deps) != 1:
            root.get("deparsers").fail(f"v1model has one deparser, this JSON has {len(deps)}")
        out = ["control DeparserImpl(packet_out packet, in headers_t hdr) {", "    apply {"]
        for h in deps[0]["order"].items():
            inst = self.header_code(h)
            out.append(f"        packet.emit({inst.code});")
        out += ["    }", "}"]
        return out


def _split(value: int, widths: list[int]) -> list[int]:
    """A byte-padded concatenated key value -> one value per key field."""
    out = []
    for w in reversed(widths):
        nbytes = (w + 7) // 8
        out.append(value & ((1 << (8 * nbytes)) - 1))
        value >>= 8 * nbytes
    return list(reversed(out))
