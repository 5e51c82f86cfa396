"""``python -m cl_diag`` (and ``torchrun -m cl_diag``) and the ``cl-diag`` console script.

Starting takes seconds (torch and the commands are imported first); an interrupt then, Ctrl-C
or SIGTERM, ends with one line and exit status 130 (143 for SIGTERM) like an interrupt at any
later moment, not with a traceback of the import under way. So this module imports nothing
heavy before it has taken over both signals.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Run the command line (:func:`cl_diag.cli.main`)."""
    from cl_diag.io.signals import exit_status, interrupts

    try:
        with interrupts():  # SIGTERM during the imports below is an interrupt too
            from cl_diag.cli import main as run
    except KeyboardInterrupt as exc:
        sys.stderr.write("interrupted: cl-diag stopped while starting; nothing was changed.\n")
        sys.exit(exit_status(exc))
    run()


if __name__ == "__main__":
    main()
