import Foundation

/// A data file compiled into the binary by `EmbedAssetsPlugin`.
public struct EmbeddedFile: Sendable, Equatable {
    /// The file's name without its directory, e.g. `0001_init.sql`.
    public let name: String
    /// The file's exact bytes.
    public let bytes: [UInt8]

    public init(name: String, bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }

    /// The contents decoded as UTF-8 (invalid sequences repaired).
    public var text: String { String(decoding: bytes, as: UTF8.self) }
}

/// The files the binary carries so that it works from any directory, with no files beside it.
///
/// The sources of truth stay in the repository: `migrations/` (the only source of the schema),
/// `policies/` (the default policies) and `Sources/AllotAssets/Files/` (dashboard, OpenAPI).
public enum AllotAssets {
    /// `migrations/*.sql`, sorted by file name (which starts with the migration number).
    public static let migrations: [EmbeddedFile] = decode(GeneratedAssets.migrations)

    /// `policies/*.json`, sorted by file name: the policies `allot serve` uses when no
    /// policies directory is given and `./policies` does not exist.
    public static let defaultPolicies: [EmbeddedFile] = decode(GeneratedAssets.policies)

    /// `scenarios/*.json`, sorted by file name: the simulator's built-in scenarios
    /// (`allot simulate --list`), one file per scenario, named after the scenario.
    public static let scenarios: [EmbeddedFile] = decode(GeneratedAssets.scenarios)

    /// Other embedded files (`dashboard.html`, `openapi.json`), by name.
    public static let files: [String: EmbeddedFile] = Dictionary(
        uniqueKeysWithValues: decode(GeneratedAssets.files).map { ($0.name, $0) }
    )

    /// One embedded file from `Sources/AllotAssets/Files`, or nil.
    public static func file(_ name: String) -> EmbeddedFile? { files[name] }

    private static func decode(_ entries: [(name: String, base64: String)]) -> [EmbeddedFile] {
        entries.map { entry in
            // The tool wrote these with `base64EncodedString()`, so decoding cannot fail.
            EmbeddedFile(name: entry.name, bytes: [UInt8](Data(base64Encoded: entry.base64) ?? Data()))
        }
        .sorted { $0.name < $1.name }
    }
}
