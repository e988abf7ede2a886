"""`python -m harness` and the `harness` console script (pyproject.toml: harness.__main__:main).

The command line imports a good deal before its signal handlers are installed
(harness.cli.main: harness.base.signals.install); a Ctrl-C in that second is one line and
exit 130, never Python's traceback. Nothing is heavy here: this module is what runs first."""

import signal
import sys


def main() -> None:
    try:
        cli_main = _import_cli()
        try:
            cli_main()
        except KeyboardInterrupt as e:  # before harness.cli.main's handlers take over, or after they settle
            _interrupted(e)
    finally:
        # CPython (3.11) remembers a KeyboardInterrupt that left any exec() of a string (a
        # dataclass's or namedtuple's generated methods, while a module is imported) and, at
        # exit, kills the process with SIGINT (exit -2) whatever exit code was asked for.
        # Evaluating a string clears that memory: the exit code is the one given.
        exec("None")


def _import_cli():
    """harness.cli.main, imported with a Ctrl-C held: a Ctrl-C meanwhile is only noted (an
    exception in the middle of an import leaves a half-made module, or lands in a callback
    where Python only prints it), and answered once the import is done: one line, exit 130."""
    held = []
    try:
        old = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    except ValueError:  # not the main thread: nothing to hold
        old = None
    try:
        from harness.cli import main as cli_main  # here, with a Ctrl-C held: the import takes a second
    except KeyboardInterrupt as e:  # a Ctrl-C that came before the handler above
        _interrupted(e)
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
    if held:
        _interrupted(KeyboardInterrupt())
    return cli_main


def _interrupted(e: BaseException) -> None:
    """One line and 128 + the signal's number (130 for Ctrl-C), as harness.cli does."""
    name = getattr(e, "signal_name", "SIGINT")
    try:
        sys.stderr.write(f"interrupted ({name})\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # the terminal is gone
        pass
    sys.exit(128 + int(getattr(signal, name, signal.SIGINT)))


if __name__ == "__main__":
    main()
