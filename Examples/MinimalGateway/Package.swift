// swift-tools-version: 6.1
//
// A minimal gateway enforcing Allot's allocations with the AllotEnforcement library.
// Not part of the Allot package: build and run it from this directory against a running `allot serve`:
//
//     ALLOT_URL=http://127.0.0.1:8080 ALLOT_TOKEN=… swift run MinimalGateway
import PackageDescription

let package = Package(
    name: "MinimalGateway",
    platforms: [.macOS(.v14)],
    dependencies: [.package(name: "allot", path: "../..")],
    targets: [
        .executableTarget(
            name: "MinimalGateway",
            dependencies: [.product(name: "AllotEnforcement", package: "allot")]
        )
    ]
)
