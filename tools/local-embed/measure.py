"""The figures of docs/src/embeddings.md for the local embedding server:
`python3 tools/local-embed/measure.py` (serves on a free port, posts over HTTP, stops it).
"""
import json, os, subprocess, time, urllib.request
run = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run")
t0 = time.time()
p = subprocess.Popen([run, "serve", "0"], stdout=subprocess.PIPE, text=True)
line = p.stdout.readline(); base = line.split()[1]
print("ready after %.2fs" % (time.time() - t0))
texts = ["how did I speed up the database last time?", "made the Postgres queries faster with a covering index",
 "fixed the login page CSS so the button is centred", "wrote release notes for version 2.3 of the mobile app",
 "planned the team offsite agenda and booked the venue", "debugged a flaky unit test in the payment service caused by time zones",
 "refactored the React component tree to remove prop drilling", "chose a colour palette for the marketing site"]
def post(inp):
    req = urllib.request.Request(base + "/embeddings", json.dumps({"model": "m", "input": inp}).encode(), {"content-type": "application/json"})
    t = time.time(); urllib.request.urlopen(req).read(); return time.time() - t
print("batch of 8: %.0f ms" % (post(texts) * 1000))
one = sorted(post(texts[0]) for _ in range(20))
print("one query p50 %.1f ms, max %.1f ms" % (one[10] * 1000, one[-1] * 1000))
long = ["word " * 400] * 32
print("batch of 32 x ~400 words: %.0f ms" % (post(long) * 1000))
# the python process is the exec'd child of the script
pid = p.pid
status = open(f"/proc/{pid}/status").read()
print([l for l in status.splitlines() if l.startswith(("VmHWM", "VmRSS"))])
p.terminate(); p.wait()
