"""schemathesis hooks of scripts/api-fuzz.sh (SCHEMATHESIS_HOOKS), and the check it runs after.

The fuzzer authenticates with one admin token, DOCKET_FUZZ_TOKEN, which `docket serve` created
from DOCKET_ADMIN_TOKEN under the name DOCKET_FUZZ_TOKEN_NAME (`admin`).

- The fuzzer may revoke any token but its own. `DELETE /v1/tokens/{name}` is one of the
  operations it fuzzes, and schemathesis fills path parameters with values it read in earlier
  answers (`GET /v1/tokens` lists `admin`): a run that revoked its own token went on with a dead
  one, and every operation it tested after that answered only 401 (issue 37 item 4). Revoking
  the token a request carries is allowed by the API (an admin may revoke any token, and the CLI
  with `--database` makes a new one), so it is the fuzz setup, not the server, that must not
  saw off the branch it sits on: such a request is sent for a spare token made for it just
  before (`POST /v1/tokens` to DOCKET_FUZZ_URL). Not for a name no token has: in the stateful
  phase a `DELETE` that follows a `POST /v1/tokens` must find a token, and a 404 there failed
  CI (check ST302, "created resource not found").
- Every answer is recorded (operation, status, whether the request carried the fuzzer's token)
  in DOCKET_FUZZ_STATUSES, one line each.

`python api-fuzz-hooks.py check STATUSES OPENAPI.json` then fails when an operation of the
document that needs a token never answered the fuzzer's token with anything but 401/403 (it was
never reached with a valid token), or when any request carrying the token got 401 or 403 (the
admin token stopped working, or a route refuses it). `… unreached STATUSES OPENAPI.json` prints
the operations not reached yet, one per line, for a further pass of the fuzzer.
"""

import os
import sys

TOKEN = os.environ.get("DOCKET_FUZZ_TOKEN", "")
TOKEN_NAME = os.environ.get("DOCKET_FUZZ_TOKEN_NAME", "admin")
STATUSES = os.environ.get("DOCKET_FUZZ_STATUSES", "")
URL = os.environ.get("DOCKET_FUZZ_URL", "")


def spare_token():
    """A new read-only token's name, for a `DELETE` meant for the fuzzer's own token."""
    import json
    import urllib.request
    import uuid

    name = "spare-" + uuid.uuid4().hex[:12]
    req = urllib.request.Request(
        URL + "/v1/tokens",
        data=json.dumps({"name": name, "scopes": ["read"]}).encode(),
        headers={"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"},
        method="POST",
    )
    urllib.request.urlopen(req, timeout=30).read()
    return name

if __name__ != "__main__":
    import schemathesis

    _out = open(STATUSES, "a", buffering=1) if STATUSES else None

    @schemathesis.hook
    def before_call(context, case, kwargs):
        if (
            case.operation.method.upper() == "DELETE"
            and case.operation.path == "/v1/tokens/{name}"
            and (case.path_parameters or {}).get("name") == TOKEN_NAME
        ):
            case.path_parameters["name"] = spare_token()

    @schemathesis.hook
    def after_call(context, case, response):
        if _out is None:
            return
        sent = response.request.headers.get("Authorization", "")
        mine = 1 if TOKEN and sent == "Bearer " + TOKEN else 0
        # schemathesis 4 gives seconds as a float (a timedelta in older versions).
        elapsed = response.elapsed or 0.0
        ms = 1000 * (elapsed.total_seconds() if hasattr(elapsed, "total_seconds") else float(elapsed))
        _out.write(
            f"{case.operation.method.upper()} {case.operation.path}\t{response.status_code}\t{mine}\t{ms:.1f}\n"
        )


def check(statuses_path, doc_path, unreached_only=False):
    import json
    from collections import Counter, defaultdict

    doc = json.load(open(doc_path))
    # The operations that need a token (`security: []` marks the open ones: /healthz,
    # /openapi.json, which schemathesis does not call).
    ops = sorted(
        f"{m.upper()} {p}"
        for p, item in doc["paths"].items()
        for m, op in item.items()
        if m in ("get", "put", "post", "delete", "patch") and op.get("security") != []
    )
    mine = defaultdict(Counter)  # operation -> status -> count, requests with the token
    total = 0
    spent = Counter()  # operation -> ms its answers took, to show where a run's time went
    for line in open(statuses_path):
        op, status, with_token, ms = line.rstrip("\n").split("\t")
        spent[op] += float(ms)
        total += 1
        if with_token == "1":
            mine[op][int(status)] += 1
    problems = []
    if total == 0:
        problems.append("no answer recorded: the hooks did not run (SCHEMATHESIS_HOOKS?)")
    for op in ops:
        seen = mine.get(op, Counter())
        if not any(s not in (401, 403) for s in seen):
            what = ", ".join(f"{s}×{n}" for s, n in sorted(seen.items())) or "no request"
            problems.append(f"{op}: never reached with the fuzzer's valid token (answers: {what})")
    for op, seen in sorted(mine.items()):
        refused = {s: n for s, n in seen.items() if s in (401, 403)}
        if refused:
            what = ", ".join(f"{s}×{n}" for s, n in sorted(refused.items()))
            problems.append(f"{op}: the fuzzer's admin token was refused ({what})")
    if unreached_only:
        # The operations a further pass should fuzz: those never reached, when nothing was refused
        # (a refused token is a failure another pass would hide).
        if not any(s in (401, 403) for c in mine.values() for s in c):
            for op in ops:
                if not any(s not in (401, 403) for s in mine.get(op, ())):
                    print(op)
        return 0
    reached = sum(1 for op in ops if any(s not in (401, 403) for s in mine.get(op, ())))
    print(f"auth check: {reached} of {len(ops)} operations answered the fuzzer's admin token "
          f"({sum(sum(c.values()) for c in mine.values())} of {total} requests carried it)")
    for p in problems:
        print("  " + p)
    # The budget is wall time (--max-time): on a slow backend the fuzzer reaches fewer
    # operations, so name where the time went.
    slow = ", ".join(f"{op} {ms / 1000:.1f} s" for op, ms in spent.most_common(5))
    print(f"  answers took {sum(spent.values()) / 1000:.1f} s in all; most: {slow}")
    return 1 if problems else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "unreached"):
        sys.exit("usage: api-fuzz-hooks.py check|unreached STATUSES OPENAPI.json")
    sys.exit(check(sys.argv[2], sys.argv[3], unreached_only=sys.argv[1] == "unreached"))
