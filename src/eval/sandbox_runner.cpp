#include "eval/sandbox_runner.h"

namespace dllmq::eval {

const char* const kSandboxRunnerPy = R"PY(
import ast, contextlib, io, json, os, signal, sys, traceback


def report(status, detail, program, write=os.write, dumps=json.dumps):
    msg = dumps({"status": status, "detail": detail[:2000], "program": program})
    write(3, msg.encode("utf-8", "replace"))


def refine(text):
    text = text.replace("\t", "    ").replace("\r\n", "\n").replace("\r", "\n")
    return text.strip() + "\n"


def parses(code):
    try:
        ast.parse(code)
        return True
    except (SyntaxError, MemoryError, ValueError):
        return False


def longest_valid(text):
    # Contiguous line range of the first 100 lines that parses and has the most non-blank lines.
    lines = text.splitlines()[:100]
    best, best_n = "", 0
    for i in range(len(lines)):
        for j in range(i, len(lines)):
            span = lines[i:j + 1]
            n = sum(1 for ln in span if ln.strip())
            if n > best_n and parses("\n".join(span)):
                best, best_n = "\n".join(span), n
    return best


def names_used(node):
    # Names and attribute names under node (attribute bases are not descended into).
    out, stack = set(), [node]
    while stack:
        for child in ast.iter_child_nodes(stack.pop()):
            if isinstance(child, ast.Name):
                out.add(child.id)
            elif isinstance(child, ast.Attribute):
                out.add(child.attr)
            else:
                stack.append(child)
    return out


def sanitize(text, entry_point):
    tree = ast.parse(longest_valid(refine(text)))
    imports, defs = [], {}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(node)
        elif isinstance(node, ast.ClassDef):
            defs[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            if any(isinstance(n, ast.Return) for n in ast.walk(node)):
                defs[node.name] = node
        elif isinstance(node, ast.Assign):
            if node.targets and isinstance(node.targets[0], ast.Name):
                defs[node.targets[0].id] = node
    keep = set(defs)
    if entry_point:
        graph = {name: names_used(node) for name, node in defs.items()}
        keep, todo = set(), [entry_point]
        while todo:
            cur = todo.pop(0)
            if cur not in keep:
                keep.add(cur)
                todo.extend(graph.get(cur, set()) - keep)
    out = [ast.unparse(n) for n in imports]
    out += [ast.unparse(node) for name, node in defs.items() if name in keep]
    return "\n".join(out)


def describe(exc, program):
    text = "%s: %s" % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
    lines = program.splitlines()
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        if frame.filename == "<sample>" and frame.lineno and 0 < frame.lineno <= len(lines):
            return "%s (line %d: %s)" % (text, frame.lineno, lines[frame.lineno - 1].strip())
    if isinstance(exc, SyntaxError) and exc.lineno:
        return "%s (line %d)" % (text, exc.lineno)
    return text


class WriteOnlyStringIO(io.StringIO):
    # HF code_eval's stdin/stdout/stderr while the program runs: reading raises.
    def read(self, *args, **kwargs):
        raise OSError

    def readline(self, *args, **kwargs):
        raise OSError

    def readlines(self, *args, **kwargs):
        raise OSError

    def readable(self, *args, **kwargs):
        return False


class redirect_stdin(contextlib._RedirectStream):
    _stream = "stdin"


class TimeoutException(Exception):
    pass


def reliability_guard():
    # HF code_eval's reliability_guard (no memory cap: RLIMIT_AS comes from the sandbox), so that
    # programs see the same disabled functions as under lm-eval.
    import builtins, faulthandler, shutil, subprocess
    faulthandler.disable()
    builtins.exit = None
    builtins.quit = None
    os.environ["OMP_NUM_THREADS"] = "1"
    for name in ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid",
                 "fork", "forkpty", "killpg", "rename", "renames", "truncate", "replace", "unlink",
                 "fchmod", "fchown", "chmod", "chown", "chroot", "lchflags", "lchmod", "lchown",
                 "getcwd", "chdir"):
        setattr(os, name, None)
    shutil.rmtree = None
    shutil.move = None
    shutil.chown = None
    subprocess.Popen = None
    builtins.help = None
    for name in ("ipdb", "joblib", "resource", "psutil", "tkinter"):
        sys.modules[name] = None


def main():
    with open("payload.json", encoding="utf-8") as f:
        p = json.load(f)
    code = p["code"]
    timeout = float(p.get("timeout", 3.0))
    shown = None
    if p.get("sanitize"):
        try:
            code = sanitize(code, p.get("entry_point") or None)
        except Exception:
            code = longest_valid(refine(code))
        shown = code
    program = code + "\n" + p["test"]
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    write, exit_now = os.write, os._exit
    reliability_guard()

    def on_alarm(signum, frame):
        raise TimeoutException("Timed out!")

    # As HF code_eval's unsafe_execute: exec in a fresh dict, I/O swallowed, an ITIMER_REAL of
    # `timeout` seconds; any exception (SystemExit included) fails the sample.
    stream = WriteOnlyStringIO()
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(stream), \
                redirect_stdin(stream):
            signal.setitimer(signal.ITIMER_REAL, timeout)
            signal.signal(signal.SIGALRM, on_alarm)
            try:
                exec(compile(program, "<sample>", "exec"), {})
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
    except TimeoutException:
        report("timeout", "timed out after %g s (in-process timer, as HF code_eval)" % timeout, shown, write)
        exit_now(1)
    except BaseException as e:  # SystemExit too, as code_eval
        try:
            detail = describe(e, program)
        except BaseException:
            detail = "exception (not printable)"
        report("failed", detail, shown, write)
        exit_now(1)
    report("passed", "", shown, write)
    exit_now(0)


main()
)PY";

}  // namespace dllmq::eval
