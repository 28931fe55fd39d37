"""The chaos suite's reads of every task through a node's API (keyset pages; the other node when
one does not answer):
    chaos_tasks.py PORT_A PORT_B completed      # "id attempt" of each completed task
    chaos_tasks.py PORT_A PORT_B all TSV        # "id attempt errors" lines into TSV, and one line:
                                                # total completed stuck discarded payloads bad_results
"""
import json
import sys
import urllib.request

PORTS = sys.argv[1:3]


def get(path):
    for port in PORTS:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
                return json.load(r)
        except OSError:
            pass
    raise SystemExit("neither node answers")


def tasks(query):
    after = None
    while True:
        page = get(f"/v1/tasks?{query}limit=1000" + (f"&after={after}" if after else ""))
        yield from page["tasks"]
        after = page.get("next_after")
        if not after or not page["tasks"]:
            return


if sys.argv[3] == "completed":
    for t in tasks("state=completed&"):
        print(t["id"], t["attempt"])
else:
    every = list(tasks(""))
    with open(sys.argv[4], "w") as out:
        for t in every:
            out.write(f"{t['id']} {t['attempt']} {len(t['errors'])}\n")
    states = [t["state"] for t in every]
    bad = sum(1 for t in every if t["state"] == "completed"
              and not (isinstance(t["result"], dict) and t["result"].get("id") == t["id"]))
    print(len(every), states.count("completed"),
          sum(states.count(s) for s in ("scheduled", "available", "running", "retryable")),
          states.count("discarded") + states.count("cancelled"),
          len({json.dumps(t["payload"]) for t in every}), bad)
