"""The Vulkan tests' device fixture."""

import dataclasses

import pytest

import dloop as dl
from dloop import api
from dloop.backends import base


# One device per feature mask and test process: NVIDIA's driver refused a new VkDevice
# (VK_ERROR_INITIALIZATION_FAILED) after a few dozen in one process, and a device is kept
# until the process ends.
_DEVICES = {}


@pytest.fixture
def masked(monkeypatch):
    """make(mask) -> a Vulkan backend on a device without the masked features, installed as
    the 'vulkan' backend for the test."""
    previous = dl.config.backend

    def make(mask, **features):
        from dloop.backends.vulkan import device as vkdevice
        from dloop.backends.vulkan.launch import VulkanBackend
        monkeypatch.setitem(vars(dl.config), "vulkan_mask", mask)
        key = vkdevice.settings()
        if key not in _DEVICES:
            _DEVICES[key] = vkdevice.Device()
        be = VulkanBackend(_DEVICES[key])
        if features:
            be.features = dataclasses.replace(be.features, **features)
        monkeypatch.setitem(base._instances, "vulkan", be)
        api._PROGRAMS.clear()          # programs compiled for another device must not be reused
        dl.config.update("backend", "vulkan")
        return be

    yield make
    api._PROGRAMS.clear()
    dl.config.update("backend", previous)
