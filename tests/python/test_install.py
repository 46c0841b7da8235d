#!/usr/bin/python3
"""Installation (issue 33), driven through CMake and CPack:

  - `cmake --install BUILD --prefix DIR`: DIR/bin/dllmq runs on its own, away from the source
    tree, and finds the embedded models in DIR/share/dllmq (generate with the default model,
    `-m synth-dream`, `eval` on the shipped synth data); the answers equal those of the binary
    in the build tree;
  - the Debian package that `cpack -G DEB` builds installs with apt (root only; skipped and
    said so otherwise), `/usr/bin/dllmq generate` then works with the embedded model, and the
    package is removed again.

The binary under test is copied out of the build tree first (the installed one must not lean on
DLLMQ_SOURCE_DIR): the source tree is hidden by running with a working directory elsewhere and
checking that every path it reports lies under the prefix.

    test_install.py [--dllmq build/dllmq] [--workdir DIR]
Last line "N passed, N failed".
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Results, run_all  # noqa: E402

ENV = dict(os.environ, OMP_NUM_THREADS="2")
ENV.pop("DLLMQ_MODEL", None)
PROMPT = "Mia has 23 marbles. She buys 14 more marbles. How many marbles does Mia have now?"


def run(cmd, cwd=None, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=ENV, cwd=cwd)


def answer(exe, cwd, *extra):
    p = run([exe, "generate", "--chat", "-p", PROMPT, "--cache", "dual", "--threshold", "0.9",
             "--json", *extra], cwd=cwd)
    if p.returncode != 0:
        return None, p.stderr.strip()[-400:]
    out = json.loads(p.stdout)
    # The model directory in use is on stderr: "dllmq: model DIR | prompt ...".
    head = next((l for l in p.stderr.splitlines() if l.startswith("dllmq: model ")), "")
    out["model_dir"] = head[len("dllmq: model "):].split(" | ")[0]
    return out, ""


def test_cmake_install(build, ref_exe, res, work):
    prefix = os.path.join(work, "prefix")
    p = run(["cmake", "--install", build, "--prefix", prefix])
    res.check("cmake-install/runs", p.returncode == 0, p.stderr.strip()[-300:])
    exe = os.path.join(prefix, "bin", "dllmq")
    res.check("cmake-install/binary", os.access(exe, os.X_OK), exe)
    for m in ("dllmq-synth-tiny", "dllmq-synth-dream-tiny", "dllmq-synth-kshot"):
        cfg = os.path.join(prefix, "share", "dllmq", "models", m, "config.json")
        res.check("cmake-install/model-%s" % m, os.path.exists(cfg), cfg)
    # Run from an unrelated directory; the installed binary must find its own share/dllmq.
    cwd = tempfile.mkdtemp(dir=work)
    for extra in ((), ("-m", "synth-dream")):
        name = "default" if not extra else extra[1]
        got, err = answer(exe, cwd, *extra)
        want, _ = answer(ref_exe, cwd, *extra)
        ok = got is not None and want is not None and got.get("text") == want.get("text") and \
            got.get("tokens") == want.get("tokens")
        res.check("cmake-install/generate-%s" % name, ok,
                  err or "text %r" % (got or {}).get("text"))
        if got is not None:
            model = got["model_dir"]
            res.check("cmake-install/model-from-prefix-%s" % name,
                      os.path.realpath(model).startswith(os.path.realpath(prefix)), model)
    # eval without --data reads the shipped synth test set from the prefix.
    out = os.path.join(work, "eval_installed")
    p = run([exe, "eval", "--task", "synth", "--limit", "2", "--out", out, "--json"], cwd=cwd)
    res.check("cmake-install/eval-synth", p.returncode == 0, p.stderr.strip()[-300:])


def test_debian_package(build, ref_exe, res, work):
    if os.geteuid() != 0:
        print("SKIP debian-package: needs root to install with dpkg (CI runs as root)")
        return
    if shutil.which("dpkg-query") is None:
        print("SKIP debian-package: not a Debian system")
        return
    # Installed, not merely known: a removed package keeps a "deinstall ok config-files" record.
    st = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "dllmq"], capture_output=True,
                        text=True)
    if st.returncode == 0 and st.stdout.strip().endswith(" installed"):
        res.check("deb/not-installed-before", False,
                  "a dllmq package is already installed; remove it first (dpkg --purge dllmq)")
        return
    pkgdir = os.path.join(work, "pkg")
    os.makedirs(pkgdir, exist_ok=True)
    p = run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"),
             "-B", pkgdir], timeout=900)
    debs = glob.glob(os.path.join(pkgdir, "*.deb"))
    res.check("deb/built", p.returncode == 0 and len(debs) == 1,
              (p.stderr or p.stdout).strip()[-300:] + " %s" % debs)
    if len(debs) != 1:
        return
    info = run(["dpkg-deb", "-f", debs[0], "Package", "Depends"])
    res.check("deb/depends-libraries", "libdnnl" in info.stdout and "libopenblas" in info.stdout,
              info.stdout.strip().replace("\n", " | "))
    # As a user would: apt resolves the package's Depends (Debian's libopenblas0 metapackage, for
    # one, which plain dpkg -i would not install).
    p = subprocess.run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", debs[0]],
                       capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    res.check("deb/installs", p.returncode == 0, p.stderr.strip()[-300:])
    try:
        cwd = tempfile.mkdtemp(dir=work)
        got, err = answer("/usr/bin/dllmq", cwd)
        want, _ = answer(ref_exe, cwd)
        ok = got is not None and want is not None and got.get("text") == want.get("text")
        res.check("deb/generate-from-usr-bin", ok, err or "text %r" % (got or {}).get("text"))
        if got is not None:
            res.check("deb/model-in-usr-share",
                      got["model_dir"].startswith("/usr/share/dllmq/models/"), got["model_dir"])
    finally:
        # Purged, not just removed: the package has maintainer scripts (ldconfig, for its private
        # library), so a plain removal leaves its record behind for the next run to trip on.
        p = subprocess.run(["dpkg", "--purge", "dllmq"], capture_output=True, text=True,
                           timeout=300)
        res.check("deb/installed-files-gone", not os.path.exists("/usr/share/dllmq/models"),
                  "/usr/share/dllmq/models")
        res.check("deb/removes", p.returncode == 0 and not os.path.exists("/usr/bin/dllmq"),
                  p.stderr.strip()[-300:])


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dllmq", default=os.path.join(ROOT, "build", "dllmq"))
    ap.add_argument("--workdir")
    a = ap.parse_args(argv)
    work = os.path.abspath(a.workdir or tempfile.mkdtemp(prefix="dllmq_install_"))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    exe = os.path.abspath(a.dllmq)
    build = os.path.dirname(exe)
    res = Results()
    return run_all(res, [
        lambda: test_cmake_install(build, exe, res, work),
        lambda: test_debian_package(build, exe, res, work)])


if __name__ == "__main__":
    sys.exit(main())
