"""``python -m cl_diag`` (and ``torchrun -m cl_diag``) run the CLI."""

from cl_diag.cli import main

if __name__ == "__main__":
    main()
