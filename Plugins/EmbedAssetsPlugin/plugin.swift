import Foundation
import PackagePlugin

/// Embeds the package's data files into the `AllotAssets` module at build time, so that the built
/// `allot` binary needs no files beside it and works from any directory.
///
/// Sources of truth stay where people edit them: `migrations/*.sql` (the schema), `policies/*.json`
/// (the default policies), `scenarios/*.json` (the simulator's built-in scenarios) and `Sources/AllotAssets/Files/*` (dashboard, OpenAPI document).
/// The plugin runs on every build; the file list is part of the command, so adding, removing or
/// editing a file regenerates the embedded copy.
@main
struct EmbedAssetsPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let groups: [(name: String, directory: URL, suffix: String?)] = [
            ("migrations", root.appending(path: "migrations"), ".sql"),
            ("policies", root.appending(path: "policies"), ".json"),
            ("scenarios", root.appending(path: "scenarios"), ".json"),
            ("files", target.directoryURL.appending(path: "Files"), nil),
        ]
        var arguments: [String] = []
        var inputs: [URL] = []
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedAssets.generated.swift")
        arguments.append(output.path)
        for group in groups {
            arguments.append("--group")
            arguments.append(group.name)
            let names = (try? FileManager.default.contentsOfDirectory(atPath: group.directory.path)) ?? []
            for name in names.sorted() where !name.hasPrefix(".") {
                if let suffix = group.suffix, !name.hasSuffix(suffix) { continue }
                let url = group.directory.appending(path: name)
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue
                else { continue }
                arguments.append(url.path)
                inputs.append(url)
            }
        }
        return [
            .buildCommand(
                displayName: "Embedding \(inputs.count) asset files into \(target.name)",
                executable: try context.tool(named: "AllotEmbedTool").url,
                arguments: arguments,
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
