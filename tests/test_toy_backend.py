"""A backend added through the backend table alone (tests/toy_backend.py: one row, no other
file) is picked up by config, the factory and the cross-backend suites, and passes them."""

import os
import re
import subprocess
import sys

SUITES = ["tests/features/test_fori_loop_grad.py", "tests/features/test_while_loop_grad.py",
          "tests/features/test_collective_loops.py", "tests/stages/test_kernels.py",
          "tests/adstack/test_overflow.py", "tests/adstack/test_memory.py"]


def test_toy_backend_passes_the_cross_backend_suites():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, DLOOP_TEST_TOY_BACKEND="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             # a child process of its own would not have the toy row
                             "-k", "toy and not child_process", *SUITES], cwd=root, env=env,
                            capture_output=True,
                            text=True, timeout=900)
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0, result.stdout[-4000:]
    passed = int(re.search(r"(\d+) passed", summary).group(1))
    assert passed >= 40 and "skipped" not in summary, summary
