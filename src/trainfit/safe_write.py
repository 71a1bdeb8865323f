"""Writing a file so that no reader, and no other trainfit run, ever sees half of it: the text goes to a temporary
file unique to this process in the destination's folder, then `os.replace` puts it in place in one step.

`os.replace` renames over the destination's directory entry: a symlink at the destination is replaced by the new
file, never written through, so the file it pointed at is left as it was."""

from __future__ import annotations

import os


def temp_name(folder: str, name: str) -> str:
    """A fresh hidden file name next to `name` in `folder`, unique to this process and call."""
    return os.path.join(folder, f".{name}.{os.getpid()}.{os.urandom(6).hex()}.tmp")


def write_text_atomic(path: str, text: str, mode: int | None = None) -> str:
    """Write `text` (UTF-8) to `path` atomically; returns `path`. `mode` (e.g. 0o755) is set on the new file;
    without it a regular file being replaced keeps its permissions, and a new one gets 0o666 less the umask."""
    folder = os.path.dirname(os.path.abspath(path))
    if mode is None:
        try:
            st = os.stat(path, follow_symlinks=False)
            import stat as _stat

            if _stat.S_ISREG(st.st_mode):
                mode = _stat.S_IMODE(st.st_mode)
        except OSError:
            pass
    while True:
        tmp = temp_name(folder, os.path.basename(path))
        try:  # O_EXCL: mkstemp's guarantee, with the umask applied by the kernel as for any new file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    return path
