// AllotHTTP — Allot's own HTTP/1.1 server and client (SPEC §2: "the HTTP server … is the project's
// own, kept small, tested hard, and isolated in its own module").
//
// Architecture
// ------------
// - `EventLoop`: one thread running `epoll_wait` (level-triggered) over non-blocking sockets, with a
//   locked mailbox plus an `eventfd` for work submitted from other threads, and a heap of monotonic
//   deadlines. Every descriptor is read, written and closed on its loop's thread only.
// - `HTTPServer` (an actor; the public entry point) owns one or more loops, each with an
//   `HTTPListener` (accepting with `accept4(SOCK_NONBLOCK | SOCK_CLOEXEC)`, enforcing the connection
//   limit) and its `HTTPServerConnection`s (parsing, limits, timeouts, writing).
// - Each request's handler runs as a Swift task on the cooperative pool; its response comes back to
//   the loop through the mailbox. An idle or long-polling connection therefore costs a registration
//   and a few kilobytes, never a thread.
// - `Router` maps method + pattern to handlers and renders every failure as the one JSON error
//   shape (`HTTPError`). Test API logic with `await router.respond(to: HTTPRequest(…))`, no sockets.
// - `HTTPClient` is the same machinery in the other direction (its own loop, pooled keep-alive
//   connections), for gateways, benchmarks and tests.
//
// Decisions worth knowing
// -----------------------
// - Strict parsing (see `RequestHeadParser`): bare LF line endings are rejected with 400, as are
//   `Transfer-Encoding` together with `Content-Length`, repeated `Content-Length`, obsolete line
//   folding and control bytes in heads. Ambiguity is where request smuggling lives.
// - Chunked request bodies are supported (decoded before the handler sees the body, bounded by
//   `maxBodyBytes`); other transfer codings get 501.
// - Requests on one connection are handled one at a time, so pipelined requests are answered in
//   order; a client that disconnects while its request is held has the handler's task cancelled.
// - Limits answer with their own status: head 431, request line 414, body 413, slow head or body 408,
//   connections 503 (then close); unsupported versions 505; malformed requests 400 and close.
