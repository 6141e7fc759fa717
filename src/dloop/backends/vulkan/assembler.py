"""STAGE 5 — vulkan: a small SPIR-V module builder. Ids, deduplicated types and constants, the
module's sections in the order the specification requires, and functions made of blocks;
words() gives the binary (a list of 32-bit words). Instruction operands are ints (ids or
literal words) or str (literal strings)."""

import struct

from .spirv import MAGIC, OP, Decoration, StorageClass


def _string_words(text):
    data = text.encode() + b"\0"
    data += b"\0" * (-len(data) % 4)
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def encode(opname, operands):
    words = []
    for x in operands:
        words.extend(_string_words(x) if isinstance(x, str) else [x & 0xFFFFFFFF])
    return [(len(words) + 1) << 16 | OP[opname]] + words


_UNFUSED = frozenset(("FAdd", "FSub", "FMul"))


class Module:
    SECTIONS = ("capability", "extension", "import", "memory_model", "entry", "mode", "debug",
                "name", "annotation", "global")

    def __init__(self, version=(1, 3)):
        self.version = version
        self.bound = 1
        self.sections = {s: [] for s in self.SECTIONS}
        self.functions = []
        self._cache = {}          # (kind, key) -> id, so types and constants are unique

    def id(self):
        self.bound += 1
        return self.bound - 1

    def add(self, section, opname, *operands):
        self.sections[section].append(encode(opname, operands))

    def once(self, key, make):
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def _global(self, opname, *operands):
        """A type: its result id comes first."""
        rid = self.id()
        self.add("global", opname, rid, *operands)
        return rid

    def _typed(self, opname, type_id, *operands):
        """A constant or variable: result type, then result id."""
        rid = self.id()
        self.add("global", opname, type_id, rid, *operands)
        return rid

    # -- module-level declarations --
    def capability(self, cap):
        self.once(("cap", cap), lambda: self.add("capability", "Capability", cap))

    def extension(self, name):
        self.once(("ext", name), lambda: self.add("extension", "Extension", name))

    def ext_import(self, name):
        def make():
            rid = self.id()
            self.add("import", "ExtInstImport", rid, name)
            return rid
        return self.once(("import", name), make)

    def string(self, text):
        def make():
            rid = self.id()
            self.add("debug", "String", rid, text)
            return rid
        return self.once(("string", text), make)

    def decorate(self, target, name, *values):
        self.add("annotation", "Decorate", target, Decoration[name], *values)

    def member_decorate(self, struct_id, member, name, *values):
        self.add("annotation", "MemberDecorate", struct_id, member, Decoration[name], *values)

    # -- types --
    def t_void(self):
        return self.once(("void",), lambda: self._global("TypeVoid"))

    def t_bool(self):
        return self.once(("bool",), lambda: self._global("TypeBool"))

    def t_int(self, width, signed=True):
        return self.once(("int", width, signed),
                         lambda: self._global("TypeInt", width, int(signed)))

    def t_float(self, width):
        return self.once(("float", width), lambda: self._global("TypeFloat", width))

    def t_vector(self, elem, n):
        return self.once(("vec", elem, n), lambda: self._global("TypeVector", elem, n))

    def t_pointer(self, storage, pointee):
        return self.once(("ptr", storage, pointee),
                         lambda: self._global("TypePointer", StorageClass[storage], pointee))

    def t_function(self, ret, *params):
        return self.once(("fn", ret, params), lambda: self._global("TypeFunction", ret, *params))

    def t_runtime_array(self, elem, stride):
        def make():
            rid = self._global("TypeRuntimeArray", elem)
            self.decorate(rid, "ArrayStride", stride)
            return rid
        return self.once(("rtarray", elem), make)

    def t_struct(self, *members):
        return self.once(("struct", members), lambda: self._global("TypeStruct", *members))

    def variable(self, ptr_type, storage):
        return self._typed("Variable", ptr_type, StorageClass[storage])

    # -- constants --
    def constant(self, type_id, words):
        """A numeric constant given as its literal words (low word first)."""
        return self.once(("const", type_id, tuple(words)),
                         lambda: self._typed("Constant", type_id, *words))

    def const_bool(self, value):
        op = "ConstantTrue" if value else "ConstantFalse"
        return self.once(("cbool", bool(value)), lambda: self._typed(op, self.t_bool()))

    # -- output --
    def words(self):
        out = [MAGIC, self.version[0] << 16 | self.version[1] << 8, 0, self.bound, 0]
        for section in self.SECTIONS:
            for instruction in self.sections[section]:
                out.extend(instruction)
        for fn in self.functions:
            out.extend(fn.words())
        return out

    def binary(self):
        w = self.words()
        return struct.pack(f"<{len(w)}I", *w)


class Function:
    """A function as blocks of instructions. `line` sets the user's source position; an OpLine
    goes before the next ordinary instruction of a block where the position changed."""

    def __init__(self, module, ret_type, fn_type):
        self.m = module
        self.id = module.id()
        self.header = [encode("Function", [ret_type, self.id, 0, fn_type])]
        self.variables = []       # OpVariable Function: they must open the first block
        self.blocks = []
        self.label = None
        self._line = None
        self._written_line = None
        module.functions.append(self)

    def begin(self, label):
        self.label = label
        self.blocks.append([encode("Label", [label])])
        self._written_line = None

    def line(self, src):
        self._line = src

    @property
    def src(self):
        """The user's file:line of the statement being rendered (None if unknown)."""
        return self._line

    def _emit_line(self):
        if self._line is None or self._line == self._written_line:
            return
        path, _, row = str(self._line).rpartition(":")
        if not path or not row.isdigit():
            return
        self.blocks[-1].append(encode("Line", [self.m.string(path), int(row), 0]))
        self._written_line = self._line

    def op(self, opname, result_type, *operands):
        """An instruction with a result; returns its id. Float adds, subtracts and
        multiplies are NoContraction: each rounds once, as kernel/core.py pins, since a
        driver free to fuse a * b + c into an Fma breaks the exact-product and two-sum steps
        of kernel/mathlib.py, kernel/exactdiv.py and ops._frem."""
        rid = self.m.id()
        if opname in _UNFUSED:
            self.m.decorate(rid, "NoContraction")
        self._emit_line()
        self.blocks[-1].append(encode(opname, [result_type, rid, *operands]))
        return rid

    def do(self, opname, *operands):
        """An instruction without a result (OpStore, ...)."""
        self._emit_line()
        self.blocks[-1].append(encode(opname, list(operands)))

    def phi(self, result_type, incoming):
        """OpPhi with (value, block) pairs; returns (id, the instruction) so a back edge's
        value can be filled in once the loop body exists."""
        rid = self.m.id()
        words = [result_type, rid]
        for value, block in incoming:
            words += [value, block]
        instruction = encode("Phi", words)
        self.blocks[-1].append(instruction)
        return rid, instruction

    @staticmethod
    def set_incoming(instruction, k, value, block):
        """Fill pair k of a phi made with placeholders (3 leading words: opcode, type, id)."""
        instruction[3 + 2 * k] = value
        instruction[4 + 2 * k] = block

    def end(self, opname, *operands):
        """A merge instruction or a terminator: never preceded by an OpLine."""
        self.blocks[-1].append(encode(opname, list(operands)))

    def local(self, ptr_type):
        rid = self.m.id()
        self.variables.append(encode("Variable", [ptr_type, rid, StorageClass["Function"]]))
        return rid

    def words(self):
        out = [w for ins in self.header for w in ins]
        first, *rest = self.blocks
        out.extend(first[0])                       # the entry label
        for ins in self.variables:
            out.extend(ins)
        for ins in first[1:]:
            out.extend(ins)
        for block in rest:
            for ins in block:
                out.extend(ins)
        out.extend(encode("FunctionEnd", []))
        return out
