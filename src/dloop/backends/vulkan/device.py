"""STAGE 5 — vulkan: the device. Instance and physical-device choice, what the device can do
(Features), buffers with a free list per size class, compute pipelines (with a VkPipelineCache
kept on disk), and submission: copies, fills and launches are recorded into one command
buffer, each after a full memory barrier, so they run in order; the buffer is submitted,
closed by a barrier towards the host, when the host waits (wait_all: reads, synchronize)
or when it holds _BATCH operations, and the host reads finished data once its fence
signals. Objects recorded work uses stay referenced until its fence has signalled, so
nothing is freed or reused under queued work."""

import atexit
import contextlib
import os
import signal
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np

try:
    import vulkan as vk
except OSError as e:        # the binding opens libvulkan as it is imported
    raise ImportError(f"the Vulkan loader library is missing ({e}); install libvulkan1",
                      name="libvulkan") from e

from ...adstack import parallel
from ...config import config
from ...errors import DloopNotImplementedError
from ...source import user_location

MASKABLE = ("float64", "int64", "float_atomics", "unified", "mapped")

_KIND_RANK = {vk.VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: 0,
              vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: 1,
              vk.VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: 2, vk.VK_PHYSICAL_DEVICE_TYPE_CPU: 3}
# Threads per workgroup: one subgroup, and at least 32 (kernel IR's interleaved tapes and the
# element order group 32 threads, design.md 20). On NVIDIA's driver (subgroups of 32) W1's
# reverse kernel at 10^6 elements took 0.64 ms against 0.94 with 64 (float32; float64 1.11
# against 1.26), each launch timed alone on an H100; a memory-bound body moved by under 0.04.
MIN_WORKGROUP = 32
_ALL_STAGES = vk.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
# Operations recorded into one command buffer before it is submitted without a wait: a
# submission (command buffer, fence, vkQueueSubmit) cost about 0.6 ms of driver calls
# through the binding on NVIDIA's driver, so the copies and launches of a call share a few.
_BATCH = 64
# ... but a batch that holds a launch of this many threads, or a copy of this many bytes, is
# submitted at once, so that the device runs it while the host prepares what follows (W1's
# gradient at 10^6 on the H100: nothing ran until the host's final wait).
_HEAVY_THREADS = 1 << 16
_HEAVY_BYTES = 1 << 20
_SPARE = 8                   # retired command buffers and fences kept for reuse
# Submitted batches that may run while the host records more: beyond this, flush() waits
# for the oldest, which bounds the staging memory that queued work keeps alive.
_IN_FLIGHT = 2
# Bytes of mapped device memory that the host reads in place (uncached, across PCIe: 8 MB
# took 35 ms on an H100, so 256 bytes about 1 us) rather than through a staging copy.
_UNCACHED_READ = 256
# How long a wait polls its fence before it blocks (Device._wait): past it, a wake-up's
# 0.1 ms is small beside the work waited for.
_SPIN = 0.005
_OUT_OF_POOL_MEMORY = -1000069000
# Descriptor sets per pool. Every launch takes a set; once this many were made the pool is
# reset (after a wait): a driver may let allocations pass maxSets (lavapipe does), so a
# failed allocation alone would never free them (14 MiB over 40,000 sets there).
_POOL_SETS = 1024
_FRAGMENTED_POOL = vk.VK_ERROR_FRAGMENTED_POOL
# Recording and submission call the C functions directly: the binding's wrappers convert
# every argument in Python (about 10 us a call), some 15 calls per launch.
_lib, _NULL = vk.lib, vk.ffi.NULL
# Device buffers up to this size live in host-mapped device memory where the device maps all
# of it (Device._memory_types): the heap's large regions need no mapping.
_MAPPED_MOST = 256 << 20


_devices = weakref.WeakSet()


@contextlib.contextmanager
def _interrupts_held():
    """Ctrl-C held until the block ends, then raised: for driver calls after which the
    device may run work that Python code must still record (a KeyboardInterrupt between
    them would lose it, and free the buffers it uses). Only the main thread receives
    KeyboardInterrupt; elsewhere nothing is held."""
    previous = signal.getsignal(signal.SIGINT)
    if previous is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    caught = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            if callable(previous):
                previous(signal.SIGINT, caught[0])
            elif previous == signal.SIG_DFL:
                signal.raise_signal(signal.SIGINT)


def _forked_child():
    for device in list(_devices):
        device.forked = True


os.register_at_fork(after_in_child=_forked_child)


class VulkanUnavailable(Exception):
    """No usable device: the reason is the backend's reason for being unavailable."""


def settings():
    """(device choice or None, masked feature names, validate) from dloop.config."""
    mask = {m.strip() for m in (config.vulkan_mask or "").split(",") if m.strip()}
    unknown = mask - set(MASKABLE)
    if unknown:
        raise VulkanUnavailable(f"vulkan_mask names unknown features {sorted(unknown)}; "
                                f"known: {', '.join(MASKABLE)}")
    return config.vulkan_device, frozenset(mask), config.vulkan_validate


@dataclass(frozen=True)
class Features:
    name: str
    float64: bool
    int64: bool
    int64_atomics: bool
    float32_atomic_add: bool
    float64_atomic_add: bool
    nan_preserve32: bool
    nan_preserve64: bool
    denorm_preserve32: bool
    denorm_preserve64: bool
    max_range: int            # maxStorageBufferRange
    max_buffers: int          # maxPerStageDescriptorStorageBuffers (lavapipe: 32)
    align: int                # minStorageBufferOffsetAlignment
    max_groups: int           # maxComputeWorkGroupCount[0] (and [1])
    workgroup: int            # threads per workgroup: max(subgroupSize, MIN_WORKGROUP)
    uuid: bytes


def _instance():
    app = vk.VkApplicationInfo(sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO,
                               pApplicationName="dloop", applicationVersion=1,
                               pEngineName="dloop", engineVersion=1,
                               apiVersion=vk.VK_MAKE_VERSION(1, 2, 0))
    info = vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                                   pApplicationInfo=app)
    try:
        return vk.vkCreateInstance(info, None)
    except (vk.VkError, OSError) as e:
        raise VulkanUnavailable(f"no Vulkan driver: vkCreateInstance failed ({e!r})") from None


def _query(pd, mask):
    props = vk.vkGetPhysicalDeviceProperties(pd)
    base = vk.vkGetPhysicalDeviceFeatures(pd)
    atomic = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT)
    v12 = vk.VkPhysicalDeviceVulkan12Features(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, pNext=atomic)
    vk.vkGetPhysicalDeviceFeatures2(pd, vk.VkPhysicalDeviceFeatures2(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, pNext=v12))
    fc = vk.VkPhysicalDeviceFloatControlsProperties(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES)
    sub = vk.VkPhysicalDeviceSubgroupProperties(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES, pNext=fc)
    idp = vk.VkPhysicalDeviceIDProperties(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES, pNext=sub)
    vk.vkGetPhysicalDeviceProperties2(pd, vk.VkPhysicalDeviceProperties2(
        sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, pNext=idp))
    exts = {e.extensionName for e in vk.vkEnumerateDeviceExtensionProperties(pd, None)}
    has_float_ext = "VK_EXT_shader_atomic_float" in exts and "float_atomics" not in mask
    int64 = bool(base.shaderInt64) and "int64" not in mask
    return Features(
        name=props.deviceName,
        float64=bool(base.shaderFloat64) and "float64" not in mask,
        int64=int64,
        int64_atomics=int64 and bool(v12.shaderBufferInt64Atomics),
        float32_atomic_add=has_float_ext and bool(atomic.shaderBufferFloat32AtomicAdd),
        float64_atomic_add=has_float_ext and bool(atomic.shaderBufferFloat64AtomicAdd),
        nan_preserve32=bool(fc.shaderSignedZeroInfNanPreserveFloat32),
        nan_preserve64=bool(fc.shaderSignedZeroInfNanPreserveFloat64),
        denorm_preserve32=bool(fc.shaderDenormPreserveFloat32),
        denorm_preserve64=bool(fc.shaderDenormPreserveFloat64),
        max_range=int(props.limits.maxStorageBufferRange),
        max_buffers=int(props.limits.maxPerStageDescriptorStorageBuffers),
        align=int(props.limits.minStorageBufferOffsetAlignment),
        max_groups=int(min(props.limits.maxComputeWorkGroupCount[0],
                           props.limits.maxComputeWorkGroupCount[1])),
        workgroup=max(int(sub.subgroupSize), MIN_WORKGROUP),
        uuid=bytes(idp.deviceUUID)), props.deviceType, exts


def _struct(name, **fields):
    """A pointer to a new C struct `name` with `fields` (arrays and pointers it refers to
    must be kept alive by the caller)."""
    out = vk.ffi.new(f"{name}*")
    for key, value in fields.items():
        setattr(out, key, value)
    return out


def _check(result):
    """Raise the binding's exception for a failed VkResult (RuntimeError for a code it does
    not know)."""
    if result < 0:
        error = vk.exception_codes.get(result)
        raise error() if error is not None else RuntimeError(f"Vulkan error {result}")


def choose(devices, choice):
    """The index of the physical device to use: `choice` (an index, or a substring of the
    name), else the first discrete GPU, then integrated, virtual, CPU. devices: [(name, type)]."""
    if choice is not None:
        if choice.isdigit():
            if int(choice) < len(devices):
                return int(choice)
        else:
            for k, (name, _) in enumerate(devices):
                if choice.lower() in name.lower():
                    return k
        raise VulkanUnavailable(f"vulkan_device={choice!r} matches none of the Vulkan devices "
                                f"{[name for name, _ in devices]}")
    return min(range(len(devices)), key=lambda k: (_KIND_RANK.get(devices[k][1], 4), k))


class Buffer:
    """A VkBuffer with its memory; `view` is a NumPy uint8 array over its mapping (or None
    where the memory is not host-visible), which the host also reads where `readable`
    (host memory, or memory a CPU or integrated GPU shares with it; not a discrete GPU's
    mapped memory, whose reads cross PCIe uncached)."""
    __slots__ = ("handle", "memory", "size", "view", "host", "readable", "__weakref__")

    def __init__(self, handle, memory, size, view, host, readable):
        self.handle, self.memory, self.size, self.view, self.host = \
            handle, memory, size, view, host
        self.readable = readable


def _descriptor_writes(dset, bindings):
    """(writes, buffer infos) binding each (buffer, offset, nbytes) to binding k of dset, as
    cffi arrays filled field by field: the binding's struct constructors cost about 40 us
    each (they look every field's type up by name), 0.4 ms for a ten-buffer kernel at every
    launch. The infos must live until vkUpdateDescriptorSets returns."""
    n = len(bindings)
    infos = vk.ffi.new("VkDescriptorBufferInfo[]", n)
    writes = vk.ffi.new("VkWriteDescriptorSet[]", n)
    for k, (buf, offset, nbytes) in enumerate(bindings):
        info, write = infos[k], writes[k]
        info.buffer, info.offset, info.range = buf.handle, offset, nbytes
        write.sType = vk.VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET
        write.dstSet, write.dstBinding, write.descriptorCount = dset, k, 1
        write.descriptorType = vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
        write.pBufferInfo = infos + k
    return writes, infos


def _size_class(nbytes):
    nbytes = max(int(nbytes), 256)
    if nbytes <= 64 << 20:
        return 1 << (nbytes - 1).bit_length()
    return -(-nbytes // (1 << 20)) << 20


class Device:
    def __init__(self):
        choice, mask, self.validate = settings()
        self.chosen = (choice, mask)
        self.instance = _instance()
        pds = vk.vkEnumeratePhysicalDevices(self.instance)
        if not pds:
            raise VulkanUnavailable("the Vulkan loader found no device")
        props = [vk.vkGetPhysicalDeviceProperties(pd) for pd in pds]
        self.pd = pds[choose([(p.deviceName, p.deviceType) for p in props], choice)]
        self.features, kind, exts = _query(self.pd, mask)
        self.lock = threading.RLock()
        self.spin = 0.0 if kind == vk.VK_PHYSICAL_DEVICE_TYPE_CPU else _SPIN
        self._create_device(exts)
        self._memory_types(mask, kind)
        self.pending = []                    # (fence, command buffer, objects kept alive)
        self.batch = None                    # (command buffer being recorded, its fence,
        #                                      objects kept)
        self.spare = []                      # (command buffer, fence) of retired submissions
        self.deferred = []                   # (buffer, offset, bytes): host writes not yet made
        self._begin = _struct("VkCommandBufferBeginInfo",
                              sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                              flags=vk.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT)
        self._barrier = _struct(
            "VkMemoryBarrier", sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
            srcAccessMask=vk.VK_ACCESS_MEMORY_WRITE_BIT,
            dstAccessMask=vk.VK_ACCESS_MEMORY_READ_BIT | vk.VK_ACCESS_MEMORY_WRITE_BIT)
        self._to_host = _struct("VkMemoryBarrier", sType=vk.VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                                srcAccessMask=vk.VK_ACCESS_MEMORY_WRITE_BIT,
                                dstAccessMask=vk.VK_ACCESS_HOST_READ_BIT)
        self.free = {}                       # size class -> [(handle, memory, view)]
        self.pipelines = {}
        self._pipeline_cache()
        self.descriptor_pool = self._new_descriptor_pool()
        self.sets_made = 0                   # descriptor sets allocated since the pool's reset
        self._set_infos = {}                 # set layout -> (its allocate info, the layout
        #                                      array it points to) (one pool)
        self.forked = False                  # set in a child that fork() copied it into
        _devices.add(self)
        atexit.register(self.close)

    def _in_its_process(self):
        """Refuse work in a child that fork() copied this device into: Vulkan drivers are not
        fork-safe, and the child's first driver call hung on lavapipe."""
        if self.forked:
            raise DloopNotImplementedError(
                f"the Vulkan device {self.features.name} was opened before this process "
                "forked, and a forked child cannot use it (Vulkan drivers are not fork-safe). "
                "Start worker processes with multiprocessing's 'spawn' or 'forkserver' "
                "method, or run this call on the cpu backend in them", user_location())

    # -- setup --
    def _create_device(self, exts):
        f = self.features
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.pd)
        self.family = next(k for k, q in enumerate(families)
                           if q.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        queue = vk.VkDeviceQueueCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                           queueFamilyIndex=self.family, queueCount=1,
                                           pQueuePriorities=[1.0])
        chain = None
        names = []
        if f.float32_atomic_add or f.float64_atomic_add:
            chain = vk.VkPhysicalDeviceShaderAtomicFloatFeaturesEXT(
                sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_ATOMIC_FLOAT_FEATURES_EXT,
                shaderBufferFloat32AtomicAdd=f.float32_atomic_add,
                shaderBufferFloat64AtomicAdd=f.float64_atomic_add)
            names.append("VK_EXT_shader_atomic_float")
        v12 = vk.VkPhysicalDeviceVulkan12Features(
            sType=vk.VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, pNext=chain,
            shaderBufferInt64Atomics=f.int64_atomics)
        base = vk.VkPhysicalDeviceFeatures(shaderFloat64=f.float64, shaderInt64=f.int64)
        info = vk.VkDeviceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, pNext=v12,
                                     queueCreateInfoCount=1, pQueueCreateInfos=[queue],
                                     enabledExtensionCount=len(names),
                                     ppEnabledExtensionNames=names or None,
                                     pEnabledFeatures=base)
        try:
            self.device = vk.vkCreateDevice(self.pd, info, None)
        except vk.VkError as e:       # the driver out of resources, or the GPU in a bad state
            raise VulkanUnavailable(f"the Vulkan device {f.name} could not be opened: "
                                    f"vkCreateDevice failed ({type(e).__name__})") from None
        self.queue = vk.vkGetDeviceQueue(self.device, self.family, 0)
        self.command_pool = vk.vkCreateCommandPool(self.device, vk.VkCommandPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, queueFamilyIndex=self.family,
            flags=vk.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT), None)

    def _memory_types(self, mask, kind):
        """Device arrays live in device-local memory. CPUs and integrated GPUs share it with
        the host, and the host maps it directly; discrete GPUs map it where they map all of
        it (below), else stage through host memory (their host-visible device memory, the
        PCIe BAR, is then small), and the host reads a discrete GPU's memory through staging
        memory either way."""
        props = vk.vkGetPhysicalDeviceMemoryProperties(self.pd)
        types = [props.memoryTypes[i].propertyFlags for i in range(props.memoryTypeCount)]
        self.type_flags = types
        local = vk.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT
        host = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        cached = host | vk.VK_MEMORY_PROPERTY_HOST_CACHED_BIT
        self.host_type = next((i for i, t in enumerate(types) if t & cached == cached),
                              next(i for i, t in enumerate(types) if t & host == host))
        unified = [i for i, t in enumerate(types) if t & (local | host) == local | host]
        shared = kind in (vk.VK_PHYSICAL_DEVICE_TYPE_CPU,
                          vk.VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU)
        if unified and shared and "unified" not in mask:
            self.device_type, self.unified = unified[0], True
        else:
            self.device_type = next((i for i, t in enumerate(types) if t & local),
                                    self.host_type)
            self.unified = False
        # A discrete GPU that maps all its memory to the host (resizable BAR, not the small
        # window of older boards): device arrays live there, written by the host directly,
        # with no staging copy or submission (8 MB in 0.38 ms against 0.86 ms staged, 128 KB
        # in 0.009 ms against 0.15 ms, on an H100), and read back through staging (the
        # host's reads of it cross PCIe uncached: 35 ms for 8 MB).
        heap = [props.memoryHeaps[props.memoryTypes[i].heapIndex].size
                for i in range(props.memoryTypeCount)]
        self.mapped_type = None
        if unified and not self.unified and "mapped" not in mask and \
                2 * heap[unified[0]] >= heap[self.device_type]:
            self.mapped_type = unified[0]

    def _new_descriptor_pool(self):
        sizes = [vk.VkDescriptorPoolSize(type=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                         descriptorCount=1 << 14)]
        return vk.vkCreateDescriptorPool(self.device, vk.VkDescriptorPoolCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, maxSets=_POOL_SETS,
            poolSizeCount=1, pPoolSizes=sizes), None)

    def _cache_path(self):
        if not config.cache_dir:
            return None
        return os.path.join(config.cache_dir, f"vulkan-{self.features.uuid.hex()}.pipelines")

    def _pipeline_cache(self):
        data = b""
        path = self._cache_path()
        if path and os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
        info = vk.VkPipelineCacheCreateInfo(sType=vk.VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                            initialDataSize=len(data),
                                            pInitialData=vk.ffi.from_buffer(data) if data
                                            else vk.ffi.NULL)
        self.pipeline_cache = vk.vkCreatePipelineCache(self.device, info, None)

    def save_pipeline_cache(self):
        self._in_its_process()
        path = self._cache_path()
        if not path or not self.pipelines:
            return
        size = vk.ffi.new("size_t *")
        vk.lib.vkGetPipelineCacheData(self.device, self.pipeline_cache, size, vk.ffi.NULL)
        data = vk.ffi.new("char[]", size[0])
        vk.lib.vkGetPipelineCacheData(self.device, self.pipeline_cache, size, data)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(vk.ffi.buffer(data, size[0]))
        os.replace(tmp, path)

    # -- memory --
    def alloc(self, nbytes, host=False):
        """A buffer of at least nbytes; MemoryError when the device has no room."""
        self._in_its_process()
        size = _size_class(nbytes)
        mapped = not host and self.mapped_type is not None and size <= _MAPPED_MOST
        with self.lock:
            bucket = self.free.get((size, host))
            if bucket:
                return self._wrap(size, host, *bucket.pop())
            usage = (vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                     vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | vk.VK_BUFFER_USAGE_TRANSFER_DST_BIT)
            handle = vk.vkCreateBuffer(self.device, vk.VkBufferCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=size, usage=usage,
                sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE), None)
            need = vk.vkGetBufferMemoryRequirements(self.device, handle)
            kind = self.host_type if host else self.mapped_type if mapped else self.device_type
            if not need.memoryTypeBits & (1 << kind):
                kind = next(i for i in range(32) if need.memoryTypeBits & (1 << i))
                mapped = mapped and bool(self.type_flags[kind] &
                                         vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)
            try:
                memory = vk.vkAllocateMemory(self.device, vk.VkMemoryAllocateInfo(
                    sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                    allocationSize=need.size, memoryTypeIndex=kind), None)
            except (vk.VkErrorOutOfDeviceMemory, vk.VkErrorOutOfHostMemory):
                vk.vkDestroyBuffer(self.device, handle, None)
                raise MemoryError(f"Vulkan device {self.features.name} has no room for "
                                  f"{size:,} bytes") from None
            vk.vkBindBufferMemory(self.device, handle, memory, 0)
            view = None
            if host or self.unified or mapped:
                view = np.frombuffer(vk.vkMapMemory(self.device, memory, 0, size, 0), np.uint8)
            return self._wrap(size, host, handle, memory, view)

    def _wrap(self, size, host, handle, memory, view):
        buf = Buffer(handle, memory, size, view, host, host or self.unified)
        # At exit the device goes first (close): nothing is recycled then.
        weakref.finalize(buf, self._recycle, size, host, handle, memory, view).atexit = False
        return buf

    def _recycle(self, size, host, handle, memory, view):
        if self.device is None or self.forked:
            return
        with self.lock:
            bucket = self.free.setdefault((size, host), [])
            if len(bucket) < 8:
                bucket.append((handle, memory, view))
                return
            vk.vkDestroyBuffer(self.device, handle, None)
            vk.vkFreeMemory(self.device, memory, None)

    def write(self, buf, offset, data, now=False):
        """Host bytes into buf (which no queued work uses). Into a discrete GPU's mapped
        memory, the copy is deferred (data kept unchanged meanwhile) unless `now`: it is made
        before the first submission that uses buf, or while the host waits for the device
        (wait_all), so that copying a kernel's inputs overlaps the sizing work the device
        runs first (1 MiB or more: smaller copies take microseconds). The runtime never
        changes a host array it has uploaded during the call."""
        self._in_its_process()
        data = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        if not data.size:
            return
        if buf.view is not None and not buf.readable and data.size >= _HEAVY_BYTES and \
                not now:
            with self.lock:
                self.deferred.append((buf, offset, data))
            return
        if buf.view is not None:
            with self.lock:
                if self.deferred:         # earlier writes into buf come first
                    self._write_deferred({id(buf)})
                parallel.copy(buf.view[offset:offset + data.size], data)
            return
        stage = self.alloc(data.size, host=True)
        parallel.copy(stage.view[:data.size], data)
        self.copy(buf, stage, data.size, dst_offset=offset)

    def read_many(self, parts):
        """Copies of several (buffer, offset, nbytes), after every submission finished: one
        wait for all (a wait costs about 0.15 ms on NVIDIA's driver). A few bytes of mapped
        device memory (a call's fault flags) are read across PCIe directly: a staging copy
        took a second submission and wait, 0.05 ms of each call on the H100."""
        self._in_its_process()
        staged = []
        for buf, offset, nbytes in parts:
            if not buf.readable and (buf.view is None or nbytes > _UNCACHED_READ):
                stage = self.alloc(nbytes, host=True)
                self.copy(stage, buf, nbytes, src_offset=offset)
                buf, offset = stage, 0
            staged.append((buf, offset, nbytes))
        self.wait_all()
        out = []
        for buf, offset, nbytes in staged:
            out.append(np.empty(nbytes, np.uint8))
            parallel.copy(out[-1], buf.view[offset:offset + nbytes])
        return out

    def fill_zero(self, buf, offset, nbytes):
        self._in_its_process()
        # (Mapped device memory: small fills by the host, large ones by the device.)
        if buf.view is not None and (buf.readable or nbytes < _HEAVY_BYTES):
            with self.lock:
                if self.deferred:         # earlier writes into buf come first
                    self._write_deferred({id(buf)})
                buf.view[offset:offset + nbytes] = 0
            return
        self.submit(lambda cmd: _lib.vkCmdFillBuffer(cmd, buf.handle, offset,
                                                     -(-nbytes // 4) * 4, 0), [buf])

    def copy(self, dst, src, nbytes, dst_offset=0, src_offset=0):
        self._in_its_process()
        if not nbytes:            # a zero-sized VkBufferCopy is invalid usage
            return
        region = vk.ffi.new("VkBufferCopy*")
        region.srcOffset, region.dstOffset, region.size = src_offset, dst_offset, nbytes
        self.submit(lambda cmd: _lib.vkCmdCopyBuffer(cmd, src.handle, dst.handle, 1, region),
                    [dst, src], heavy=nbytes >= _HEAVY_BYTES)

    # -- pipelines --
    def pipeline(self, key, code, n_bindings):
        self._in_its_process()
        with self.lock:
            if key not in self.pipelines:
                self.pipelines[key] = self._make_pipeline(code, n_bindings)
            return self.pipelines[key]

    def _make_pipeline(self, code, n_bindings):
        d = self.device
        bindings = [vk.VkDescriptorSetLayoutBinding(
            binding=k, descriptorType=vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, descriptorCount=1,
            stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT) for k in range(n_bindings)]
        set_layout = vk.vkCreateDescriptorSetLayout(d, vk.VkDescriptorSetLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
            bindingCount=n_bindings, pBindings=bindings or None), None)
        push = vk.VkPushConstantRange(stageFlags=vk.VK_SHADER_STAGE_COMPUTE_BIT, offset=0,
                                      size=4)
        layout = vk.vkCreatePipelineLayout(d, vk.VkPipelineLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, setLayoutCount=1,
            pSetLayouts=[set_layout], pushConstantRangeCount=1, pPushConstantRanges=[push]),
            None)
        module = vk.vkCreateShaderModule(d, vk.VkShaderModuleCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, codeSize=len(code),
            pCode=code), None)
        # The stage info's name string lives only as long as this Python object.
        stage = vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            stage=vk.VK_SHADER_STAGE_COMPUTE_BIT, module=module, pName="main")
        info = vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stage, layout=layout)
        pipeline = vk.vkCreateComputePipelines(d, self.pipeline_cache, 1, [info], None)[0]
        vk.vkDestroyShaderModule(d, module, None)
        return pipeline, layout, set_layout

    # -- submission --
    def dispatch(self, pipeline, bindings, n_threads, keep, workgroup):
        """Run a pipeline over n_threads; bindings: [(buffer, offset, nbytes)]; workgroup:
        the LocalSize the pipeline's shader was rendered with."""
        self._in_its_process()
        handle, layout, set_layout = pipeline
        with self.lock:
            dset = self._descriptor_set(set_layout)
            if bindings:
                writes, infos = _descriptor_writes(dset[0], bindings)
                _lib.vkUpdateDescriptorSets(self.device, len(bindings), writes, 0, _NULL)
            groups = -(-n_threads // workgroup)
            gx = min(groups, self.features.max_groups)
            gy = -(-groups // gx)
            count = vk.ffi.new("int32_t[1]", [n_threads])

            def record(cmd):
                _lib.vkCmdBindPipeline(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, handle)
                _lib.vkCmdBindDescriptorSets(cmd, vk.VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0,
                                             1, dset, 0, _NULL)
                _lib.vkCmdPushConstants(cmd, layout, vk.VK_SHADER_STAGE_COMPUTE_BIT, 0, 4,
                                        count)
                _lib.vkCmdDispatch(cmd, gx, gy, 1)

            self.submit(record, keep, dset, heavy=n_threads >= _HEAVY_THREADS)

    def _descriptor_set(self, set_layout):
        """A new descriptor set of `set_layout`, as a one-element array (what binding it
        takes)."""
        made = self._set_infos.get(set_layout)
        if made is None:        # made once per layout, with the array it points to
            layouts = vk.ffi.new("VkDescriptorSetLayout[1]", [set_layout])
            made = self._set_infos[set_layout] = (_struct(
                "VkDescriptorSetAllocateInfo",
                sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                descriptorPool=self.descriptor_pool, descriptorSetCount=1,
                pSetLayouts=layouts), layouts)
        info = made[0]
        dset = vk.ffi.new("VkDescriptorSet[1]")
        result = None
        if self.sets_made < _POOL_SETS:
            result = _lib.vkAllocateDescriptorSets(self.device, info, dset)
        if result in (None, _OUT_OF_POOL_MEMORY, _FRAGMENTED_POOL):
            self.wait_all()          # every set is free again: the pool starts over
            _check(_lib.vkResetDescriptorPool(self.device, self.descriptor_pool, 0))
            self.sets_made = 0
            result = _lib.vkAllocateDescriptorSets(self.device, info, dset)
        _check(result)
        self.sets_made += 1
        return dset

    def submit(self, record, keep, dset=None, heavy=False):
        """Record work into the open command buffer, after a full memory barrier; it runs
        once flush() submits the buffer (at once where it is `heavy`). keep: objects the work
        uses (alive until it ends)."""
        self._in_its_process()
        with self.lock:
            if self.batch is None:
                # Command buffers and fences are reused: making and destroying them costs
                # more, through the binding, than the work of a small submission.
                if self.spare:
                    cmd, fence = self.spare.pop()
                    _check(_lib.vkResetFences(self.device, 1, fence))
                else:
                    cmd = vk.vkAllocateCommandBuffers(self.device, vk.VkCommandBufferAllocateInfo(
                        sType=vk.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                        commandPool=self.command_pool,
                        level=vk.VK_COMMAND_BUFFER_LEVEL_PRIMARY, commandBufferCount=1))[0]
                    fence = vk.ffi.new("VkFence[1]", [vk.vkCreateFence(
                        self.device, vk.VkFenceCreateInfo(
                            sType=vk.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO), None)])
                _check(_lib.vkBeginCommandBuffer(cmd, self._begin))   # resets a reused one
                self.batch = (cmd, fence, [])
            cmd, _, kept = self.batch
            kept.append((keep, dset))
            _lib.vkCmdPipelineBarrier(cmd, _ALL_STAGES, _ALL_STAGES, 0, 1, self._barrier, 0,
                                      _NULL, 0, _NULL)
            record(cmd)
            if heavy or len(kept) >= _BATCH:
                self.flush()

    def flush(self):
        """Submit the recorded work (closed by a barrier towards the host) with a fence."""
        self._in_its_process()
        with self.lock:
            if self.batch is None:
                return
            cmd, fence, kept = self.batch
            if self.deferred:     # (while the batch is still held: Ctrl-C here keeps it)
                self._write_deferred({id(b) for keep, _ in kept for b in keep})
            buffers = vk.ffi.new("VkCommandBuffer[1]", [cmd])
            submit = _struct("VkSubmitInfo", sType=vk.VK_STRUCTURE_TYPE_SUBMIT_INFO,
                             commandBufferCount=1, pCommandBuffers=buffers)
            with _interrupts_held():
                # Once closed, the command buffer takes no more work, and once submitted the
                # device runs it: the batch must be pending by the time a Ctrl-C is raised.
                # A driver error leaves nothing submitted, and the batch is dropped.
                self.batch = None
                _lib.vkCmdPipelineBarrier(cmd, _ALL_STAGES, vk.VK_PIPELINE_STAGE_HOST_BIT, 0,
                                          1, self._to_host, 0, _NULL, 0, _NULL)
                _check(_lib.vkEndCommandBuffer(cmd))
                _check(_lib.vkQueueSubmit(self.queue, 1, submit, fence[0]))
                self.pending.append((fence, cmd, kept))
            self._retire(limit=_IN_FLIGHT)

    def _retire(self, limit=0):
        """Release the submissions that finished; wait for the oldest while more than
        `limit` are queued."""
        while self.pending:
            fence, cmd, _ = self.pending[0]
            if len(self.pending) > limit:
                self._wait(fence)
            else:
                status = _lib.vkGetFenceStatus(self.device, fence[0])
                if status == vk.VK_NOT_READY:
                    return
                _check(status)
            self.pending.pop(0)
            if len(self.spare) < _SPARE:
                self.spare.append((cmd, fence))
            else:
                vk.vkDestroyFence(self.device, fence[0], None)
                vk.vkFreeCommandBuffers(self.device, self.command_pool, 1, [cmd])

    def _wait(self, fence):
        """Wait for `fence`: polled for up to _SPIN seconds, then blocked on. A blocked
        waiter woke 55 to 120 us after the work ended on the H100's driver (W1's gradient
        at 10^6, VK_EXT_calibrated_timestamps), a polling one 4 to 50 us: CUDA's runtime
        polls too while it has a core to spare. The driver call runs without the GIL, so
        other threads go on. A CPU device (lavapipe) does not poll: the work waited for
        runs on the cores a poller would take."""
        deadline = time.perf_counter() + self.spin
        while time.perf_counter() < deadline:
            status = _lib.vkGetFenceStatus(self.device, fence[0])
            if status != vk.VK_NOT_READY:
                _check(status)
                return
        result = _lib.vkWaitForFences(self.device, 1, fence, vk.VK_TRUE, 1 << 62)
        _check(result)
        if result != vk.VK_SUCCESS:      # VK_TIMEOUT: the work may still run
            raise RuntimeError(f"vkWaitForFences returned {result}")

    def _write_deferred(self, used=None):
        """Make the deferred host writes: those into buffers whose ids are in `used`, or
        all."""
        kept = []
        for buf, offset, data in self.deferred:
            if used is None or id(buf) in used:
                parallel.copy(buf.view[offset:offset + data.size], data)
            else:
                kept.append((buf, offset, data))
        self.deferred = kept

    def wait_all(self):
        self._in_its_process()
        with self.lock:
            self.flush()
            if self.deferred:             # while the device runs what flush() submitted
                self._write_deferred()
            self._retire(limit=0)

    def close(self):
        if self.device is None or self.forked:
            return
        try:
            self.wait_all()
            self.save_pipeline_cache()
        except Exception:       # the process is ending: the cache is only an optimisation
            pass
        vk.vkDeviceWaitIdle(self.device)
        for bucket in self.free.values():
            for handle, memory, _ in bucket:
                vk.vkDestroyBuffer(self.device, handle, None)
                vk.vkFreeMemory(self.device, memory, None)
        self.free.clear()
        for _, fence in self.spare:
            vk.vkDestroyFence(self.device, fence[0], None)
        self.spare.clear()
        self.device = None
