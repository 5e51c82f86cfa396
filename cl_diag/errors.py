"""The one exception type for mistakes a user can make.

Library code raises :class:`UserError` with a one-paragraph message that names
the problem and the fix; the CLI turns it into that message on stderr and exit
status 2, with no traceback.
"""


class UserError(Exception):
    """A problem with the user's input (path, file, option, data), not a bug."""

    exit_code = 2


class StorageFullError(UserError, OSError):
    """A write failed because the storage is full (disk, quota or file-size limit).

    A :class:`UserError` (message, exit 2, no traceback) that is still an ``OSError``, so
    code that handles failed writes as OSErrors keeps working. ``reason`` is the system's
    words for it (e.g. "No space left on device")."""

    reason: str = "No space left on device"


class InputWarning(UserWarning):
    """Something about the user's input that the run goes on with, though its numbers may not
    be the ones meant (an image size that differs from the one the model was trained at, a
    size guessed for lack of a record): one line naming what was done and the fix. The CLI
    prints it as ``warning: ...`` on stderr; in Python it is a :mod:`warnings` warning."""
