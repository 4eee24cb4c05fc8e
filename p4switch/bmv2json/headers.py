"""`header_types`, `headers`, `header_stacks`, `header_union_types`, `header_unions`,
`header_union_stacks` and `field_aliases` -> P4 header/struct/union types, the `hdr` and `meta`
structs, and what each JSON header instance and field reference is in P4."""
from __future__ import annotations

from .check import J
from .names import V1_STANDARD, Namer, ident


class HType:
    def __init__(self, name: str, p4: str):
        self.name, self.p4 = name, p4
        self.fields: list[tuple[str, str, int | str, bool]] = []   # json, p4, width or "*", signed
        self.varbit_max = 0                        # bits of the variable-length field
        self.where = ""

    def field(self, name: str):
        for f in self.fields:
            if f[0] == name:
                return f
        return None


class Instance:
    """A JSON header instance: its P4 expression, header type, and role."""

    def __init__(self, name, code, htype: HType, metadata: bool, role):
        self.name, self.code, self.htype, self.metadata, self.role = name, code, htype, metadata, role


class Field:
    """A numeric field reference: P4 code, width, signedness; `kind` 'parser_error' or
    'valid' for the two that are not plain fields."""

    def __init__(self, code, width, signed=False, kind="field", lv=True):
        self.code, self.width, self.signed, self.kind, self.lv = code, width, signed, kind, lv


class Headers:
    def read_headers(self, root: J):
        self.types_namer = Namer()
        self.htypes: dict[str, HType] = {}
        for ht in root.get("header_types", []).items():
            name = ht["name"].str()
            if name in self.htypes:
                ht["name"].fail(f"header type {name!r} is declared twice")
            t = HType(name, self.types_namer(name, "H_"))
            t.where = ht.path
            fnamer = Namer()
            varbits = 0
            for f in ht["fields"].items():
                items = f.arr()
                if len(items) not in (2, 3):
                    f.fail("must be [name, width] or [name, width, signed]")
                fname = f[0].str()
                signed = f[2].bool() if len(items) == 3 else False
                if f[1].value == "*":
                    width = "*"
                    varbits += 1
                else:
                    width = f[1].int(1, 2048)
                    if signed and width < 2:
                        f[1].fail("a signed field needs at least 2 bits")
                t.fields.append((fname, fnamer(fname), width, signed))
            if varbits > 1:
                ht["fields"].fail("has more than one variable-length field")
            if varbits:
                fixed = sum(w for _, _, w, _ in t.fields if w != "*")
                t.varbit_max = ht["max_length"].int(1) * 8 - fixed
                if t.varbit_max <= 0:
                    ht["max_length"].fail(f"leaves no room for the variable-length field "
                                          f"beside {fixed} fixed bits")
            self.htypes[name] = t
        self.union_types: dict[str, tuple[str, list[tuple[str, str, HType]]]] = {}
        for ut in root.get("header_union_types", []).items():
            name = ut["name"].str()
            members = []
            mnamer = Namer()
            for m in ut["headers"].items():
                m.arr(2)
                members.append((m[0].str(), mnamer(m[0].str()), self.htype(m[1])))
            self.union_types[name] = (self.types_namer(name, "U_"), members)
        self._instances(root)

    def htype(self, ref: J) -> HType:
        name = ref.str()
        if name not in self.htypes:
            ref.fail(f"unknown header type {name!r}")
        return self.htypes[name]

    def _instances(self, root: J):
        self.instances: dict[str, Instance] = {}
        self.by_id: dict[int, J] = {}
        self.hdr_members: list[str] = []      # `T name;` lines of struct headers_t
        self.meta_members: list[str] = []
        self.meta_types: dict[str, str] = {}   # header type name -> P4 struct name
        self.extra_sm: dict[str, tuple[str, int]] = {}    # standard_metadata fields v1model lacks
        self.stacks: dict[str, tuple[str, HType, int]] = {}   # name -> code, type, size
        self.union_stacks: dict[str, tuple[str, str, int]] = {}
        self.unions: dict[str, tuple[str, str]] = {}         # name -> code, union type
        self.hnamer, self.mnamer = Namer(), Namer()
        headers = root.get("headers", []).items()
        for h in headers:
            hid = h["id"].int(0)
            if hid in self.by_id:
                h["id"].fail(f"header id {hid} is used twice")
            self.by_id[hid] = h
        owned: dict[int, tuple[str, str]] = {}    # header id -> (code, role)
        for s in root.get("header_stacks", []).items():
            name, t = s["name"].str(), self.htype(s["header_type"])
            ids = [i.int() for i in s["header_ids"].items()]
            code = "hdr." + self.hnamer(name)
            self.hdr_members.append(f"{t.p4}[{len(ids)}] {code[4:]};")
            self.stacks[name] = (code, t, len(ids))
            for k, i in enumerate(ids):
                self._own(owned, s["header_ids"][k], i, f"{code}[{k}]")
        for u in root.get("header_unions", []).items():
            name = u["name"].str()
            utype = self._union_type(u["union_type"])
            code = "hdr." + self.hnamer(name)
            self.hdr_members.append(f"{utype[0]} {code[4:]};")
            self.unions[name] = (code, u["union_type"].value)
            self._own_union(owned, u["header_ids"], utype, code)
        for us in root.get("header_union_stacks", []).items():
            name = us["name"].str()
            utype = self._union_type(us["union_type"])
            ids = [i.int() for i in us["header_union_ids"].items()]
            code = "hdr." + self.hnamer(name)
            self.hdr_members.append(f"{utype[0]}[{len(ids)}] {code[4:]};")
            self.union_stacks[name] = (code, us["union_type"].value, len(ids))
            unions = {u["id"].value: u for u in root.get("header_unions", []).items()}
            for k, i in enumerate(ids):
                if i not in unions:
                    us["header_union_ids"][k].fail(f"no header union has id {i}")
                # the union's own member (declared above) moves into the stack element
                self.hdr_members.remove(f"{utype[0]} {self.unions[unions[i]['name'].value][0][4:]};")
                self.unions[unions[i]["name"].value] = (f"{code}[{k}]", us["union_type"].value)
                self._own_union(owned, unions[i]["header_ids"], utype, f"{code}[{k}]", again=True)
        aliases = self._aliases(root)
        for h in headers:
            name = h["name"].str()
            t = self.htype(h["header_type"])
            meta = h.get("metadata", False).bool()
            hid = h["id"].value
            if name == "standard_metadata" or t.name == "standard_metadata":
                inst = Instance(name, "standard_metadata", t, True, "standard")
            elif hid in owned:
                inst = Instance(name, owned[hid][0], t, meta, owned[hid][1])
            elif meta:
                if t.name not in self.meta_types:
                    self.meta_types[t.name] = self.types_namer(t.name, "M_")
                code = "meta." + self.mnamer(name)
                self.meta_members.append(f"{self.meta_types[t.name]} {code[5:]};")
                inst = Instance(name, code, t, True, "meta")
            else:
                code = "hdr." + self.hnamer(name)
                self.hdr_members.append(f"{t.p4} {code[4:]};")
                inst = Instance(name, code, t, False, "header")
            inst.where = h.path
            self.instances[name] = inst
        self.aliases = aliases

    def _union_type(self, ref: J):
        name = ref.str()
        if name not in self.union_types:
            ref.fail(f"unknown header union type {name!r}")
        return self.union_types[name]

    def _own(self, owned, where: J, hid: int, code: str, role="stack"):
        if hid not in self.by_id:
            where.fail(f"no header has id {hid}")
        if hid in owned and role != "again":
            where.fail(f"header id {hid} belongs to two stacks or unions")
        owned[hid] = (code, "member" if role == "again" else role)

    def _own_union(self, owned, ids: J, utype, code, again=False):
        members = utype[1]
        if len(ids.arr()) != len(members):
            ids.fail(f"has {len(ids.arr())} headers but the union type has {len(members)}")
        for k, i in enumerate(ids.items()):
            self._own(owned, i, i.int(), f"{code}.{members[k][1]}", "again" if again else "member")

    def _aliases(self, root: J) -> dict[tuple[str, str], str]:
        """(instance, field) -> v1model standard_metadata field, from `field_aliases`."""
        out = {}
        for a in root.get("field_aliases", []).items():
            a.arr(2)
            alias = a[0].str()
            a[1].arr(2)
            std = alias.rsplit(".", 1)[-1]
            if std in V1_STANDARD:
                out[(a[1][0].str(), a[1][1].str())] = std
        return out

    # ------------------------------------------------------------------ references
    def instance(self, ref: J) -> Instance:
        name = ref.str()
        if name not in self.instances:
            ref.fail(f"unknown header {name!r}")
        return self.instances[name]

    def field(self, ref: J) -> Field:
        """A ["header", "field"] reference."""
        ref.arr(2)
        hname, fname = ref[0].str(), ref[1].str()
        if fname == "$valid$":
            inst = self.instance(ref[0])
            if inst.metadata:
                ref.fail(f"metadata {hname!r} has no validity bit")
            return Field(f"({inst.code}.isValid() ? 1w1 : 1w0)", 1, kind="valid", lv=False)
        inst = self.instance(ref[0])
        std = self.aliases.get((hname, fname))
        if std is None and inst.role == "standard":
            std = fname if fname in V1_STANDARD else None
        f = inst.htype.field(fname)
        if f is None:
            ref[1].fail(f"header {hname!r} (type {inst.htype.name!r}) has no field {fname!r}")
        if f[2] == "*":
            ref.fail(f"variable-length field {hname}.{fname} is used as a number; p4switch "
                     "runs varbit fields only in extract, emit and checksums")
        if std == "parser_error":
            return Field("standard_metadata.parser_error", 32, kind="parser_error")
        if std is not None:
            return Field(f"standard_metadata.{std}", V1_STANDARD[std])
        if inst.role == "standard":        # a field v1model does not have: kept as metadata
            if fname not in self.extra_sm:
                self.extra_sm[fname] = (ident(fname), f[2])
            return Field(f"meta._sm.{self.extra_sm[fname][0]}", f[2], f[3])
        return Field(f"{inst.code}.{f[1]}", f[2], f[3])

    def header_code(self, ref: J) -> Instance:
        inst = self.instance(ref)
        if inst.metadata:
            ref.fail(f"{inst.name!r} is metadata, not a header")
        return inst

    # ------------------------------------------------------------------ declarations
    def type_decls(self) -> list[str]:
        out = []
        used = {i.htype.name for i in self.instances.values() if not i.metadata}
        used |= {t.name for _, t, _ in self.stacks.values()}
        used |= {t.name for _, members in self.union_types.values() for _, _, t in members}
        for t in self.htypes.values():
            if t.name == "standard_metadata" or t.name not in used:
                continue
            anno = self.controller_annotation(t)
            out.append(f"{anno}header {t.p4} {{")
            for _, p4, w, signed in t.fields:
                if w == "*":
                    out.append(f"    varbit<{t.varbit_max}> {p4};")
                else:
                    out.append(f"    {'int' if signed else 'bit'}<{w}> {p4};")
            out.append("}")
        for tname, sname in self.meta_types.items():
            t = self.htypes[tname]
            out.append(f"struct {sname} {{")
            for jname, p4, w, signed in t.fields:
                if w == "*":
                    continue
                anno = "".join(f"@field_list({i}) " for i in self.field_list_ids.get((tname, jname), ()))
                out.append(f"    {anno}{'int' if signed else 'bit'}<{w}> {p4};")
            out.append("}")
        for uname, members in self.union_types.values():
            out.append(f"header_union {uname} {{")
            out.extend(f"    {t.p4} {p4};" for _, p4, t in members)
            out.append("}")
        out.append("struct M__sm {")
        out.extend(f"    bit<{w}> {p4};" for p4, w in self.extra_sm.values())
        out.append("}")
        out.append("struct headers_t {")
        out.extend("    " + m for m in self.hdr_members)
        out.append("}")
        out.append("struct meta_t {")
        out.extend("    " + m for m in self.meta_members)
        out.append("    M__sm _sm;")
        out.append("}")
        return out
