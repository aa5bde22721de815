"""Model files on disk: download with resume and checksum, list, verify before first use, remove.

A download goes to ``<filename>.part`` next to its destination; an interrupted one resumes with an HTTP
``Range`` request (guarded by ``If-Range`` with the server's ETag, so a changed file restarts cleanly).
The finished file is checked against the network's sha256 and size, fsynced, and renamed into place;
a file whose checksum is wrong is deleted and refused. ``<filename>.sha256`` records a verified checksum
so that a later start does not hash gigabytes again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import httpx

from inference.errors import ChecksumMismatchError, DownloadError

if TYPE_CHECKING:
    from protocol.models import AcceptedModel

__all__ = [
    "InstalledModel",
    "ModelStore",
    "DownloadCancelled",
    "download_file",
    "download_model",
    "sha256_file",
]

log = logging.getLogger(__name__)
_CHUNK = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")
Progress = Callable[[int, int], None]


class _Cancel(Protocol):
    def is_set(self) -> bool: ...


class DownloadCancelled(DownloadError):
    """The user stopped the download; the ``.part`` file is kept and the next try resumes it."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def download_file(
    http: httpx.Client,
    url: str,
    dest: Path,
    *,
    sha256: str,
    size: int | None = None,
    progress: Progress | None = None,
    cancel: _Cancel | None = None,
    retries: int = 5,
) -> Path:
    """Download ``url`` to ``dest`` (resuming a ``.part`` left by an earlier try) and check its sha256."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    meta = dest.with_name(dest.name + ".part.json")
    failures = 0
    while True:
        try:
            total = _fetch(http, url, part, meta, size, progress, cancel)
            break
        except (httpx.TransportError, _ShortBody) as exc:
            failures += 1
            have = part.stat().st_size if part.exists() else 0
            log.info("download of %s interrupted at %d bytes (%s); retry %d", dest.name, have, exc, failures)
            if failures > retries:
                raise DownloadError(
                    f"Downloading {dest.name} failed after {retries} retries ({exc}); "
                    "run the download again to resume it."
                ) from exc
    got = part.stat().st_size
    digest = sha256_file(part)
    if digest != sha256 or (size is not None and got != size):
        part.unlink(missing_ok=True)
        meta.unlink(missing_ok=True)
        raise ChecksumMismatchError(
            f"{dest.name} does not match the published checksum (got sha256 {digest[:12]}…, "
            f"{got} bytes; expected {sha256[:12]}…, {size if size is not None else total} bytes); "
            "the file was deleted. Try again, or tell the network's operator."
        )
    with part.open("rb+") as f:
        os.fsync(f.fileno())
    os.replace(part, dest)
    meta.unlink(missing_ok=True)
    _write_checksum(dest, digest)
    return dest


class _ShortBody(Exception):
    """The server closed the connection before sending what it announced."""


def _fetch(
    http: httpx.Client,
    url: str,
    part: Path,
    meta: Path,
    size: int | None,
    progress: Progress | None,
    cancel: _Cancel | None,
) -> int:
    """One attempt: append to ``part`` from where it ends; return the file's total size."""
    have = part.stat().st_size if part.exists() else 0
    etag = _read_etag(meta) if have else None
    if size is not None and have > size:
        part.unlink()
        have, etag = 0, None
    headers = {"Accept-Encoding": "identity"}
    if have:
        headers["Range"] = f"bytes={have}-"
        if etag:
            headers["If-Range"] = etag
    with http.stream("GET", url, headers=headers) as resp:
        if resp.status_code == 416 and have:
            m = re.match(r"bytes \*/(\d+)", resp.headers.get("content-range", ""))
            if m and int(m.group(1)) == have:
                return have  # already complete
            part.unlink()
            raise _ShortBody("the server refused the resume range; starting over")
        if resp.status_code not in (200, 206):
            raise DownloadError(f"The server answered {resp.status_code} for {url}; try again later.")
        if resp.status_code == 206:
            m = _CONTENT_RANGE.match(resp.headers.get("content-range", ""))
            if not m or int(m.group(1)) != have:
                raise DownloadError(f"The server sent a wrong byte range for {url}.")
            total = int(m.group(3)) if m.group(3) != "*" else (size or 0)
            mode = "ab"
        else:  # a whole file: the server ignored or refused the range (or the file changed)
            have = 0
            total = int(resp.headers.get("content-length") or size or 0)
            mode = "wb"
        if resp.headers.get("etag"):
            meta.write_text(json.dumps({"etag": resp.headers["etag"]}))
        expected_end = total
        done = have
        with part.open(mode) as out:
            for chunk in resp.iter_bytes():  # as it arrives: a dropped connection loses nothing
                out.write(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(done, total)
                if cancel is not None and cancel.is_set():
                    raise DownloadCancelled(
                        f"Download of {part.name[:-5]} stopped; it will resume next time."
                    )
        if expected_end and done < expected_end:
            raise _ShortBody(f"got {done} of {expected_end} bytes")
        return total


def _read_etag(meta: Path) -> str | None:
    try:
        return str(json.loads(meta.read_text())["etag"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _checksum_file(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_checksum(path: Path, digest: str) -> None:
    tmp = _checksum_file(path).with_suffix(".tmp")
    tmp.write_text(f"{digest}  {path.stat().st_size}\n")
    os.replace(tmp, _checksum_file(path))


def download_model(
    model: AcceptedModel,
    url: str,
    models_dir: Path,
    *,
    http: httpx.Client,
    progress: Progress | None = None,
    cancel: _Cancel | None = None,
) -> Path:
    """Download an accepted model from an absolute ``url`` into ``models_dir`` (or return it if verified)."""
    return ModelStore(models_dir).download(
        model.filename, url, sha256=model.sha256, size=model.size, http=http, progress=progress, cancel=cancel
    )


@dataclass(frozen=True)
class InstalledModel:
    path: Path
    size: int
    sha256: str | None  # known when it was verified (downloaded here or checked once)

    @property
    def filename(self) -> str:
        return self.path.name


class ModelStore:
    """The GGUF files in one folder (the home's ``models/``)."""

    def __init__(self, models_dir: Path) -> None:
        self.dir = Path(models_dir)

    def installed(self) -> list[InstalledModel]:
        if not self.dir.is_dir():
            return []
        out = []
        for path in sorted(self.dir.glob("*.gguf")):
            size = path.stat().st_size
            out.append(InstalledModel(path=path, size=size, sha256=self._recorded(path, size)))
        return out

    def partial(self) -> list[tuple[str, int]]:
        """Downloads that were interrupted: (filename, bytes so far)."""
        if not self.dir.is_dir():
            return []
        return [(p.name[: -len(".part")], p.stat().st_size) for p in sorted(self.dir.glob("*.gguf.part"))]

    def path_for(self, filename: str) -> Path:
        if "/" in filename or "\\" in filename or filename.startswith("."):
            raise DownloadError(f"{filename!r} is not a plain file name.")
        return self.dir / filename

    def verified_path(self, filename: str, sha256: str, size: int) -> Path | None:
        """The model's path once its checksum is known to be right (hashing it the first time), else None.

        A present file with a wrong checksum raises ChecksumMismatchError: it must not be used.
        """
        path = self.path_for(filename)
        if not path.is_file() or path.stat().st_size != size:
            return None
        if self._recorded(path, size) == sha256:
            return path
        digest = sha256_file(path)
        if digest != sha256:
            raise ChecksumMismatchError(
                f"{filename} on disk does not match the network's checksum; remove it with "
                f"`tracemill models remove {filename}` and download it again."
            )
        _write_checksum(path, digest)
        return path

    def download(
        self,
        filename: str,
        url: str,
        *,
        sha256: str,
        size: int,
        http: httpx.Client,
        progress: Progress | None = None,
        cancel: _Cancel | None = None,
    ) -> Path:
        existing = self.verified_path(filename, sha256, size)
        if existing is not None:
            return existing
        return download_file(
            http, url, self.path_for(filename), sha256=sha256, size=size, progress=progress, cancel=cancel
        )

    def remove(self, filename: str) -> bool:
        """Delete a model and its side files; True when something was deleted."""
        path = self.path_for(filename)
        removed = False
        for p in (
            path,
            _checksum_file(path),
            path.with_name(path.name + ".part"),
            path.with_name(path.name + ".part.json"),
        ):
            if p.exists():
                p.unlink()
                removed = True
        return removed

    @staticmethod
    def _recorded(path: Path, size: int) -> str | None:
        try:
            digest, recorded_size = _checksum_file(path).read_text().split()
        except (OSError, ValueError):
            return None
        return digest if int(recorded_size) == size else None
