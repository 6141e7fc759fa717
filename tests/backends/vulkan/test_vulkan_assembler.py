"""The SPIR-V assembler on small modules: each passes spirv-val, and the encoding of strings,
constants and sections is the one spirv-dis reads back."""

import shutil
import struct
import subprocess

import pytest

from dloop.backends.vulkan import spirv as S
from dloop.backends.vulkan.assembler import Function, Module, encode

needs_tools = pytest.mark.skipif(shutil.which("spirv-val") is None,
                                 reason="spirv-val is not installed (apt-get install spirv-tools)")


def _tool(name, code, tmp_path, *args):
    path = tmp_path / "m.spv"
    path.write_bytes(code)
    return subprocess.run([name, *args, str(path)], capture_output=True, text=True)


def _validate(code, tmp_path):
    run = _tool("spirv-val", code, tmp_path, "--target-env", "vulkan1.2")
    assert run.returncode == 0, run.stdout + run.stderr


def _compute_module(body):
    """A GLCompute entry point whose body(fn, m) is emitted between its label and return."""
    m = Module((1, 3))
    m.capability(S.Capability["Shader"])
    m.add("memory_model", "MemoryModel", S.AddressingModel["Logical"], S.MemoryModel["GLSL450"])
    void = m.t_void()
    fn = Function(m, void, m.t_function(void))
    fn.begin(m.id())
    body(fn, m)
    fn.end("Return")
    m.add("entry", "EntryPoint", S.ExecutionModel["GLCompute"], fn.id, "main")
    m.add("mode", "ExecutionMode", fn.id, S.ExecutionMode["LocalSize"], 1, 1, 1)
    return m


def test_string_operands_are_nul_terminated_and_padded():
    words = encode("String", [5, "main"])
    assert words[0] == (4 << 16) | S.OP["String"]       # "main\0" takes two words
    assert struct.pack("<2I", *words[2:]) == b"main\0\0\0\0"


def test_types_and_constants_are_unique():
    m = Module()
    assert m.t_int(32) == m.t_int(32) != m.t_int(32, False)
    assert m.constant(m.t_int(32), [7]) == m.constant(m.t_int(32), [7])
    assert m.constant(m.t_int(32), [7]) != m.constant(m.t_int(32), [8])


@needs_tools
def test_empty_compute_shader_validates(tmp_path):
    _validate(_compute_module(lambda fn, m: None).binary(), tmp_path)


@needs_tools
def test_structured_loop_with_phi_and_line_validates(tmp_path):
    def body(fn, m):
        i32, b = m.t_int(32), m.t_bool()
        zero, one, ten = (m.constant(i32, [v]) for v in (0, 1, 10))
        pre = fn.label
        header, cond, loop_body, cont, merge = (m.id() for _ in range(5))
        fn.end("Branch", header)
        fn.begin(header)
        k, phi = fn.phi(i32, [(zero, pre), (0, 0)])
        fn.end("LoopMerge", merge, cont, 0)
        fn.end("Branch", cond)
        fn.begin(cond)
        fn.line("/user/prog.py:12")
        more = fn.op("SLessThan", b, k, ten)
        fn.end("BranchConditional", more, loop_body, merge)
        fn.begin(loop_body)
        fn.end("Branch", cont)
        fn.begin(cont)
        nxt = fn.op("IAdd", i32, k, one)
        Function.set_incoming(phi, 1, nxt, cont)
        fn.end("Branch", header)
        fn.begin(merge)

    code = _compute_module(body).binary()
    _validate(code, tmp_path)
    text = _tool("spirv-dis", code, tmp_path).stdout
    assert 'OpString "/user/prog.py"' in text and "OpLine" in text and "OpLoopMerge" in text


@needs_tools
def test_a_wrong_module_fails_validation(tmp_path):
    """The validation the tests rely on does reject broken modules: a loop whose continue
    target is the header's own merge block is not structured."""
    def body(fn, m):
        header, merge = m.id(), m.id()
        fn.end("Branch", header)
        fn.begin(header)
        fn.end("LoopMerge", merge, merge, 0)
        fn.end("Branch", merge)
        fn.begin(merge)

    run = _tool("spirv-val", _compute_module(body).binary(), tmp_path,
                "--target-env", "vulkan1.2")
    assert run.returncode != 0
