"""Settings: words for debug, environment variables with bad values named at import,
unknown DLOOP_* variables warned about, config.override restoring the previous values."""

import os
import subprocess
import sys

import pytest

import dloop as dl


def python(code, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("DLOOP_")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**full, **env}, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("text, expected", [("no", False), ("off", False), ("0", False),
                                            ("false", False), ("", False), ("yes", True),
                                            ("1", True), ("ON", True)])
def test_debug_words(text, expected):
    rc, out, err = python("import dloop; print(dloop.config.debug)", DLOOP_DEBUG=text)
    assert rc == 0 and out.strip() == str(expected), err
    with dl.config.override(debug=text):
        assert dl.config.debug is expected


def test_debug_nonsense_is_an_error():
    with pytest.raises(dl.DloopValueError) as e:
        dl.config.update("debug", "maybe")  # E-debug
    assert "debug" in str(e.value) and __file__ in str(e.value)


@pytest.mark.parametrize("variable, text", [("DLOOP_ADSTACK_CAPACITY", "abc"),
                                            ("DLOOP_MAX_ADSTACK_BYTES", "lots"),
                                            ("DLOOP_NUM_THREADS", "0"),
                                            ("DLOOP_NUM_THREADS", "1e99"),
                                            ("DLOOP_BACKEND", "tpu")])
def test_bad_environment_value_names_the_variable(variable, text):
    rc, _, err = python("import dloop", **{variable: text})
    assert rc != 0
    last = err.strip().splitlines()[-1]
    assert last.startswith("dloop.errors.DloopValueError") and variable in last, err
    assert repr(text) in last and "unset" in last, err


def test_environment_numbers_in_scientific_notation():
    rc, out, err = python("import dloop; c = dloop.config; "
                          "print(c.max_adstack_bytes, c.adstack_capacity, c.num_threads)",
                          DLOOP_MAX_ADSTACK_BYTES="1e9", DLOOP_ADSTACK_CAPACITY="none",
                          DLOOP_NUM_THREADS="3")
    assert rc == 0 and out.split() == ["1000000000", "None", "3"], err


def test_unknown_variables_are_warned_about():
    rc, _, err = python("import dloop", DLOOP_DEBGU="1", DLOOP_WHATEVER="x")
    assert rc == 0
    assert "DLOOP_DEBGU is not a dloop setting" in err and "did you mean DLOOP_DEBUG" in err
    assert "DLOOP_WHATEVER is not a dloop setting" in err and "DLOOP_CACHE_DIR" in err


def test_override_restores_even_after_an_error():
    before = dl.config.num_threads, dl.config.adstack_capacity
    with pytest.raises(RuntimeError):
        with dl.config.override(num_threads=1, adstack_capacity=5):
            assert (dl.config.num_threads, dl.config.adstack_capacity) == (1, 5)
            raise RuntimeError("inside")
    assert (dl.config.num_threads, dl.config.adstack_capacity) == before


def test_override_checks_before_changing_anything():
    before = dl.config.num_threads
    with pytest.raises(dl.DloopValueError) as e:
        with dl.config.override(num_threads=2, adstack_capacity=-1):  # E-override
            pass
    assert __file__ in str(e.value) and "adstack_capacity" in str(e.value)
    assert dl.config.num_threads == before


def test_byte_limits_past_2_to_the_56_are_refused():
    """The heap's sizes are int64 sums, an interleaved tape up to 32x the exact one: a limit
    past 2^56 bytes could let them wrap negative and pass every check (an element then
    pushed outside any allocation)."""
    with dl.config.override(max_adstack_bytes=1 << 56):
        assert dl.config.max_adstack_bytes == 1 << 56
    for name in ("max_adstack_bytes", "cache_max_bytes"):
        with pytest.raises(dl.DloopValueError) as e:
            dl.config.update(name, (1 << 56) + 1)  # E-bytes-limit
        assert name in str(e.value) and "2**56" in str(e.value) and __file__ in str(e.value)
    with pytest.raises(dl.DloopValueError):
        with dl.config.override(max_adstack_bytes=1 << 64, adstack_capacity=1 << 60):
            pass


def test_thread_counts_past_1024_and_cache_paths_with_nul_are_refused():
    """num_threads=10**99 was accepted and failed at the first launch with a raw
    RuntimeError; a NUL byte in cache_dir failed at the first compile with a raw
    ValueError."""
    for name, value in (("num_threads", 1025), ("cache_dir", "cache\0dir")):
        with pytest.raises(dl.DloopValueError) as e:
            dl.config.update(name, value)  # E-setting-range
        assert name in str(e.value) and __file__ in str(e.value)
    with dl.config.override(num_threads=1024):
        assert dl.config.num_threads == 1024
