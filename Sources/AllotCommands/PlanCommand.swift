import AllotArguments
import AllotCore
import AllotJSON
import AllotServer
import Foundation
import Glibc

/// `allot plan FILE|- [--policy DIR] [--pretty]`: one what-if allocation, printed as JSON.
enum PlanCommand {
    struct ReadFailure: Error {
        var message: String
    }

    /// The file's bytes, or why they cannot be read in the system's words ("No such file or directory",
    /// "Permission denied", "Is a directory": outside evaluation round 27 met a bare "cannot read").
    static func read(_ path: String) -> Result<[UInt8], ReadFailure> {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return .failure(ReadFailure(message: String(cString: strerror(errno)))) }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(ReadFailure(message: String(cString: strerror(errno))))
            }
            if count == 0 { return .success(bytes) }
            bytes.append(contentsOf: chunk[..<count])
        }
    }

    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        let file = command.positional("file") ?? "-"
        let policy: LoadedPolicy
        do throws(PolicyLoadError) {
            policy = try PolicySource.resolve(command.string("policy")).load()
        } catch {
            output.err("allot plan: \(error.message)")
            return 1
        }
        let bytes: [UInt8]
        if file == "-" {
            bytes = [UInt8](FileHandle.standardInput.readDataToEndOfFile())
        } else {
            switch Self.read(file) {
            case .success(let contents): bytes = contents
            case .failure(let reason):
                output.err("allot plan: cannot read \(file): \(reason.message)")
                return 1
            }
        }
        do {
            // A file a person saved, perhaps with a byte order mark (`POST /v1/plan` stays strict).
            let result = try Plan.run(bytes: JSON.withoutByteOrderMark(bytes), policy: policy.policy)
            if command.flag("pretty") {
                let json = try JSON.parse(result)
                output.out(json.serializedString(pretty: true))
            } else {
                output.out(String(decoding: result, as: UTF8.self))
            }
            return 0
        } catch let error as PlanError {
            output.err("allot plan: \(error.message)")
            return 1
        }
    }
}
