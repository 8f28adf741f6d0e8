"""Writing a small file so that a crash leaves its old version or its new one, never half.

The text goes to a temporary file in the same folder (owner-only, as ``mkstemp`` makes it), is
flushed to disk, and is renamed over the old file in one step.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomically"]


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``, creating its folder; readable by the owner only.

    Raises OSError when the folder or the file cannot be written (the old file is then kept).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
