#!/bin/sh
# Checks --gpu on a machine with an NVIDIA GPU and its driver (no network, no Docker needed):
# nvidia-smi -L and a torch matrix multiply, outside and then inside a local sandbox, with the
# product checked and the times side by side. Exit 0 when the sandbox sees the GPUs and gets
# the right product.
#
# Usage: scripts/gpu-check.sh [SERVER]   (default build/sandbox-mcp)
# Environment: TORCH_VENV (default /opt/torch/.venv), a virtual environment with torch; it is
# bound read-only into the sandbox at /mnt/torch.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
server=${1:-$here/build/sandbox-mcp}
venv=${TORCH_VENV:-/opt/torch/.venv}
[ -x "$venv/bin/python" ] || { echo "gpu-check: no torch venv at $venv (TORCH_VENV)" >&2; exit 2; }
venv=$(cd "$venv" && pwd -P)
root=$(dirname "$venv")

# The multiply, checked: A @ I must be A, and (A @ B) @ x must match A @ (B @ x) within float32
# rounding; the time is the mean of ten 4096 x 4096 products.
probe='import time, torch
assert torch.cuda.is_available(), "torch sees no CUDA device"
d = torch.device("cuda")
n = 4096
a = torch.randn(n, n, device=d)
b = torch.randn(n, n, device=d)
x = torch.randn(n, 1, device=d)
torch.cuda.synchronize()
c = a @ b
torch.cuda.synchronize()
t0 = time.perf_counter()
for _ in range(10):
    c = a @ b
torch.cuda.synchronize()
ms = (time.perf_counter() - t0) * 100
ok = torch.equal(a @ torch.eye(n, device=d), a) or torch.allclose(a @ torch.eye(n, device=d), a)
ok = ok and torch.allclose(c @ x, a @ (b @ x), rtol=1e-2, atol=1e-1)
print("matmul", "ok" if ok else "WRONG", "%.2f ms per 4096x4096 float32 product on" % ms, torch.cuda.get_device_name(0))'

echo "== outside the sandbox"
nvidia-smi -L
outside=$("$venv/bin/python" -c "$probe")
echo "$outside"

echo "== inside a local sandbox (--gpu)"
inside_venv=/mnt/torch/$(basename "$venv")
code=$(printf 'nvidia-smi -L; %s/bin/python -c %s' "$inside_venv" "'$(printf '%s' "$probe" | sed "s/'/'\\\\''/g")'")
req=$(python3 -c 'import json,sys; print(json.dumps({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_bash_commands","arguments":{"code":sys.argv[1],"timeout_s":300}}}))' "$code")
out=$(printf '%s\n%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"gpu-check","version":"1"}}}' "$req" |
	"$server" --backend local --gpu --network none --memory 16G --mount "$root:/mnt/torch" --timeout 300 --max-timeout 300 2>/dev/null |
	python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("id") == 2:
        s = m["result"]["structuredContent"]
        print(s["stdout"], end=""); print(s["stderr"], end="", file=sys.stderr); sys.exit(s["exit_code"])')
echo "$out"
case $out in
*"matmul ok"*) echo "gpu-check: ok (outside: ${outside##*product on }; times above)" ;;
*) echo "gpu-check: the sandbox did not compute the product on the GPU" >&2; exit 1 ;;
esac
