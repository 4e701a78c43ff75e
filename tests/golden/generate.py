"""Writes the golden payloads of the current format version (run once per format version:
`python tests/golden/generate.py`, or `python tests/golden/generate.py v1.1` for a minor
version, which changes the layout but not the version byte). Existing files are never overwritten: they are the record
of what earlier builds wrote.

From format 1.2 on, a version's folder holds one set per way of writing (SETS): `v1.2/*.frt`
(checksummed), `v1.2/zstd/`, `v1.2/signed/` and `v1.2/signed-zstd/` (signed with GOLDEN_KEY).
`python tests/golden/generate.py v1.1-signed` writes `v1.1-signed/`: the payloads of
`v1.1/` as a signing writer of formats 1.0 and 1.1 wrote them (flag SIGNED, then HMAC-SHA256 of
every byte before it appended: docs/FORMAT.md, "Signatures"), so that the old signatures stay
readable."""

from __future__ import annotations

import hashlib
import hmac
import pathlib
import sys

import freight

# Run as a script, its own folder is on sys.path (and under pytest, pyproject's pythonpath puts it there).
from cases import CASES, LATER_CASES, PointSerializer

GOLDEN = pathlib.Path(__file__).parent
OUT = GOLDEN / (sys.argv[1] if len(sys.argv) > 1 else f"v{freight._freight.FORMAT_VERSION}")

# The key of the signed sets (a test key: it signs nothing but these files).
GOLDEN_KEY = b"freight-golden-signing-key-0001!"

# Sets written from format 1.2 on: sub-folder ("" for the version's own folder) -> Freight options.
SETS: dict[str, dict] = {
    "": {"checksum": True},
    "zstd": {"checksum": True, "compression": "zstd"},
    "signed": {"key": GOLDEN_KEY},
    "signed-zstd": {"key": GOLDEN_KEY, "compression": "zstd"},
}

SIGNED_FLAG = 0x08


def signed_the_old_way(data: bytes) -> bytes:
    """A payload of format 1.0/1.1 as a signing writer of those versions wrote it: flag SIGNED,
    the header checksum over the changed flags, and the HMAC of every byte before it appended."""
    from support.wire import xxh3_64

    out = bytearray(data)
    out[5] |= SIGNED_FLAG
    body_len, pos = 0, 6
    for shift in range(0, 70, 7):
        byte = out[pos]
        body_len |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            break
    end = pos + body_len
    out[end : end + 8] = xxh3_64(bytes(out[:end])).to_bytes(8, "little")
    return bytes(out) + hmac.new(GOLDEN_KEY, bytes(out), hashlib.sha256).digest()


def write(path: pathlib.Path, data: bytes) -> None:
    if path.exists():
        print(f"kept    {path}")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    print(f"wrote   {path}")


def main() -> None:
    if OUT.name == "v1.1-signed":
        for source in sorted((GOLDEN / "v1.1").glob("*.frt")):
            write(OUT / source.name, signed_the_old_way(source.read_bytes()))
        return
    # Checksummed, as payloads at rest are (and as the first files were, by the default then).
    sets = SETS if OUT.name >= "v1.2" else {"": {"checksum": True}}
    cases = {**CASES, **LATER_CASES} if OUT.name >= "v1.2" else CASES
    for folder, options in sets.items():
        codec = freight.Freight(**options)
        codec.register(PointSerializer())
        for name, make in cases.items():
            write(OUT / folder / f"{name}.frt", codec.dumps(make()))


if __name__ == "__main__":
    main()
