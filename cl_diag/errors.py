"""The one exception type for mistakes a user can make.

Library code raises :class:`UserError` with a one-paragraph message that names
the problem and the fix; the CLI turns it into that message on stderr and exit
status 2, with no traceback.
"""


class UserError(Exception):
    """A problem with the user's input (path, file, option, data), not a bug."""

    exit_code = 2
