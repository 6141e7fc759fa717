import os
import sys

# SciPy reads SCIPY_ARRAY_API once, when it is first imported.
os.environ["SCIPY_ARRAY_API"] = "1"
if "scipy" in sys.modules and not sys.modules["scipy._lib._array_api"].SCIPY_ARRAY_API:
    raise RuntimeError("scipy was imported before tests/clients set SCIPY_ARRAY_API=1; run "
                       "tests/clients in its own pytest process")
