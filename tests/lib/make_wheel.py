#!/usr/bin/env python3
"""Writes a tiny pure-Python wheel, so the tests can install from an offline wheelhouse.
Usage: make_wheel.py DIR NAME VERSION  -> DIR/NAME-VERSION-py3-none-any.whl whose module NAME
has VALUE = "NAME VERSION"."""
import base64, hashlib, sys, zipfile

out, name, ver = sys.argv[1:4]
files = {
    f"{name}/__init__.py": f'VALUE = "{name} {ver}"\n'.encode(),
    f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
    f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sandbox-mcp-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = ""
for path, data in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record += f"{path},sha256={digest},{len(data)}\n"
record += f"{name}-{ver}.dist-info/RECORD,,\n"
files[f"{name}-{ver}.dist-info/RECORD"] = record.encode()
with zipfile.ZipFile(f"{out}/{name}-{ver}-py3-none-any.whl", "w") as z:
    for path, data in files.items():
        z.writestr(path, data)
