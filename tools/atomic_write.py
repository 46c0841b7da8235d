"""Crash-safe file replacement for the Python writers (exported models, test checkpoints,
data): the bytes go to a temporary file beside the target, are fsynced and renamed over it,
then the directory is fsynced, as src/util/atomic_file.cpp does. A kill or a full disk leaves
the old file or the new one, never a torn one.

    with atomic_open(path, "w") as f:   # or "wb"
        f.write(...)
"""
import contextlib
import os
import tempfile


@contextlib.contextmanager
def atomic_open(path, mode="w", **kwargs):
    if mode not in ("w", "wb"):
        raise ValueError("atomic_open writes whole files: mode 'w' or 'wb', not %r" % mode)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp", dir=d)
    try:
        with os.fdopen(fd, mode, **kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
