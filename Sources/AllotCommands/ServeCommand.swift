import AllotArguments
import AllotHTTP
import AllotLog
import AllotSQLite
import AllotServer
import AllotTime

#if canImport(Glibc)
    import Glibc
#endif

/// `allot serve`: runs the service until SIGTERM or SIGINT, then shuts down gracefully.
enum ServeCommand {
    static func configuration(from command: ParsedCommand) throws(UsageError) -> ServeConfiguration {
        let listen = try command.hostPort("listen") ?? HostPort(host: "127.0.0.1", port: 8080)
        var configuration = ServeConfiguration(
            host: listen.host, port: Int(listen.port), dataDirectory: command.string("data") ?? "./allot-data",
            policies: PolicySource.resolve(command.string("policies")), dev: command.flag("dev"),
            metricsRequireToken: command.flag("metrics-auth"))
        configuration.maxBodyBytes = try command.int("max-body-bytes", in: 1024...(1 << 30)) ?? configuration.maxBodyBytes
        configuration.maxConnections = try command.int("max-connections", in: 1...1_000_000) ?? configuration.maxConnections
        configuration.idleTimeoutSeconds =
            try command.double("idle-timeout", in: 0.1...86_400) ?? configuration.idleTimeoutSeconds
        configuration.headerTimeoutSeconds =
            try command.double("header-timeout", in: 0.1...3600) ?? configuration.headerTimeoutSeconds
        configuration.eventRetentionSeconds =
            (try command.double("event-retention", in: 0.01...(24 * 365)) ?? 24) * 3600
        configuration.rollupRetentionSeconds =
            (try command.double("rollup-retention", in: 0.01...3650) ?? 30) * 86_400
        configuration.synchronous = command.string("synchronous") == "normal" ? .normal : .full
        return configuration
    }

    static func logger(from command: ParsedCommand) throws(UsageError) -> Logger {
        let name = command.string("log-level") ?? "info"
        guard let level = LogLevel(name: name) else {
            throw command.invalidValue("log-level", name, expected: "a log level")
        }
        return Logger(label: "allot", minimumLevel: level)
    }

    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        let configuration = try configuration(from: command)
        let logger = try logger(from: command)
        // Trap before starting so a signal during start-up is not lost.
        let trap = await SignalTrap(signals: [SIGTERM, SIGINT])
        let service: AllotService
        do {
            service = try await AllotService.start(configuration, logger: logger, announce: { output.err($0) })
        } catch {
            output.err("allot serve: \(error.message)")
            return 1
        }
        let signal = await trap.wait()
        logger.notice("signal received", ["signal": "\(signal.map { String($0) } ?? "none")"])
        await service.shutdown()
        return 0
    }
}
