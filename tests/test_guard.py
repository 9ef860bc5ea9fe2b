"""The shared safety layer (nlsepy.common.guard) and the process-wide thread count."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import nlsepy as nl
from nlsepy.common import files as _files
from nlsepy.common import guard as _guard

from _helpers import LATENCY_BOUND, check_interrupt_mechanism, chunk_log


def _sigint_after(seconds):
    """Send SIGINT to this process from a timer thread after `seconds`."""
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def test_chunked_books_every_chunk_and_stops_on_sigint():
    """A SIGINT during chunked(1e9 units of 2 ms): the chunks were sized
    from the measured speed, and the KeyboardInterrupt came at the first
    chunk boundary after the signal (check_interrupt_mechanism), not
    after a wall-clock time."""
    done = []
    sent = []

    def work(k):
        time.sleep(0.002 * k)
        done.append(k)

    timer = threading.Timer(0.3, lambda: (sent.append(time.perf_counter()),
                                          os.kill(os.getpid(), signal.SIGINT)))
    with chunk_log() as calls:
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            _guard.chunked(10**9, work)
        caught = time.perf_counter()
    timer.join()
    check_interrupt_mechanism(calls, sent[0], caught)
    assert caught - sent[0] < LATENCY_BOUND
    assert [c[3] for c in calls] == done and 0 < sum(done) < 10**9
    # the chunks grew from 1 towards CHUNK_SECONDS' worth and no further
    assert done[0] == 1 and max(done) <= 8 * 0.1 / 0.002
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_chunked_runs_to_the_end_and_stops_early():
    seen = []
    _guard.chunked(1000, lambda k: seen.append(k))
    assert sum(seen) == 1000
    seen.clear()
    _guard.chunked(1000, lambda k: seen.append(k) or (sum(seen) < 10) or False)
    assert 10 <= sum(seen) < 1000


def test_deferred_sigint_keeps_a_user_handler():
    got = []
    old = signal.signal(signal.SIGINT, lambda s, f: got.append(s))
    try:
        with _guard.deferred_sigint():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
            assert not got  # held back
        assert got == [signal.SIGINT]
        assert signal.getsignal(signal.SIGINT) is not None and got
    finally:
        signal.signal(signal.SIGINT, old)


def test_deferred_sigint_not_lost_while_the_handler_is_put_back(monkeypatch):
    """A SIGINT that lands while the block's end puts the previous handler
    back still raises (a read of the flag before the restore lost it, and a
    CLI run of many short calls then went on after Ctrl-C)."""
    real = signal.signal

    def landing(sig, handler):
        current = signal.getsignal(sig)
        if isinstance(current, _guard._SigintFlag):  # the restore: a signal lands first
            current(signal.SIGINT, None)
        return real(sig, handler)

    monkeypatch.setattr(_guard.signal, "signal", landing)
    with pytest.raises(KeyboardInterrupt):
        with _guard.deferred_sigint():
            pass
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_checkpoint_round_trip_and_refusals(tmp_path):
    p = tmp_path / "a.npz"
    psi = np.arange(6, dtype=np.complex128).reshape(2, 3)
    _files.save_checkpoint(p, "Thing", psi=psi, t=1.5, n=3, name="x", flag=True)
    keys = {"psi": _files.Key("array", "c", ndim=(2,)), "t": _files.Key("float"),
            "n": _files.Key("int"), "name": _files.Key("str", choices=("x", "y")),
            "flag": _files.Key("bool"), "extra": _files.Key("float", optional=True)}
    d = _files.load_checkpoint(p, "Thing", keys)
    assert np.array_equal(d["psi"], psi) and d["t"] == 1.5 and d["n"] == 3
    assert d["name"] == "x" and d["flag"] is True and "extra" not in d
    with pytest.raises(ValueError, match="checkpoint of Thing, not of Other"):
        _files.load_checkpoint(p, "Other", keys)
    with pytest.raises(ValueError, match="lacks the entry 'missing'"):
        _files.load_checkpoint(p, "Thing", {"missing": _files.Key("float")})
    with pytest.raises(ValueError, match="'psi' has 2 dimensions"):
        _files.load_checkpoint(p, "Thing", {"psi": _files.Key("array", "c", ndim=(3,))})
    _files.save_checkpoint(p, "Thing", psi=psi, t=np.inf, n=3, name="x", flag=True)
    with pytest.raises(ValueError, match="'t' is not finite"):
        _files.load_checkpoint(p, "Thing", keys)
    bad = psi.copy()
    bad[0, 0] = np.nan
    _files.save_checkpoint(p, "Thing", psi=bad, t=0.0, n=3, name="z", flag=True)
    with pytest.raises(ValueError, match="'psi' contains non-finite"):
        _files.load_checkpoint(p, "Thing", keys)
    with pytest.raises(ValueError, match="must be one of"):
        _files.load_checkpoint(p, "Thing", {"name": keys["name"]})


@pytest.mark.parametrize("content", [b"", b"garbage" * 10, None, "objects", "plain"])
def test_checkpoint_loader_refuses_what_is_not_one(tmp_path, content):
    p = tmp_path / "c.npz"
    if content is None:  # truncated archive
        _files.save_checkpoint(p, "Thing", psi=np.zeros(1000))
        p.write_bytes(p.read_bytes()[:300])
    elif content == "objects":
        np.savez(p, psi=np.array([{"a": 1}], dtype=object))
    elif content == "plain":
        np.savez(p, psi=np.zeros(3))
    else:
        p.write_bytes(content)
    with pytest.raises(ValueError) as info:
        _files.load_checkpoint(p, "Thing", {"psi": _files.Key("array")})
    msg = str(info.value)
    assert str(p) in msg
    assert "allow_" not in msg  # no advice to load unsafely
    with pytest.raises(FileNotFoundError):
        _files.load_checkpoint(tmp_path / "none.npz", "Thing", {})


def test_require_memory():
    _guard.require_memory(1024, "a small thing")
    with pytest.raises(MemoryError, match=r"a huge thing \(N = 1e30\) needs .* of memory"):
        _guard.require_memory(1e30, "a huge thing (N = 1e30)")
    assert _guard.format_bytes(3 * 2**30) == "3.0 GiB"


def test_set_num_threads_is_process_wide_and_checked():
    from nlsepy import _core
    before = nl.get_num_threads()
    try:
        nl.set_num_threads(np.int32(1))
        seen = []
        th = threading.Thread(target=lambda: seen.append(_core.threads_in_region()))
        th.start()
        th.join()
        assert seen == [1] and _core.threads_in_region() == 1
        if nl.build_info().get("openmp", True) and nl.max_threads() >= 2:
            nl.set_num_threads(2)
            th = threading.Thread(target=lambda: seen.append(_core.threads_in_region()))
            th.start()
            th.join()
            assert seen[-1] == 2
        for n in (nl.max_threads() + 1, 40000, 65536, 0, -1):
            with pytest.raises(ValueError, match=r"n \(num_threads\) must be in"):
                nl.set_num_threads(n)
        for n in (1.0, True, "2", None):
            with pytest.raises(TypeError):
                nl.set_num_threads(n)
    finally:
        nl.set_num_threads(before)
