"""SIGTERM handled like Ctrl-C, and a child process that stops when its parent is gone.

A scheduler or ``kill`` stops a program with SIGTERM, whose Python default ends the process
with no ``finally`` run. :func:`interrupts` turns it into :class:`Terminated`, a
``KeyboardInterrupt`` raised where the program is, so every cleanup written for Ctrl-C serves
SIGTERM too; the exit status is 128 + the signal (130, 143: :func:`exit_status`). A repeated
signal within :data:`GRACE` seconds, while the cleanup runs, is ignored. :func:`watch_parent`
makes a child (a sweep's cell) stop as on SIGTERM when its parent disappears, even by SIGKILL
(``PR_SET_PDEATHSIG`` on Linux, and a thread polling the parent's id).
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

__all__ = [
    "GRACE",
    "INTERRUPT_STATUS",
    "TERMINATE_STATUS",
    "Terminated",
    "exit_status",
    "interrupts",
    "received",
    "watch_parent",
]

#: exit status of a command stopped by SIGINT (Ctrl-C): 128 + 2
INTERRUPT_STATUS = 128 + signal.SIGINT
#: exit status of a command stopped by SIGTERM: 128 + 15
TERMINATE_STATUS = 128 + signal.SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: raised where the program was, like Ctrl-C's KeyboardInterrupt."""


def exit_status(error: BaseException) -> int:
    """143 for :class:`Terminated`, 130 for any other KeyboardInterrupt."""
    return TERMINATE_STATUS if isinstance(error, Terminated) else INTERRUPT_STATUS


#: seconds after an interrupt during which a repeated signal is ignored (``once=True``)
GRACE = 10.0

#: (signal, time.monotonic()) of each signal :func:`interrupts` turned into an exception
_received: list[tuple[int, float]] = []


def received() -> int | None:
    """The first signal :func:`interrupts` turned into an exception in this process, if any."""
    return _received[0][0] if _received else None


#: the signal whose exception a finalizer swallowed, to be raised again (:func:`_unraisable`)
_swallowed: list[int] = []


def _raise(signum: int, once: bool) -> None:
    now = time.monotonic()
    again = bool(_swallowed) and _swallowed[-1] == signum
    if again:
        _swallowed.clear()
    elif once and _received and now - _received[-1][1] < GRACE:
        return  # the first interrupt's cleanup is running: let it finish
    _received.append((signum, now))
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _send_later(signum: int) -> None:
    time.sleep(0.01)
    os.kill(os.getpid(), signum)


def _unraisable(hook: Callable[[Any], object]) -> Callable[[Any], object]:
    """``sys.unraisablehook`` for the block of :func:`interrupts`: an interrupt the handler raised
    inside a finalizer (a ``__del__``, a weakref callback) is not an error Python may print
    and drop (it printed "Exception ignored ... Terminated" and the command went on running):
    it is sent again, and raised where the program is once the finalizer has returned. Any
    other unraisable exception goes to ``hook``."""

    def unraisable(info: Any) -> object:
        if isinstance(info.exc_value, KeyboardInterrupt) and _received:
            signum = _received[-1][0]
            _swallowed.append(signum)
            # from another thread a moment later, so that the handler runs after this hook and
            # the finalizer have returned (raised in either, it would be dropped again); the
            # thread is not waited for, which would let the signal in here
            _thread.start_new_thread(_send_later, (signum,))
            return None
        return hook(info)

    return unraisable


@contextlib.contextmanager
def interrupts(*, sigint: bool = False, once: bool = True) -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (and, with ``sigint``, SIGINT raises
    KeyboardInterrupt through the same handler, so that ``once`` applies to both). The previous
    handlers come back afterwards. Outside the main thread (where Python cannot install a
    handler) the block runs with the handlers as they are."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: FrameType | None) -> None:
        _raise(signum, once)

    wanted = [signal.SIGTERM] + ([signal.SIGINT] if sigint else [])
    previous = {signum: signal.signal(signum, handler) for signum in wanted}
    hook = sys.unraisablehook
    sys.unraisablehook = _unraisable(hook)
    _received.clear()
    _swallowed.clear()
    try:
        yield
    finally:
        sys.unraisablehook = hook
        for signum, old in previous.items():
            signal.signal(signum, old)


#: prctl's option that sends a signal to this process when its parent thread ends (Linux)
_PR_SET_PDEATHSIG = 1


def watch_parent(parent: int, *, every: float = 0.5) -> None:
    """Send SIGTERM to this process as soon as ``parent`` (the id of the process that started
    it) is gone, so that it stops as on SIGTERM (see :func:`interrupts`)."""
    if sys.platform.startswith("linux"):
        import ctypes  # here: only a sweep's cell process watches its parent

        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    def orphaned() -> bool:
        return os.getppid() != parent

    if orphaned():  # the parent died before the death signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def poll() -> None:
        while not orphaned():
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=poll, name="cl-diag-watch-parent", daemon=True).start()
