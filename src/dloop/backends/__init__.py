"""STAGE 5 — the backends, one folder each. TABLE is the one list of them: config, the backend
factory (base.get_backend) and the cross-backend tests all read it, so a new row is all it takes
for a new backend to be selectable and tested everywhere."""

from collections import namedtuple

# module: where the Backend subclass lives; requires: modules that must import for it to exist.
Row = namedtuple("Row", "module cls requires")

TABLE = {
    "interpret": Row("dloop.backends.interpret.launch", "InterpretBackend", ()),
    "cpu": Row("dloop.backends.cpu.launch", "CpuBackend", ("llvmlite",)),
    "cpu-scalar": Row("dloop.backends.cpu.launch", "CpuScalarBackend", ("llvmlite",)),
    "cuda": Row("dloop.backends.cuda.launch", "CudaBackend", ("cupy",)),
    "vulkan": Row("dloop.backends.vulkan.launch", "VulkanBackend", ("vulkan",)),
}
