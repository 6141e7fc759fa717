"""dloop: differentiable loops with data-dependent trip counts."""

from ._version import __version__ as __version__

from .api import grad as grad
from .api import jit as jit
from .api import memory_stats as memory_stats
from .api import value_and_grad as value_and_grad
from .api import vjp as vjp
from .config import config as config
from .errors import AdstackOverflowError as AdstackOverflowError
from .errors import DloopAttributeError as DloopAttributeError
from .errors import DloopError as DloopError
from .errors import DloopIndexError as DloopIndexError
from .errors import DloopMemoryError as DloopMemoryError
from .errors import DloopNotImplementedError as DloopNotImplementedError
from .errors import DloopTypeError as DloopTypeError
from .errors import DloopValueError as DloopValueError
from .errors import DloopWarning as DloopWarning
from .pytree import register_pytree_node as register_pytree_node
from .trace.loops import fori_loop as fori_loop
from .trace.loops import while_loop as while_loop

