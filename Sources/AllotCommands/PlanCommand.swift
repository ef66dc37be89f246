import AllotArguments
import AllotCore
import AllotJSON
import AllotServer
import Foundation

/// `allot plan FILE|- [--policy DIR] [--pretty]`: one what-if allocation, printed as JSON.
enum PlanCommand {
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
            guard let data = FileManager.default.contents(atPath: file) else {
                output.err("allot plan: cannot read \(file)")
                return 1
            }
            bytes = [UInt8](data)
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
