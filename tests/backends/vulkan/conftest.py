"""The Vulkan tests' device fixture."""

import dataclasses

import pytest

import dloop as dl
from dloop import api
from dloop.backends import base


@pytest.fixture
def masked(monkeypatch):
    """make(mask) -> a Vulkan backend on a device without the masked features, installed as
    the 'vulkan' backend for the test."""
    previous = dl.config.backend

    def make(mask, **features):
        from dloop.backends.vulkan import device as vkdevice
        from dloop.backends.vulkan.launch import VulkanBackend
        monkeypatch.setitem(vars(dl.config), "vulkan_mask", mask)
        be = VulkanBackend(vkdevice.Device())
        if features:
            be.features = dataclasses.replace(be.features, **features)
        monkeypatch.setitem(base._instances, "vulkan", be)
        api._PROGRAMS.clear()          # programs compiled for another device must not be reused
        dl.config.update("backend", "vulkan")
        return be

    yield make
    api._PROGRAMS.clear()
    dl.config.update("backend", previous)
