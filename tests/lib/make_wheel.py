#!/usr/bin/env python3
"""Writes a tiny pure-Python wheel, so the tests can install from an offline wheelhouse.
Usage: make_wheel.py DIR NAME VERSION [EXTRA_FILES [EXTRA_SIZE]]
  -> DIR/NAME-VERSION-py3-none-any.whl whose module NAME has VALUE = "NAME VERSION", plus
     EXTRA_FILES data files of EXTRA_SIZE bytes each (default 0 files, 1024 bytes)."""
import base64, hashlib, sys, zipfile

out, name, ver = sys.argv[1:4]
extra = int(sys.argv[4]) if len(sys.argv) > 4 else 0
extra_size = int(sys.argv[5]) if len(sys.argv) > 5 else 1024
files = {
    f"{name}/__init__.py": f'VALUE = "{name} {ver}"\n'.encode(),
    f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
    f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandbox-mcp-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
for i in range(extra):
    files[f"{name}/data/{i // 1000}/f{i}.txt"] = (b"%d\n" % i).ljust(extra_size, b".")
record = ""
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{path},sha256={digest},{len(data)}\n"
record += f"{name}-{ver}.dist-info/RECORD,,\n"
files[f"{name}-{ver}.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(f"{out}/{name}-{ver}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as z:
    for path, data in files.items():
        z.writestr(path, data)
