"""Cases for scipy.optimize, scipy.cluster, scipy.linalg, scipy.differentiate, scipy.signal and
scipy.spatial.transform, as scipy_cases.py does for the first four modules: a function of the
12-element float64 vector x (values in (0.1, 0.9)) returning an array."""

import numpy as np
import scipy.cluster.hierarchy as hierarchy
import scipy.cluster.vq as vq
import scipy.differentiate as differentiate
import scipy.linalg as linalg
import scipy.optimize as optimize
import scipy.signal as signal
from scipy.spatial.transform import RigidTransform, Rotation, Slerp
from scipy.spatial.transform._rigid_transform import normalize_dual_quaternion


def _xp(x):
    return np if isinstance(x, np.ndarray) else x.__array_namespace__()


def _rotations(x):
    return Rotation.from_rotvec(x.reshape(4, 3) - 0.5)


def _transforms(x):
    return RigidTransform.from_exp_coords(x.reshape(2, 6) - 0.5)


def _linkage(x):
    """A valid linkage matrix of 4 observations whose merge heights come from x."""
    xp = _xp(x)
    heights = xp.cumulative_sum(x[:3])
    ids = np.array([[0.0, 1.0], [2.0, 4.0], [3.0, 5.0]])
    counts = np.array([[2.0], [3.0], [4.0]])
    return xp.concat([xp.asarray(ids), xp.reshape(heights, (3, 1)), xp.asarray(counts)], axis=1)


def _setitem(r, other):
    r[1] = other
    return r


CASES = {
    # scipy.optimize
    "optimize.rosen": optimize.rosen,
    "optimize.rosen_der": optimize.rosen_der,
    "optimize.rosen_hess": optimize.rosen_hess,
    "optimize.rosen_hess_prod": lambda x: optimize.rosen_hess_prod(x, x[::-1]),
    # scipy.cluster
    "cluster.whiten": lambda x: vq.whiten(x.reshape(6, 2)),
    "cluster.to_mlab_linkage": lambda x: hierarchy.to_mlab_linkage(_linkage(x)),
    # scipy.linalg
    "linalg.block_diag": lambda x: linalg.block_diag(x[:4].reshape(2, 2), x[4:].reshape(2, 4)),
    "linalg.fiedler": linalg.fiedler,
    "linalg.orthogonal_procrustes": lambda x: linalg.orthogonal_procrustes(
        x[:6].reshape(3, 2), x[6:].reshape(3, 2), check_finite=False)[0],
    # scipy.differentiate, of a closure over the traced x
    "differentiate.derivative": lambda x: differentiate.derivative(
        lambda t: _xp(t).sin(t * x), 0.5 * _xp(x).ones_like(x)).df,
    "differentiate.jacobian": lambda x: differentiate.jacobian(
        lambda t: _xp(t).sin(t * x[:2, None]), x[2:4]).df,
    "differentiate.hessian": lambda x: differentiate.hessian(
        lambda t: _xp(t).sum(_xp(t).sin(t * x[:2, None]), axis=0), x[2:4]).ddf,
    # scipy.signal: functions of float arrays or float parameters
    "signal.abcd_normalize": lambda x: signal.abcd_normalize(
        x[:4].reshape(2, 2), x[4:6].reshape(2, 1), x[6:8].reshape(1, 2), x[8:9].reshape(1, 1))[0],
    "signal.envelope": lambda x: signal.envelope(x)[0],
    "signal.filtfilt": lambda x: signal.filtfilt(np.array([0.2, 0.3]), np.array([1.0, -0.4]),
                                                 x, padlen=3),
    "signal.gauss_spline": lambda x: signal.gauss_spline(x * 4 - 2, 3),
    "signal.iirnotch": lambda x: signal.iirnotch(x[0], 30.0)[0],
    "signal.iirpeak": lambda x: signal.iirpeak(x[0], 30.0)[0],
    "signal.iircomb": lambda x: signal.iircomb(0.25, x[0] * 30 + 5)[0],
    "signal.gammatone": lambda x: signal.gammatone(x[0] * 100 + 100, "iir", fs=1000.0)[0],
    "signal.iirdesign": lambda x: signal.iirdesign(x[0] * 0.2 + 0.1, 0.6, 1.0, 40.0)[0],
    "signal.freqz_zpk": lambda x: _xp(x).abs(signal.freqz_zpk(x[:2], x[2:4], 1.0, worN=8)[1]),
    "signal.bode": lambda x: signal.bode((x[:2], x[2:5]), w=np.array([0.5, 1.0]))[1],
    "signal.impulse": lambda x: signal.impulse((x[:2], x[2:5]), T=np.linspace(0, 1, 5))[1],
    "signal.sosfilt_zi": lambda x: signal.sosfilt_zi(_xp(x).concat(
        [x[:3], _xp(x).asarray(np.array([1.0])), x[3:5] * 0.3]).reshape(1, 6)),
    "signal.place_poles": lambda x: signal.place_poles(
        x[:4].reshape(2, 2), x[4:6].reshape(2, 1), np.array([-1.0, -2.0])).gain_matrix,
    "signal.cheb1ap": lambda x: signal.cheb1ap(3, x[0] + 0.5)[2],
    "signal.cheb2ap": lambda x: signal.cheb2ap(3, x[0] * 20 + 20)[2],
    "signal.ellipap": lambda x: signal.ellipap(3, x[0] + 0.5, 40.0)[2],
    # scipy.spatial.transform
    "spatial.Rotation.from_quat": lambda x: Rotation.from_quat(x.reshape(3, 4)).as_matrix(),
    "spatial.Rotation.from_matrix": lambda x: Rotation.from_matrix(
        _rotations(x).as_matrix()).as_quat(canonical=True),
    "spatial.Rotation.from_rotvec": lambda x: _rotations(x).as_matrix(),
    "spatial.Rotation.from_euler": lambda x: Rotation.from_euler(
        "xyz", x.reshape(4, 3)).as_matrix(),
    # The axes in x's namespace: SciPy takes the namespace from the axes alone.
    "spatial.Rotation.from_davenport": lambda x: Rotation.from_davenport(
        _xp(x).asarray(np.eye(3)), "extrinsic", x.reshape(4, 3)).as_matrix(),
    "spatial.Rotation.from_mrp": lambda x: Rotation.from_mrp(x.reshape(4, 3) - 0.5).as_matrix(),
    "spatial.Rotation.as_quat": lambda x: _rotations(x).as_quat(),
    "spatial.Rotation.as_matrix": lambda x: _rotations(x).as_matrix(),
    "spatial.Rotation.as_rotvec": lambda x: Rotation.from_quat(x.reshape(3, 4)).as_rotvec(),
    "spatial.Rotation.as_euler": lambda x: _rotations(x).as_euler("xyz"),
    "spatial.Rotation.as_davenport": lambda x: _rotations(x).as_davenport(np.eye(3),
                                                                           "extrinsic"),
    "spatial.Rotation.as_mrp": lambda x: _rotations(x).as_mrp(),
    "spatial.Rotation.concatenate": lambda x: Rotation.concatenate(
        [_rotations(x), Rotation.from_euler("xyz", x[:3])]).as_matrix(),
    "spatial.Rotation.apply": lambda x: _rotations(x).apply(x[::-1].reshape(4, 3)),
    "spatial.Rotation.__mul__": lambda x: (_rotations(x) * _rotations(x[::-1])).as_matrix(),
    "spatial.Rotation.__pow__": lambda x: (_rotations(x) ** 0.5).as_matrix(),
    "spatial.Rotation.inv": lambda x: _rotations(x).inv().as_matrix(),
    "spatial.Rotation.magnitude": lambda x: _rotations(x).magnitude(),
    "spatial.Rotation.mean": lambda x: _rotations(x).mean().as_matrix(),
    "spatial.Rotation.reduce": lambda x: _rotations(x).reduce().as_matrix(),
    "spatial.Rotation.__getitem__": lambda x: _rotations(x)[1:3].as_matrix(),
    "spatial.Rotation.__setitem__": lambda x: _setitem(_rotations(x),
                                                       _rotations(x[::-1])[0]).as_matrix(),
    "spatial.Rotation.align_vectors": lambda x: Rotation.align_vectors(
        x[:6].reshape(2, 3), x[6:].reshape(2, 3))[0].as_matrix(),
    "spatial.Rotation.__iter__": lambda x: _xp(x).stack([r.as_matrix() for r in _rotations(x)]),
    "spatial.Slerp.__init__": lambda x: Slerp(np.arange(4.0), _rotations(x))(
        np.array([0.5, 1.7, 2.2])).as_matrix(),
    "spatial.Slerp.__call__": lambda x: Slerp(np.arange(4.0), _rotations(x))(
        np.array([0.3, 2.9])).as_rotvec(),
    "spatial.normalize_dual_quaternion": lambda x: normalize_dual_quaternion(x[:8]),
    "spatial.RigidTransform.from_matrix": lambda x: RigidTransform.from_matrix(
        _transforms(x).as_matrix()).as_exp_coords(),
    "spatial.RigidTransform.from_rotation": lambda x: RigidTransform.from_rotation(
        _rotations(x)).as_matrix(),
    "spatial.RigidTransform.from_translation": lambda x: RigidTransform.from_translation(
        x.reshape(4, 3)).as_matrix(),
    "spatial.RigidTransform.from_components": lambda x: RigidTransform.from_components(
        x[::-1].reshape(4, 3), _rotations(x)).as_matrix(),
    "spatial.RigidTransform.from_exp_coords": lambda x: _transforms(x).as_matrix(),
    "spatial.RigidTransform.from_dual_quat": lambda x: RigidTransform.from_dual_quat(
        x[:8]).as_matrix(),
    "spatial.RigidTransform.concatenate": lambda x: RigidTransform.concatenate(
        [_transforms(x), _transforms(x[::-1])]).as_matrix(),
    "spatial.RigidTransform.mean": lambda x: _transforms(x).mean().as_matrix(),
    "spatial.RigidTransform.as_matrix": lambda x: _transforms(x).as_matrix(),
    "spatial.RigidTransform.as_components": lambda x: _transforms(x).as_components()[0],
    "spatial.RigidTransform.as_exp_coords": lambda x: RigidTransform.from_components(
        x[::-1].reshape(4, 3), _rotations(x)).as_exp_coords(),
    "spatial.RigidTransform.as_dual_quat": lambda x: _transforms(x).as_dual_quat(),
    "spatial.RigidTransform.__getitem__": lambda x: _transforms(x)[1].as_matrix(),
    "spatial.RigidTransform.__setitem__": lambda x: _setitem(
        _transforms(x), _transforms(x[::-1])[0]).as_matrix(),
    "spatial.RigidTransform.__mul__": lambda x: (_transforms(x) *
                                                 _transforms(x[::-1])).as_matrix(),
    "spatial.RigidTransform.__pow__": lambda x: (_transforms(x) ** 0.5).as_matrix(),
    "spatial.RigidTransform.inv": lambda x: _transforms(x).inv().as_matrix(),
    "spatial.RigidTransform.apply": lambda x: _transforms(x).apply(x[:6].reshape(2, 3)),
    "spatial.RigidTransform.__iter__": lambda x: _xp(x).stack(
        [t.as_matrix() for t in _transforms(x)]),
}

_WINDOW = "a window of an integer length; its shape parameters are Python scalars"
_ORDER = "takes an integer filter order alone: no array a gradient could flow from"

# Declared capable, but no function of a float array that a gradient could flow through.
NO_CASE = {
    **{f"signal.{name}": _WINDOW for name in (
        "general_cosine", "boxcar", "triang", "parzen", "bohman", "blackman", "nuttall",
        "blackmanharris", "flattop", "bartlett", "hann", "tukey", "barthann",
        "general_hamming", "hamming", "kaiser", "kaiser_bessel_derived", "gaussian",
        "general_gaussian", "chebwin", "cosine", "exponential", "taylor", "lanczos",
        "get_window")},
    "signal.buttap": _ORDER, "signal.besselap": _ORDER,
    "signal.savgol_coeffs": "takes integer window and polynomial orders",
    "signal.choose_conv_method": "returns a string (the method to use)",
    "cluster.to_tree": "returns a tree of Python ClusterNode objects",
    "cluster.is_monotonic": "returns a Python bool about a linkage matrix",
    "cluster.is_valid_im": "returns a Python bool about an inconsistency matrix",
    "cluster.is_valid_linkage": "returns a Python bool about a linkage matrix",
    "cluster.num_obs_linkage": "returns a Python int",
    "cluster.correspond": "returns a Python bool",
    "cluster.is_isomorphic": "compares two flat clusterings (integer labels): a bool",
    "spatial._promote": "a private helper",
    "spatial.Rotation.approx_equal": "returns booleans",
    "spatial.Rotation.__repr__": "returns a string",
    "spatial.RigidTransform.identity": "takes no array",
}
