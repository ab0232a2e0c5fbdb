"""A stdio MCP session against a `reasoning-ledger` binary, for tools/layout/*.

`Session(argv)` spawns the server with a fresh data directory (under `$TMPDIR`, removed by
`close()`), answers `initialize`; `call(name, arguments)` is one `tools/call`;
`memory()` reads `/proc/PID/smaps_rollup` and `status` (VmRSS, private, anonymous, threads).
Standard library only: the tools run wherever python3 does.
"""

import json
import os
import shutil
import subprocess
import tempfile


def thought_arguments(number, total):
    return {
        "thought": f"thought number {number} about the problem at hand",
        "thoughtNumber": number,
        "totalThoughts": total,
        "nextThoughtNeeded": True,
    }


class Session:
    def __init__(self, argv, *, pass_fds=()):
        self.data_dir = tempfile.mkdtemp(prefix="rl-layout-")
        self.process = subprocess.Popen(
            list(argv) + ["--data-dir", self.data_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            pass_fds=pass_fds,
        )
        self.next_id = 0
        self.request("initialize", {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "tools/layout", "version": "1"},
        })
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.process.stdin.write((json.dumps(message) + "\n").encode())
        self.process.stdin.flush()

    def request(self, method, params=None):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        answer = json.loads(self.process.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    def call(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments})

    def thought(self, number, total):
        return self.call("sequentialthinking", thought_arguments(number, total))

    def thoughts_in_flight(self, first, count, total, in_flight):
        """Thoughts first..first+count, `in_flight` requests outstanding at a time (as the
        bench's 8-in-flight and RSS runs send them)."""
        sent, answered, next_number = 0, 0, first
        while answered < count:
            while sent < count and sent - answered < in_flight:
                self.next_id += 1
                self.send({"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                           "params": {"name": "sequentialthinking",
                                      "arguments": thought_arguments(next_number, total)}})
                sent, next_number = sent + 1, next_number + 1
            answer = json.loads(self.process.stdout.readline())
            if "id" in answer:
                if "error" in answer:
                    raise RuntimeError(f"sequentialthinking: {answer['error']}")
                answered += 1

    def memory(self):
        """KiB figures of the server process (pid of the spawned program)."""
        pid = self.process.pid
        rollup = {}
        with open(f"/proc/{pid}/smaps_rollup") as file:
            for line in file.readlines()[1:]:
                key, value = line.split()[:2]
                rollup[key.rstrip(":")] = int(value)
        status = {}
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                key, _, value = line.partition(":")
                status[key] = value.split()[0] if value.split() else ""
        return {
            "VmRSS": int(status["VmRSS"]),
            "RssFile": int(status["RssFile"]),
            "RssAnon": int(status["RssAnon"]),
            "Private": rollup["Private_Clean"] + rollup["Private_Dirty"],
            "threads": len(os.listdir(f"/proc/{pid}/task")),
        }

    def close(self):
        self.process.stdin.close()
        self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)
