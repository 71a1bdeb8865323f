"""The last step of `make test`: no process started by the test suite (marked TRAINFIT_TEST_SESSION=<the session id
make gave it> in its environment, inherited by all its descendants) may still be alive. Lists and stops any; exit 1
if there were any. Without an id it looks for every test session's processes (none may run concurrently then)."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
from trainfit import _proc  # noqa: E402

session = sys.argv[1] if len(sys.argv) > 1 else None
left = _proc.tagged("TRAINFIT_TEST_SESSION", session)
if left:
    print(f"leftovers: {len(left)} process(es) started by the test suite still alive: {left}; stopping them",
          file=sys.stderr)
    _proc.stop_tagged("TRAINFIT_TEST_SESSION", session, grace_s=3.0)
    sys.exit(1)
print("leftovers: no process started by the test suite is alive")
