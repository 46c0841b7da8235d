"""Pass/fail bookkeeping shared by the end-to-end test scripts (their last line is
'N passed, N failed', which ctest and CI read)."""
import sys


class Results:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.fail_names = []

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print("PASS %s %s" % (name, detail))
        else:
            self.failed += 1
            self.fail_names.append(name)
            print("FAIL %s %s" % (name, detail))
        sys.stdout.flush()


def run_all(res, checks):
    """Runs each check (a callable taking no arguments); an exception is a failed check, not
    an abort. Prints the closing 'N passed, N failed' line and returns the exit status."""
    for check in checks:
        try:
            check()
        except Exception as e:  # noqa: BLE001
            res.check("exception", False, repr(e))
    print(f"{res.passed} passed, {res.failed} failed")
    return 1 if res.failed else 0
