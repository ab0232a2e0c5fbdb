"""`tools/local-embed/run check`: the served model, asked over HTTP like the ledger asks
it, puts a paraphrase (no shared word) nearer its target than any distractor.

Starts `run serve 0`, waits for its "ready" line on the pipe, posts one batch, prints the
cosine of the question with each text, exits non-zero if the target is not first.
"""
import json
import subprocess
import sys
import urllib.request

import numpy as np

TARGET = "made the Postgres queries faster with a covering index"
DISTRACTORS = [
    "fixed the login page CSS so the button is centred",
    "wrote release notes for version 2.3 of the mobile app",
    "planned the team offsite agenda and booked the venue",
    "debugged a flaky unit test in the payment service caused by time zones",
    "refactored the React component tree to remove prop drilling",
    "chose a colour palette for the marketing site",
]
QUESTION = "how did I speed up the database last time?"


def main():
    run = sys.argv[1]
    model = subprocess.run([run, "model"], check=True, capture_output=True, text=True).stdout.strip()
    server = subprocess.Popen([run, "serve", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        if not line.startswith("ready "):
            sys.exit(f"tools/local-embed: the server did not start (said {line!r})")
        base_url = line.split()[1]
        texts = [QUESTION, TARGET] + DISTRACTORS
        body = json.dumps({"model": model, "input": texts}).encode()
        request = urllib.request.Request(f"{base_url}/embeddings", body,
                                         {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = json.load(answer)["data"]
        vectors = np.array([d["embedding"] for d in sorted(data, key=lambda d: d["index"])])
        question, rest = vectors[0], vectors[1:]
        scores = rest @ question / (np.linalg.norm(rest, axis=1) * np.linalg.norm(question))
        for text, score in sorted(zip(texts[1:], scores), key=lambda p: -p[1]):
            print(f"{score:.3f}  {text}")
        if int(np.argmax(scores)) != 0:
            sys.exit("tools/local-embed: the paraphrase's target is not the nearest text")
        print(f"ok: the target leads the nearest distractor by {scores[0] - max(scores[1:]):.3f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
