"""The one user-facing error type, and the exit codes it maps to.

Every problem a user can fix (bad spec, unknown option, busy port, missing tool) is raised
as a HarnessError subclass; `harness.cli.main` turns it into one line on stderr and the
exit code below. Nothing else in the package calls sys.exit.
"""

EXIT_OK = 0
EXIT_THRESHOLD = 1  # a threshold or a regression failed
EXIT_BAD_INPUT = 2  # spec, option, inventory, dataset
EXIT_ENVIRONMENT = 3  # a server would not start, a tool is missing, a run was invalid


class HarnessError(Exception):
    """An error the user can act on. The message says what is wrong and how to fix it."""

    exit_code = EXIT_ENVIRONMENT

    def __init__(self, message: str, *, exit_code: int | None = None):
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class BadInput(HarnessError):
    """A spec, option, inventory or dataset is wrong (exit 2)."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentProblem(HarnessError):
    """The machine cannot do what was asked: a server, a port, a tool (exit 3)."""

    exit_code = EXIT_ENVIRONMENT


def did_you_mean(word, options) -> str:
    """' (did you mean 'x'?)' for the closest of `options`, or ''. The one close-match hint."""
    import difflib

    m = difflib.get_close_matches(str(word), [str(o) for o in options], n=1)
    return f" (did you mean {m[0]!r}?)" if m else ""
