"""`counter_arrays`, `meter_arrays`, `register_arrays`, `calculations`, `checksums`,
`field_lists`, `learn_lists` and `extern_instances` -> v1model extern instances, hash inputs,
checksum calls, @field_list annotations and digest structs."""
from __future__ import annotations

from .check import J
from .names import p4_string

ALGOS = {"crc16": "crc16", "crc32": "crc32", "csum16": "csum16", "xor16": "xor16",
         "identity": "identity", "random": "random", "crc16_custom": "crc16_custom",
         "crc32_custom": "crc32_custom"}


class Externs:
    def read_externs(self, root: J):
        self.top_decls: list[str] = []
        self.read_counters(root.get("counter_arrays", []))
        self.read_meters(root.get("meter_arrays", []))
        self.read_registers(root.get("register_arrays", []))
        for x in root.get("extern_instances", []).items():
            x["type"].fail(f"extern instance {x['name'].value!r} of type {x['type'].value!r}: "
                           "p4switch runs only v1model's externs")
        self.calculations = {c["name"].str(): c for c in root.get("calculations", []).items()}
        self.read_field_lists(root.get("field_lists", []))
        self.read_learn_lists(root.get("learn_lists", []))

    def read_counters(self, arrays: J):
        self.counters: dict[str, str] = {}     # name -> P4 instance
        self.direct_counters: dict[str, tuple[str, str]] = {}   # table -> (P4 name, json name)
        for c in arrays.items():
            name = c["name"].str()
            if c.get("is_direct", False).bool():
                table = c["binding"].str()
                self.direct_counters[table] = (self.namer(name, "dc_"), name)
                continue
            self.counters[name] = self.declare(name, "c_", f"counter({c['size'].int(1)}, "
                                               "CounterType.packets_and_bytes)")

    def read_meters(self, arrays: J):
        self.meters: dict[str, str] = {}
        self.direct_meters: dict[str, J] = {}                   # name -> meter array
        for m in arrays.items():
            name = m["name"].str()
            kind = m["type"].one_of(("bytes", "packets"))
            if m.get("rate_count", 2).int() != 2:
                m["rate_count"].fail("p4switch runs two-rate three-color meters only")
            if m.get("is_direct", False).bool():
                m["binding"].str()
                m["result_target"].arr(2)
                self.direct_meters[name] = m
                continue
            self.meters[name] = self.declare(name, "m_", f"meter({m['size'].int(1)}, "
                                             f"MeterType.{kind})")

    def read_registers(self, arrays: J):
        self.registers: dict[str, tuple[str, int]] = {}
        for r in arrays.items():
            name = r["name"].str()
            width = r["bitwidth"].int(1, 128)
            self.registers[name] = (self.declare(name, "r_", f"register<bit<{width}>>"
                                                 f"({r['size'].int(1)})"), width)

    def declare(self, name: str, prefix: str, instance: str) -> str:
        """A top-level extern instance under the JSON's name: its P4 name."""
        p4 = self.namer(name, prefix)
        self.top_decls.append(f"@name({p4_string('.' + name)}) {instance} {p4};")
        return p4

    def read_field_lists(self, lists: J):
        """Field lists kept across clone, resubmit and recirculate: user metadata fields,
        each remembered with the ids of the lists that hold it (its @field_list)."""
        self.field_lists: dict[int, list] = {}
        self.field_list_ids: dict[tuple[str, str], list[int]] = {}
        for fl in lists.items():
            fid = fl["id"].int(0)
            elems = []
            for e in fl["elements"].items():
                if e["type"].str() != "field":
                    e["type"].fail("a field list preserved across clone, resubmit or recirculate "
                                   "holds fields only")
                e["value"].arr(2)
                inst = self.instance(e["value"][0])
                if inst.role != "meta":
                    e["value"].fail("p4switch preserves user metadata fields only")
                if inst.htype.field(e["value"][1].str()) is None:
                    e["value"][1].fail(f"no field {e['value'][1].value!r} in {inst.name!r}")
                self.field_list_ids.setdefault((inst.htype.name, e["value"][1].value), []).append(fid)
                elems.append(e)
            self.field_lists[fid] = elems

    def read_learn_lists(self, lists: J):
        """Learn lists -> digest structs, members named as the P4Info's digest struct names
        them when it gives one name per element."""
        self.learn_lists: dict[int, tuple[str, list[str]]] = {}
        self.learn_decls: list[str] = []
        for ll in lists.items():
            lid = ll["id"].int(0)
            struct = self.types_namer(ll["name"].str())
            fields, members = [], []
            mn = set()
            names = self.p4info_structs.get(ll["name"].value, [])
            if names and len(names) != len(ll["elements"].arr()):
                names = []
            for k, e in enumerate(ll["elements"].items()):
                if e["type"].str() != "field":
                    e["type"].fail("a learn list holds fields only")
                f = self.field(e["value"])
                base = e["value"][1].str().replace(".", "_").replace("$", "_")
                member = names[k] if names else base
                member = member if member not in mn and member.isidentifier() else f"f{len(members)}"
                mn.add(member)
                fields.append(f.code if f.kind == "field" else f"_error_code({f.code})")
                members.append(f"    {'int' if f.signed else 'bit'}<{f.width}> {member};")
            self.learn_lists[lid] = (struct, fields)
            self.learn_decls += [f"struct {struct} {{"] + members + ["}"]

    # ------------------------------------------------------------------ references
    def _named(self, ref: J, pool: dict, what: str):
        name = ref.str()
        if name not in pool:
            ref.fail(f"unknown {what} {name!r}")
        return pool[name]

    def counter(self, e: J) -> str:
        return self._named(e["value"] if isinstance(e.value, dict) else e, self.counters,
                           "counter array")

    def meter(self, e: J) -> str:
        return self._named(e["value"] if isinstance(e.value, dict) else e, self.meters,
                           "meter array")

    def register(self, ref: J) -> tuple[str, int]:
        return self._named(ref, self.registers, "register array")

    def calculation(self, ref: J) -> tuple[str, list[str]]:
        """-> (HashAlgorithm member, field list codes) of a named calculation."""
        c = self._named(ref, self.calculations, "calculation")
        algo, fields, payload = self.calc_input(c)
        if payload:
            c.fail("a hash over the payload is run only in checksums")
        return algo, fields

    def calc_input(self, c: J) -> tuple[str, list[str], bool]:
        algo = c["algo"].str()
        if algo not in ALGOS:
            c["algo"].fail(f"unknown hash algorithm {algo!r} (p4switch runs "
                           f"{', '.join(sorted(ALGOS))})")
        fields, payload = [], False
        for e in c["input"].items():
            if payload:
                e.fail("the payload must be the last input")
            kind = e["type"].str()
            if kind == "field":
                f = self.field(e["value"])
                fields.append(f.code if f.kind != "parser_error" else f"_error_code({f.code})")
            elif kind == "hexstr":
                w = e["bitwidth"].int(1, 512)
                fields.append(f"{w}w{e['value'].hexstr() % (1 << w)}")
            elif kind == "header":
                inst = self.header_code(e["value"])
                fields += [f"{inst.code}.{p4}" for _, p4, _, _ in inst.htype.fields]
            elif kind == "payload":
                payload = True
            else:
                e["type"].fail(f"unknown calculation input type {kind!r}")
        return ALGOS[algo], fields, payload

    def checksum_calls(self, root: J) -> tuple[list[str], list[str]]:
        """-> (statements of the verify_checksum control, of the compute_checksum control)."""
        verify, update = [], []
        for c in root.get("checksums", []).items():
            if c.get("type", "generic").str() not in ("generic", "ipv4", "tcp"):
                c["type"].fail(f"unknown checksum type {c['type'].value!r}")
            target = self.field(c["target"])
            calc = self._named(c["calculation"], self.calculations, "calculation")
            algo, fields, payload = self.calc_input(calc)
            self.pre = []
            cond = self.boolean(c["if_cond"]) if c.has("if_cond") else "true"
            if self.pre:
                c["if_cond"].fail("reads a register, which a checksum condition cannot")
            suffix = "_with_payload" if payload else ""
            args = f"({cond}, {{{', '.join(fields)}}}, {target.code}, HashAlgorithm.{algo});"
            if c.get("verify", True).bool():
                verify.append(f"verify_checksum{suffix}{args}")
            if c.get("update", True).bool():
                update.append(f"update_checksum{suffix}{args}")
        return verify, update
