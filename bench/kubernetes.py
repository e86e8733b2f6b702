#!/usr/bin/env python3
"""The Kubernetes backend against the project's test API server (tests/kubernetes/server.py),
which waits --latency ms before handling each HTTP request (its latency_ms knob): one round
trip of the API.

Usage: kubernetes.py [--server BIN] [--latency MS] [--rounds N] [--many N] [--json OUT]

- a warm call: `true` on the sandbox's open attach stream, against one API round trip (a GET
  /version at the same latency) plus 3 ms, the target; the API requests the warm calls made
  (from the server's request log: none is the design);
- a ready sandbox, cold (a NetworkPolicy and a Pod made here) and claimed from a
  SandboxWarmPool (--kube-warm-pool), each: the time of a fresh server's first `true` call
  less a warm one's, and the API requests its making cost (the log, less the start's reaping
  lists by label, which are once per server; with a warm pool, the start's pool read and its
  policy counted as the first sandbox's), then the same of the server's next sandbox (after
  cleanup_sandbox: the steady state), and where the time goes: --check's test pod, step by
  step;
- --many sandboxes (100), cold and claimed, each made by a call and removed by cleanup_sandbox
  in a row through one server: the time per sandbox, and what was left on the test server
  once that server ended (pods, NetworkPolicies, SandboxClaims, Sandboxes, but the warm
  pool's own unclaimed ones): must be nothing.
Prints a line per figure. Needs root for the test server's pods (it runs them as local
processes otherwise, which times the same requests).
"""
import argparse
import json
import os
import shutil
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TOKEN = "bench-k8s-token"
NS = "bench"
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "kubernetes-bench", "version": "1"}}


class Api:
    def __init__(self, url, ca):
        self.url, self.ctx = url, ssl.create_default_context(cafile=ca)

    def call(self, method, path, body=None, auth=True):
        rq = urllib.request.Request(self.url + path, method=method, data=json.dumps(body).encode() if body else None)
        rq.add_header("Content-Type", "application/json")
        if auth:
            rq.add_header("Authorization", "Bearer " + TOKEN)
        with urllib.request.urlopen(rq, context=self.ctx, timeout=60) as r:
            return json.load(r)

    def control(self, body):
        return self.call("POST", "/_control", body, auth=False)


class Session:
    def __init__(self, argv, env):
        self.p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.n = 0
        self.rpc("initialize", INIT)
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def rpc(self, method, params):
        self.n += 1
        self.p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params}).encode() + b"\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit("kubernetes bench: the server ended")
            r = json.loads(line)
            if r.get("id") == self.n:
                if "error" in r or r["result"].get("isError"):
                    raise SystemExit("kubernetes bench: call failed: " + line.decode()[:300])
                return r

    def true(self):
        t = time.perf_counter()
        self.rpc("tools/call", {"name": "execute_bash_commands", "arguments": {"code": "true"}})
        return (time.perf_counter() - t) * 1000

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def made(api, latency):
    """The API requests in the namespace since the log was cleared, less the start's reaping lists."""
    log = api.control({"latency_ms": latency})["requests"]
    return [r for r in log if "/namespaces/%s/" % NS in r["path"] and "labelSelector" not in (r["query"] or "")]


def name(r):
    """A request as "GET pods/exec": its verb, resource and subresource, a watch said."""
    p = r["path"].split("/namespaces/%s/" % NS)[1].split("/")
    return "%s %s%s%s" % (r["method"], p[0], "/" + p[2] if len(p) > 2 else "",
                          " (watch)" if "watch=" in (r["query"] or "") else "")


def pool_ready(api, n):
    for _ in range(300):
        st = api.call("GET", "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/%s/sandboxwarmpools/pool" % NS)
        if (st.get("status") or {}).get("readyReplicas", 0) >= n:
            return
        time.sleep(0.05)
    raise SystemExit("kubernetes bench: the warm pool did not fill")


def left_over(api):
    """What of ours is still on the test server: pods (but the warm pool's unclaimed ones),
    NetworkPolicies, claims and Sandboxes (but the pool's), each a count."""
    core, ext = "/api/v1/namespaces/%s" % NS, "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/%s" % NS
    agents = "/apis/agents.x-k8s.io/v1alpha1/namespaces/%s" % NS

    # The pool's unclaimed Sandboxes (a claim takes the pool's label off its Sandbox), and their pods.
    sbs = api.call("GET", agents + "/sandboxes")["items"]
    pool = {o["metadata"]["name"] for o in sbs if "agents.x-k8s.io/pool" in (o["metadata"].get("labels") or {})}

    def count(path):
        return sum(1 for o in api.call("GET", path)["items"] if o["metadata"]["name"] not in pool)
    return {"pods": count(core + "/pods"),
            "networkpolicies": count("/apis/networking.k8s.io/v1/namespaces/%s/networkpolicies" % NS),
            "sandboxclaims": count(ext + "/sandboxclaims"), "sandboxes": count(agents + "/sandboxes")}


def many(api, argv, env, n, latency, warm):
    """n sandboxes made (each by a `true` call) and removed (cleanup_sandbox) in a row through one
    server, then the server ended: the ms per sandbox, and what was left (a bounded wait for the
    pods deleted to go)."""
    s = Session(argv, env)
    t = time.perf_counter()
    for _ in range(n):
        if warm:
            pool_ready(api, 1)
        s.true()
        s.rpc("tools/call", {"name": "cleanup_sandbox", "arguments": {}})
    per = (time.perf_counter() - t) * 1000 / n
    s.close()
    left = left_over(api)
    for _ in range(100):
        if not any(left.values()):
            break
        time.sleep(0.1)
        left = left_over(api)
    return per, left


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", default=os.environ.get("SANDBOX_MCP", "build/sandbox-mcp"))
    ap.add_argument("--latency", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--many", type=int, default=100, help="sandboxes made and removed in a row (0: none)")
    ap.add_argument("--json")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="k8s-bench-")
    env = dict(os.environ, K8S_TEST_TOKEN=TOKEN)
    srv = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "kubernetes", "server.py"), "--port-file",
                            tmp + "/port", "--kubeconfig-out", tmp + "/kubeconfig"], env=env,
                           stderr=open(tmp + "/k8s.log", "w"))
    rows, rc = {}, 0
    try:
        for _ in range(200):
            if os.path.exists(tmp + "/port") and open(tmp + "/port").read().strip():
                break
            time.sleep(0.05)
        kc = json.load(open(tmp + "/kubeconfig"))
        import base64
        with open(tmp + "/ca.crt", "wb") as f:
            f.write(base64.b64decode(kc["clusters"][0]["cluster"]["certificate-authority-data"]))
        api = Api("https://127.0.0.1:" + open(tmp + "/port").read().strip(), tmp + "/ca.crt")
        api.control({"latency_ms": a.latency})
        # One round trip: a GET /version on a connection kept open, as the server's own are.
        import http.client
        conn = http.client.HTTPSConnection("127.0.0.1", int(open(tmp + "/port").read()), context=api.ctx, timeout=60)
        rtt = []
        for _ in range(a.rounds * 4):
            t = time.perf_counter()
            conn.request("GET", "/version", headers={"Authorization": "Bearer " + TOKEN})
            conn.getresponse().read()
            rtt.append((time.perf_counter() - t) * 1000)
        conn.close()
        rtt = statistics.median(rtt[1:])
        run_env = dict(os.environ, KUBECONFIG=tmp + "/kubeconfig", SANDBOX_KUBE_NAMESPACE=NS)
        run_env.pop("KUBERNETES_SERVICE_HOST", None)
        argv = [os.path.abspath(a.server), "--backend", "kubernetes", "--state-dir", tmp + "/state", "--no-sandbox-ahead"]
        # A warm pool of the template the tests use (our pod's spec, as a SandboxTemplate).
        tpl = json.load(open(os.path.join(ROOT, "tests", "kubernetes", "sandbox-template.json")))
        tpl["metadata"]["name"] = "pool"
        ext = "/apis/extensions.agents.x-k8s.io/v1alpha1/namespaces/%s" % NS
        api.call("POST", ext + "/sandboxtemplates", tpl)
        api.call("POST", ext + "/sandboxwarmpools", {"apiVersion": "extensions.agents.x-k8s.io/v1alpha1",
                                                     "kind": "SandboxWarmPool", "metadata": {"name": "pool"},
                                                     "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "pool"}}})
        warm_all = []
        for mode, extra in (("cold", []), ("warm pool claim", ["--kube-warm-pool", "pool"])):
            ready, reqs, ready2, reqs2 = [], None, [], None
            for _ in range(a.rounds):
                if extra:
                    pool_ready(api, 2)
                api.control({"latency_ms": a.latency, "clear_log": True})
                s = Session(argv + extra, run_env)
                # The start's reaping (three lists by label, once per server) done first; what the
                # start does besides (with a warm pool: the pool read, its policy made) counts
                # as the first sandbox's.
                for _ in range(500):
                    if sum("labelSelector" in (r["query"] or "") for r in api.control({"latency_ms": a.latency})["requests"]) >= 3:
                        break
                    time.sleep(0.02)
                first = s.true()
                got = made(api, a.latency)
                warm = [s.true() for _ in range(a.rounds * 4)]
                after = made(api, a.latency)
                if len(after) != len(got):
                    print("kubernetes: warm calls made %d API requests" % (len(after) - len(got)))
                # The steady state: the server's next sandbox, once the first is removed.
                s.rpc("tools/call", {"name": "cleanup_sandbox", "arguments": {}})
                if extra:
                    pool_ready(api, 2)
                api.control({"latency_ms": a.latency, "clear_log": True})
                second = s.true()
                got2 = made(api, a.latency)
                s.close()
                ready.append(first - statistics.median(warm))
                ready2.append(second - statistics.median(warm))
                warm_all += warm
                reqs = [name(r) for r in got]
                reqs2 = [name(r) for r in got2]
            # Where the time goes: --check's test pod, step by step.
            if extra:
                pool_ready(api, 2)
            chk = subprocess.run(argv + extra + ["--check"], env=run_env, capture_output=True, text=True, timeout=120)
            steps = [l.split("test pod", 1)[1].split(";")[0].strip() for l in chk.stdout.splitlines() if "test pod" in l]
            rows[mode] = {"ready_ms": statistics.median(ready), "requests": len(reqs), "what": reqs,
                          "steady_ready_ms": statistics.median(ready2), "steady_requests": len(reqs2),
                          "steady_what": reqs2, "steps": steps[0] if steps else ""}
            print("kubernetes +%dms/req: a ready sandbox, %s: the server's first %.0f ms, %d API requests (with the "
                  "start's besides its reaping lists): %s; each after %.0f ms, %d API requests: %s (medians of %d); "
                  "--check's steps: %s" % (a.latency, mode, statistics.median(ready), len(reqs), ", ".join(reqs),
                                           statistics.median(ready2), len(reqs2), ", ".join(reqs2), a.rounds,
                                           steps[0] if steps else "not printed"), flush=True)
        # Many sandboxes in a row through one server: nothing may be left behind.
        for mode, extra in (("cold", []), ("warm pool claim", ["--kube-warm-pool", "pool"])):
            if a.many <= 0:
                break
            api.control({"latency_ms": a.latency, "clear_log": True})
            per, left = many(api, argv + extra, run_env, a.many, a.latency, bool(extra))
            rows["many " + mode] = {"n": a.many, "ms_per_sandbox": per, "left": left}
            print("kubernetes +%dms/req: %d sandboxes, %s, made and removed in a row through one server: %.0f ms "
                  "each; left on the API server once it ended: %s: %s" % (
                      a.latency, a.many, mode, per, ", ".join("%d %s" % (v, k) for k, v in left.items()),
                      "nothing" if not any(left.values()) else "LEFT BEHIND"), flush=True)
            rc = rc or (1 if any(left.values()) else 0)
        w = statistics.median(warm_all)
        rows["warm"] = {"warm_ms": w, "rtt_ms": rtt, "target_ms": rtt + 3}
        print("kubernetes +%dms/req: a warm true call %.1f ms (median of %d, no API request) against one API round "
              "trip %.1f ms + 3 ms = %.1f ms: %s" % (a.latency, w, len(warm_all), rtt, rtt + 3,
                                                      "under" if w < rtt + 3 else "OVER"), flush=True)
    finally:
        srv.terminate()
        srv.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f)
    return rc


if __name__ == "__main__":
    sys.exit(main())
