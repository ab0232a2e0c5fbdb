// Preloaded into the conformance suite (node --import): every request it makes to the
// server under test carries the server's bearer token (CONFORMANCE_BEARER_TOKEN). The
// suite has no option for it, and `serve --http` refuses requests without it.
const token = process.env.CONFORMANCE_BEARER_TOKEN;
if (!token) throw new Error("CONFORMANCE_BEARER_TOKEN is not set");
const original = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  headers.set("authorization", `Bearer ${token}`);
  return original(input, { ...init, headers });
};
