// swift-tools-version: 6.1
//
// Allot — continuous per-tenant LLM quota renegotiation.
//
// Zero package dependencies by design: the toolchain (Foundation, Dispatch, Glibc, XCTest,
// Swift Testing) and libsqlite3 through the `CSQLite` system library. Imports only point
// downward: utilities → storage/HTTP/maths → loop → server/simulation → commands → `allot`.
import PackageDescription

let package = Package(
    name: "allot",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "allot", targets: ["allot"]),
        .library(name: "AllotEnforcement", targets: ["AllotEnforcement"]),
    ],
    targets: [
        // MARK: System libraries
        .systemLibrary(
            name: "CSQLite",
            path: "Sources/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        /// epoll, eventfd and friends: not exported by `import Glibc`. Header-only, nothing to link.
        .systemLibrary(name: "CLinux", path: "Sources/CLinux"),

        // MARK: Small self-written utilities (each tested hard, each in its own module)
        .target(name: "AllotJSON"),
        .target(name: "AllotTime"),
        .target(name: "AllotLog", dependencies: ["AllotTime", "AllotJSON"]),
        .target(name: "AllotArguments"),
        .target(name: "AllotCrypto"),
        .target(name: "AllotMetrics"),

        // MARK: Embedded files (migrations/, policies/, the dashboard, openapi.json)
        .executableTarget(name: "AllotEmbedTool", path: "Plugins/AllotEmbedTool"),
        .plugin(name: "EmbedAssetsPlugin", capability: .buildTool(), dependencies: ["AllotEmbedTool"]),
        .target(
            name: "AllotAssets",
            exclude: ["Files"],
            plugins: ["EmbedAssetsPlugin"]
        ),

        // MARK: Infrastructure
        .target(name: "AllotSQLite", dependencies: ["CSQLite"]),
        .target(name: "AllotHTTP", dependencies: ["CLinux", "AllotJSON", "AllotTime", "AllotLog"]),

        // MARK: Domain
        /// The gateway protocol's wire types (snapshots), shared by the publisher and the gateways.
        .target(name: "AllotProtocol", dependencies: ["AllotJSON", "AllotTime"]),
        /// Provider rate-limit headers and error classification; shared by server and gateways.
        .target(name: "AllotSignals", dependencies: ["AllotTime", "AllotJSON"]),
        /// Pure allocation maths and the policy model. No I/O, no clock.
        .target(name: "AllotCore", dependencies: ["AllotJSON", "AllotTime"]),
        .target(
            name: "AllotStore",
            dependencies: ["AllotSQLite", "AllotCore", "AllotSignals", "AllotTime", "AllotJSON", "AllotAssets", "AllotLog"]
        ),
        .target(
            name: "AllotLoop",
            dependencies: [
                "AllotCore", "AllotStore", "AllotSignals", "AllotTime", "AllotJSON", "AllotLog", "AllotMetrics",
                "AllotProtocol",
            ]
        ),
        .target(
            name: "AllotEnforcement",
            dependencies: ["AllotSignals", "AllotHTTP", "AllotJSON", "AllotTime", "AllotProtocol", "AllotCore"]
        ),
        .target(
            name: "AllotServer",
            dependencies: [
                "AllotHTTP", "AllotLoop", "AllotStore", "AllotCore", "AllotCrypto", "AllotMetrics", "AllotLog",
                "AllotJSON", "AllotAssets", "AllotTime", "AllotSignals", "AllotProtocol", "CLinux",
            ]
        ),
        .target(
            name: "AllotSimulation",
            dependencies: [
                "AllotLoop", "AllotEnforcement", "AllotCore", "AllotStore", "AllotSignals", "AllotTime", "AllotJSON",
                "AllotProtocol", "AllotHTTP", "AllotAssets",
            ]
        ),
        .target(
            name: "AllotCommands",
            dependencies: [
                "AllotServer", "AllotSimulation", "AllotArguments", "AllotStore", "AllotCore", "AllotLog",
                "AllotCrypto", "AllotHTTP", "AllotJSON", "AllotTime", "AllotAssets", "AllotLoop", "AllotEnforcement",
                "AllotSignals", "AllotSQLite", "AllotProtocol",
            ]
        ),
        .executableTarget(name: "allot", dependencies: ["AllotCommands"]),

        // MARK: Tests
        .testTarget(name: "AllotJSONTests", dependencies: ["AllotJSON"]),
        .testTarget(name: "AllotTimeTests", dependencies: ["AllotTime"]),
        .testTarget(name: "AllotLogTests", dependencies: ["AllotLog", "AllotTime", "AllotJSON"]),
        .testTarget(name: "AllotArgumentsTests", dependencies: ["AllotArguments"]),
        .testTarget(name: "AllotCryptoTests", dependencies: ["AllotCrypto"]),
        .testTarget(name: "AllotMetricsTests", dependencies: ["AllotMetrics"]),
        .testTarget(name: "AllotSQLiteTests", dependencies: ["AllotSQLite", "AllotAssets"]),
        .testTarget(name: "AllotHTTPTests", dependencies: ["AllotHTTP", "AllotJSON"]),
        .testTarget(name: "AllotProtocolTests", dependencies: ["AllotProtocol", "AllotJSON"]),
        .testTarget(name: "AllotSignalsTests", dependencies: ["AllotSignals", "AllotTime", "AllotJSON"], resources: [.copy("Fixtures")]),
        .testTarget(name: "AllotCoreTests", dependencies: ["AllotCore", "AllotJSON", "AllotAssets"]),
        .testTarget(
            name: "AllotStoreTests", dependencies: ["AllotStore", "AllotSQLite", "AllotCore", "AllotSignals", "AllotAssets"]),
        .testTarget(name: "AllotLoopTests", dependencies: ["AllotLoop", "AllotStore", "AllotCore"]),
        .testTarget(name: "AllotEnforcementTests", dependencies: ["AllotEnforcement", "AllotHTTP", "AllotJSON"]),
        .testTarget(
            name: "AllotServerTests",
            dependencies: ["AllotServer", "AllotHTTP", "AllotStore", "AllotLoop", "AllotCore", "AllotJSON", "AllotCrypto", "AllotTime", "AllotAssets", "AllotLog"]
        ),
        .testTarget(name: "AllotSimulationTests", dependencies: ["AllotSimulation", "AllotJSON", "AllotSignals", "AllotCore"]),
        .testTarget(
            name: "AllotCommandsTests",
            dependencies: [
                "AllotCommands", "AllotServer", "AllotEnforcement", "AllotHTTP", "AllotJSON", "AllotLoop", "AllotTime",
                "AllotAssets",
            ]
        ),
    ]
)
