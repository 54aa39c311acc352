"""Headless Chromium (Debian's package) for screenshots, and a PNG reader."""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    """The chromium binary; installs Debian's package when missing. Fails loudly."""
    found = shutil.which("chromium")
    if found:
        return found
    result = subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, text=True)
    if result.returncode != 0:  # a fresh machine needs the package lists first
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
        result = subprocess.run(["apt-get", "install", "-y", "-qq", "chromium"], capture_output=True, text=True)
    found = shutil.which("chromium")
    if result.returncode != 0 or not found:
        raise RuntimeError(
            f"chromium is needed (apt-get install chromium) and could not be installed:\n{result.stderr[-2000:]}"
        )
    return found


def screenshot(page: Path, out: Path, width: int = 1000, height: int = 2400) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={out}",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, chunks, header = 8, [], b""
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position : position + 8])
        body = data[position + 8 : position + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        position += 12 + length
    width, height, depth, color = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and color in (2, 6), "only 8-bit RGB/RGBA"
    pixel = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * pixel
    rows: list[bytes] = []
    previous = bytearray(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - pixel] if x >= pixel else 0
            up = previous[x]
            corner = previous[x - pixel] if x >= pixel else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[x] = (line[x] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, [bytes(r) if pixel == 3 else bytes(b for i, b in enumerate(r) if i % 4 != 3) for r in rows]
