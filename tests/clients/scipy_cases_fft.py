"""Cases for scipy.fft, as scipy_cases.py does for its modules: a function of the 12-element
float64 vector x (values in (0.1, 0.9)) returning a real array. A complex result is read
through a real loss (its real part plus half its imaginary part, or its absolute value), and
complex inputs are built from x (x + 1j * x reversed)."""

import numpy as np
import scipy.fft as fft


def _xp(x):
    return np if isinstance(x, np.ndarray) else x.__array_namespace__()


def _parts(z):
    xp = _xp(z)
    return xp.real(z) + 0.5 * xp.imag(z)


def _signal(x):
    """A complex signal made from x."""
    return x + 1j * x[::-1]


CASES = {
    "fft.fft": lambda x: _parts(fft.fft(x)),
    "fft.ifft": lambda x: _parts(fft.ifft(_signal(x), n=16)),
    "fft.rfft": lambda x: _xp(x).abs(fft.rfft(x, n=10)),
    "fft.irfft": lambda x: fft.irfft(x[:7] + 1j * x[5:], n=12),
    "fft.hfft": lambda x: fft.hfft(x[:6] + 1j * x[6:], norm="ortho"),
    "fft.ihfft": lambda x: _parts(fft.ihfft(x)),
    "fft.fftn": lambda x: _parts(fft.fftn(_signal(x).reshape(3, 4))),
    "fft.ifftn": lambda x: _parts(fft.ifftn(x.reshape(3, 4), s=(4, 4), axes=(0, 1))),
    "fft.fft2": lambda x: _xp(x).abs(fft.fft2(x.reshape(2, 6), norm="forward")),
    "fft.ifft2": lambda x: _parts(fft.ifft2(_signal(x).reshape(4, 3))),
    "fft.rfftn": lambda x: _parts(fft.rfftn(x.reshape(3, 4))),
    "fft.rfft2": lambda x: _xp(x).abs(fft.rfft2(x.reshape(2, 6), s=(2, 8))),
    "fft.irfftn": lambda x: fft.irfftn(_signal(x).reshape(3, 4), axes=(0, 1)),
    "fft.irfft2": lambda x: fft.irfft2(_signal(x).reshape(2, 6), s=(2, 9)),
    "fft.hfftn": lambda x: fft.hfftn(_signal(x).reshape(3, 4), axes=(0, 1)),
    "fft.hfft2": lambda x: fft.hfft2(_signal(x).reshape(4, 3), norm="forward"),
    "fft.ihfftn": lambda x: _parts(fft.ihfftn(x.reshape(3, 4), axes=(0, 1))),
    "fft.ihfft2": lambda x: _parts(fft.ihfft2(x.reshape(2, 6))),
    "fft.fht": lambda x: fft.fht(x, dln=0.1, mu=0.5),
    "fft.ifht": lambda x: fft.ifht(x, dln=0.1, mu=0.5, offset=0.2),
    "fft.fftfreq": lambda x: fft.fftfreq(12, d=x[0] + 0.5, xp=_xp(x)) * x,
    "fft.rfftfreq": lambda x: fft.rfftfreq(12, d=x[3] * 2, xp=_xp(x)),
    "fft.fftshift": lambda x: fft.fftshift(x.reshape(3, 4) ** 2, axes=1),
    "fft.ifftshift": lambda x: fft.ifftshift(x * x[::-1]),
}
