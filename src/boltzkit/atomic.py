"""Atomic file writes: a file is replaced completely or not at all.

The bytes go to a temporary file in the target's directory, which is flushed, fsynced and then
renamed over the target with :func:`os.replace`. A crash or an error midway leaves the old file
untouched and no temporary file behind. A process killed outright (SIGKILL, power loss) cannot
remove its temporary file; the next successful write of the same target removes any of its
temporary files untouched for :data:`STALE_TEMP_SECONDS` (a live writer touches its own far more
often). Model files, checkpoints and result files (JSON, CSV) are all written this way.

This module is on the ground floor: it imports nothing from boltzkit but :mod:`boltzkit.errors`.
"""

from __future__ import annotations

import contextlib
import glob
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from boltzkit.errors import BoltzkitError

__all__ = ["PathLike", "atomic_open", "atomic_write_bytes", "atomic_write_text"]

PathLike = str | os.PathLike[str]

STALE_TEMP_SECONDS = 3600.0
"""A temporary file of a target untouched this long is a killed writer's, removed by the next write."""


def _temp_name(target: Path, token: str) -> str:
    """The name of one of ``target``'s temporary files (``token`` ``"*"``: a glob for all of them,
    the target's own name escaped)."""
    name = glob.escape(target.name) if token == "*" else target.name
    return f".{name}.{token}.tmp"


def _create_temp(target: Path, error_cls: type[BoltzkitError], parents: bool) -> tuple[Path, int]:
    """Create a fresh temporary file next to ``target``; return its path and an open descriptor.

    The file is created with mode ``0o666`` minus the umask (as an ordinary new file would be),
    so the renamed file has the usual permissions.
    """
    directory = target.parent
    if parents and not directory.exists():
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise error_cls(
                "cannot create the directory for the file",
                got=f"{directory} ({exc.strerror or exc})",
            ) from exc
    if not directory.is_dir():
        raise error_cls(
            "cannot write the file: its directory does not exist",
            got=str(target),
            hint=f"create the directory first (mkdir -p {directory}).",
        )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = directory / _temp_name(target, secrets.token_hex(6))
        try:
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:
            continue
        except OSError as exc:
            raise error_cls(
                "cannot create a file in the target directory",
                got=f"{target} ({exc.strerror or exc})",
                hint="check that the directory is writable and the disk is not full.",
            ) from exc
    raise error_cls("could not find a free temporary file name", got=str(directory))


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _remove_stale_temps(target: Path) -> None:
    """Remove the temporary files of ``target`` that a killed writer left (untouched for
    :data:`STALE_TEMP_SECONDS`)."""
    now = time.time()
    for tmp in target.parent.glob(_temp_name(target, "*")):
        with contextlib.suppress(OSError):
            if now - tmp.stat().st_mtime > STALE_TEMP_SECONDS:
                os.unlink(tmp)


def _fsync_directory(directory: Path) -> None:
    """Make a rename durable on POSIX; a no-op where directories cannot be opened (Windows)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def _atomic_open(
    path: PathLike,
    mode: str,
    *,
    encoding: str | None,
    newline: str | None,
    error_cls: type[BoltzkitError],
    parents: bool = False,
) -> Iterator[IO[Any]]:
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open supports modes 'w' and 'wb', got {mode!r}")
    target = Path(path)
    if target.is_dir():
        raise error_cls("cannot write the file: the path is a directory", got=str(target))
    tmp, fd = _create_temp(target, error_cls, parents)
    try:
        if mode == "wb":
            handle: IO[Any] = os.fdopen(fd, "wb")
        else:
            handle = os.fdopen(fd, "w", encoding=encoding, newline=newline)
    except BaseException:
        os.close(fd)
        _unlink_quietly(tmp)
        raise
    committed = False
    try:
        yield handle
        try:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        except OSError as exc:
            raise error_cls(
                "could not write the file to disk",
                got=f"{target} ({exc.strerror or exc})",
                hint="check free disk space and permissions; the previous file, if any, is unchanged.",
            ) from exc
        try:
            os.replace(tmp, target)
        except OSError as exc:
            raise error_cls(
                "could not move the finished file into place",
                got=f"{target} ({exc.strerror or exc})",
                hint="check permissions on the target; the previous file, if any, is unchanged.",
            ) from exc
        committed = True
    finally:
        if not committed:
            with contextlib.suppress(OSError):
                handle.close()
            _unlink_quietly(tmp)
    _fsync_directory(target.parent)
    _remove_stale_temps(target)


def atomic_open(
    path: PathLike,
    mode: str = "w",
    *,
    encoding: str | None = "utf-8",
    newline: str | None = None,
    parents: bool = False,
    error_cls: type[BoltzkitError] = BoltzkitError,
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open ``path`` for writing so that it is replaced atomically when the block ends.

    Writes go to a temporary file in the same directory. On normal exit the file is flushed,
    fsynced and renamed over ``path`` with :func:`os.replace`; if the block raises (or the
    process dies), ``path`` keeps its previous content and the temporary file is removed (a
    killed process's, by the next successful write of ``path``).

    Parameters
    ----------
    path
        The file to (re)write.
    mode
        ``"w"`` (text) or ``"wb"`` (binary).
    encoding, newline
        As for :func:`open`, text mode only. Use ``newline=""`` for :mod:`csv` writers.
    parents
        Create missing parent directories; otherwise a missing directory is an error.
    error_cls
        The :class:`~boltzkit.errors.BoltzkitError` subclass raised when writing fails (model
        files raise :class:`~boltzkit.errors.ModelFileError`).

    Returns
    -------
    contextlib.AbstractContextManager
        Yields the open file object.

    Raises
    ------
    BoltzkitError
        When the directory is missing or not writable, or the data cannot be flushed, synced or
        renamed into place. An exception raised inside the block propagates unchanged.

    Examples
    --------
    >>> import csv, tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "table.csv"
    >>> with atomic_open(out, newline="") as f:
    ...     _ = csv.writer(f).writerow(["beta", "log_w"])
    >>> out.read_text().strip()
    'beta,log_w'
    """
    return _atomic_open(
        path,
        mode,
        encoding=encoding if mode == "w" else None,
        newline=newline if mode == "w" else None,
        error_cls=error_cls,
        parents=parents,
    )


def atomic_write_bytes(
    path: PathLike,
    data: bytes,
    *,
    parents: bool = False,
    error_cls: type[BoltzkitError] = BoltzkitError,
) -> Path:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path
        Target file.
    data
        The complete new content.
    parents
        Create missing parent directories; otherwise a missing directory is an error.
    error_cls
        As for :func:`atomic_open`.

    Returns
    -------
    Path
        ``path``.
    """
    with atomic_open(path, "wb", parents=parents, error_cls=error_cls) as f:
        f.write(data)
    return Path(path)


def atomic_write_text(path: PathLike, text: str, *, encoding: str = "utf-8", parents: bool = False) -> Path:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_open`).

    Parameters
    ----------
    path
        Target file.
    text
        The complete new content, written as is (no newline translation).
    encoding
        Text encoding.
    parents
        Create missing parent directories; otherwise a missing directory is an error.

    Returns
    -------
    Path
        ``path``.
    """
    with atomic_open(path, "w", encoding=encoding, newline="", parents=parents) as f:
        f.write(text)
    return Path(path)
