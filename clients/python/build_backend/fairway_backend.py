"""A thin PEP 517 backend: setuptools, and a pure-Python wheel of its own when ``wheel`` is missing.

setuptools before 70.1 needs the ``wheel`` package to build wheels (and
metadata). A fresh virtualenv has setuptools but not ``wheel``, and
``pip install --no-build-isolation`` installs nothing first: there this
backend writes the wheel itself (the package is pure Python, so a wheel is
a zip of ``src/fairway`` and its ``.dist-info``). Everything else, and
everything when ``wheel`` is importable, is setuptools' ``build_meta``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tomllib
import zipfile
from typing import Any, Optional

from setuptools import build_meta as _setuptools

get_requires_for_build_sdist = _setuptools.get_requires_for_build_sdist
build_sdist = _setuptools.build_sdist

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _have_wheel() -> bool:
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def get_requires_for_build_wheel(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    if _have_wheel():
        return list(_setuptools.get_requires_for_build_wheel(config_settings))
    return []


def _project() -> dict[str, Any]:
    with open(os.path.join(_ROOT, "pyproject.toml"), "rb") as f:
        return dict(tomllib.load(f)["project"])


def _dist_name(p: dict[str, Any]) -> str:
    return p["name"].replace("-", "_")


def _metadata(p: dict[str, Any]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {p['name']}",
        f"Version: {p['version']}",
        f"Summary: {p.get('description', '')}",
        f"Requires-Python: {p.get('requires-python', '')}",
    ]
    for dep in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {dep}")
    for extra, deps in p.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        for dep in deps:
            lines.append(f'Requires-Dist: {dep}; extra == "{extra}"')
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    readme = os.path.join(_ROOT, p.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _write_dist_info(directory: str, p: dict[str, Any]) -> str:
    name = f"{_dist_name(p)}-{p['version']}.dist-info"
    path = os.path.join(directory, name)
    os.makedirs(path, exist_ok=True)
    files = {
        "METADATA": _metadata(p),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: fairway_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "top_level.txt": "fairway\n",
    }
    for fname, text in files.items():
        with open(os.path.join(path, fname), "w", encoding="utf-8") as f:
            f.write(text)
    return name


def prepare_metadata_for_build_wheel(metadata_directory: str, config_settings: Optional[dict[str, Any]] = None) -> str:
    if _have_wheel():
        return str(_setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings))
    return _write_dist_info(metadata_directory, _project())


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def build_wheel(wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None) -> str:
    if _have_wheel():
        return str(_setuptools.build_wheel(wheel_directory, config_settings, metadata_directory))
    p = _project()
    wheel_name = f"{_dist_name(p)}-{p['version']}-py3-none-any.whl"
    src = os.path.join(_ROOT, "src")
    records: list[str] = []
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as zf:
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, "fairway")):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for fname in sorted(filenames):
                if fname.endswith((".pyc", ".pyo")):
                    continue
                full = os.path.join(dirpath, fname)
                arcname = os.path.relpath(full, src).replace(os.sep, "/")
                with open(full, "rb") as f:
                    data = f.read()
                zf.writestr(arcname, data)
                records.append(_record_line(arcname, data))
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            info = _write_dist_info(tmp, p)
            for fname in sorted(os.listdir(os.path.join(tmp, info))):
                with open(os.path.join(tmp, info, fname), "rb") as f:
                    data = f.read()
                arcname = f"{info}/{fname}"
                zf.writestr(arcname, data)
                records.append(_record_line(arcname, data))
        records.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(records) + "\n")
    return wheel_name
