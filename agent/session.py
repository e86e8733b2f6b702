# A Python session (execute_python with `session`): one interpreter that runs cell after cell
# in one namespace, as a notebook does. Started by the server as a background process of the
# sandbox, it waits for a line on stdin, then runs the request file that line names (JSON: the
# cell's path, the result's path, the call's env and args), prints the cell's output as it comes,
# and writes its outcome (the last expression's repr, whether it raised) to the result's path by
# a rename, so that the server reads it whole. An exception is reported with its traceback and
# the session lives on; SIGINT (the call's timeout) raises KeyboardInterrupt in the cell.
import ast, builtins, json, os, sys, traceback

VALUE_MAX = 10000  # characters of a value's repr kept

ns = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
last_result = None
START = os.getcwd()  # the workspace: the server starts the session there
WS = os.path.join(os.sep, "workspace", "")  # "/workspace/", not spelled out: a stand-in maps that text


def here(p):
    """A path the server names under /workspace, opened below the folder the session started in:
    the same file where the sandbox's workspace is /workspace, and where a stand-in for a sandbox
    (Daytona's test server) has it elsewhere."""
    return START + p[len(WS) - 1:] if p.startswith(WS) else p


def cell(req):
    global last_result
    if last_result:
        try:
            os.unlink(here(last_result))
        except OSError:
            pass
    last_result = req["result"]
    saved = {}
    for k, v in req.get("env", {}).items():
        saved[k] = os.environ.get(k)
        os.environ[k] = v
    sys.argv = [req["cell"]] + list(req.get("args", []))
    out = {"value": None, "error": False}
    try:
        with open(here(req["cell"]), encoding="utf-8") as f:
            src = f.read()
        tree = ast.parse(src, req["cell"])
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, req["cell"], "exec"), ns)
        if last is not None:
            v = eval(compile(last, req["cell"], "eval"), ns)
            if v is not None:
                ns["_"] = v
                r = repr(v)
                out["value"] = r if len(r) <= VALUE_MAX else r[:VALUE_MAX] + "... (%d characters)" % len(r)
    except SystemExit as e:
        out["error"] = e.code not in (None, 0)
    except BaseException as e:
        out["error"] = True
        # The cell's frames only: the first is this file's.
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:
            pass
    tmp = here(req["result"]) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f)
    os.replace(tmp, here(req["result"]))


def main():
    stdin = sys.stdin.buffer
    sys.stdin = open(os.devnull)
    while True:
        try:
            line = stdin.readline()
            if not line:
                return
            with open(here(line.decode().strip()), encoding="utf-8") as f:
                req = json.load(f)
            cell(req)
        except KeyboardInterrupt:
            continue


main()
