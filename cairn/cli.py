"""The ``cairn`` command's entry point; the commands live in :mod:`cairn.commands`."""

from cairn.commands.main import main

__all__ = ["main"]

if __name__ == "__main__":  # pragma: no cover
    main()
