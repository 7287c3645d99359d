"""Where a study's results live: one JSON file per finished fit, written atomically.

A fit's file appears only when the fit has finished (write to a temporary file, then
:func:`os.replace`), so a study killed at any moment -- SIGINT, SIGKILL, a lost worker -- leaves
every finished fit whole and no partial one; a rerun skips the finished fits and runs the rest.
An interrupted write removes its temporary file; a SIGKILL between a write and its rename cannot,
and the rerun removes what it left (:meth:`FitStore.claim`).
``study.json`` records the study's settings: a folder holding fits made with other settings is
refused rather than mixed.

Examples
--------
>>> import tempfile
>>> store = FitStore(tempfile.mkdtemp())
>>> store.write({"key": "a", "value": 1})
>>> store.load("a")
{'key': 'a', 'value': 1}
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

__all__ = ["FitStore", "SettingsMismatch"]


class SettingsMismatch(ValueError):
    """The output folder holds a study made with other settings."""

    def __init__(self, path: Path, differences: dict):
        self.path = path
        self.differences = differences
        text = ", ".join(f"{k}={old!r} there, {new!r} now" for k, (old, new) in differences.items())
        super().__init__(
            f"{path} was made with other settings ({text}); use another output "
            "folder or the same settings to resume."
        )


class FitStore:
    """A folder of finished fits: ``<folder>/fits/<key>.json`` and ``<folder>/study.json``."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.fits = self.folder / "fits"

    def path(self, key: str) -> Path:
        """The file of the fit ``key``."""
        return self.fits / f"{key}.json"

    def claim(self, name: str, settings: dict) -> None:
        """Record that this folder holds study ``name`` with ``settings``, or check that it does
        (a resume) and remove the temporary files of writes that a SIGKILL cut short.

        Raises
        ------
        SettingsMismatch
            If the folder holds the study with other settings (or another study).
        """
        manifest = self.folder / "study.json"
        wanted = {"study": name, "settings": settings}
        if manifest.is_file():
            found = json.loads(manifest.read_text())
            differences = {
                k: (found["settings"].get(k), v)
                for k, v in settings.items()
                if found["settings"].get(k) != v
            }
            if found["study"] != name:
                differences["study"] = (found["study"], name)
            if differences:
                raise SettingsMismatch(manifest, differences)
            for leftover in self.fits.glob(".*.tmp"):  # a write killed before its rename
                leftover.unlink(missing_ok=True)
            return
        self._write_atomic(manifest, wanted)

    def done(self) -> set[str]:
        """Keys of the finished fits."""
        return {p.stem for p in self.fits.glob("*.json")}

    def load(self, key: str) -> dict:
        """The record of the finished fit ``key``."""
        return json.loads(self.path(key).read_text())

    def write(self, record: dict) -> None:
        """Store a finished fit (atomically: the file is complete or absent)."""
        self._write_atomic(self.path(record["key"]), record)

    @staticmethod
    def _write_atomic(path: Path, record: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "w") as handle:
                json.dump(record, handle, indent=1)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:  # an interrupted write (SIGINT) leaves nothing behind
            tmp.unlink(missing_ok=True)
            raise
