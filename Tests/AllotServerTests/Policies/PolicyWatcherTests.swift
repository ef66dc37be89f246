import AllotAssets
import AllotCore
import AllotLog
import Foundation
import Testing

@testable import AllotServer

#if canImport(Glibc)
    import Glibc
#endif

/// The policy watcher sees every way a policy directory changes, the Kubernetes ConfigMap layout included.
@Suite struct PolicyWatcherTests {
    private static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/allot-policy-watch-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Writes the default policies into `directory`, `engine.json`'s safety margin replaced by `margin`.
    private static func writePolicies(to directory: String, margin: String) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        for file in AllotAssets.defaultPolicies {
            var text = String(decoding: file.bytes, as: UTF8.self)
            if file.name == "engine.json" {
                let replaced = text.replacingOccurrences(
                    of: "\"safety_margin\": 0.02", with: "\"safety_margin\": \(margin)")
                #expect(replaced != text)
                text = replaced
            }
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + file.name))
        }
    }

    private static func watcher(_ path: String) throws -> PolicyWatcher {
        try PolicyWatcher(source: .directory(path), logger: .disabled) { _, _ in }
    }

    /// A ConfigMap volume: `NAME.json -> ..data/NAME.json`, `..data -> ..2026_…` swapped atomically to a new
    /// directory on an update. The links' own attributes never change; only following them shows the change. Before,
    /// the swapped policy was never loaded and nothing said so (outside evaluation round 22).
    @Test func aConfigMapSwapAndAnEditBehindASymlinkAreReloaded() async throws {
        let root = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        try Self.writePolicies(to: root + "/..v1", margin: "0.05")
        try FileManager.default.createSymbolicLink(atPath: root + "/..data", withDestinationPath: "..v1")
        for file in AllotAssets.defaultPolicies {
            try FileManager.default.createSymbolicLink(
                atPath: root + "/" + file.name, withDestinationPath: "..data/" + file.name)
        }
        let watcher = try Self.watcher(root)
        let original = await watcher.current
        #expect(original.policy.allocation.safetyMargin == 0.05)
        #expect(await watcher.check(now: 1) == false)

        // The kubelet's update: a new directory, a new link, renamed over `..data`.
        try Self.writePolicies(to: root + "/..v2", margin: "0.1")
        try FileManager.default.createSymbolicLink(atPath: root + "/..data_tmp", withDestinationPath: "..v2")
        #expect(rename(root + "/..data_tmp", root + "/..data") == 0)
        #expect(await watcher.check(now: 2) == true)
        #expect(await watcher.current.policy.allocation.safetyMargin == 0.1)

        // The file behind the link edited in place, the same size.
        try Self.writePolicies(to: root + "/..v2", margin: "0.3")
        #expect(await watcher.check(now: 3) == true)
        #expect(await watcher.current.policy.allocation.safetyMargin == 0.3)
        #expect(await watcher.check(now: 4) == false)
    }

    #if canImport(Glibc)  // st_mtim: Linux's name for the field
        /// A plain directory: a file of the same size renamed into place with the old one's modification time kept
        /// (`rsync -a`, `cp -p` then `mv`, unpacking an archive) is a change; names, sizes and modification times alone
        /// did not see it (outside evaluation round 22).
        @Test func aSameSizeFileRenamedInWithTheOldTimeIsReloaded() async throws {
            let root = try Self.directory()
            defer { try? FileManager.default.removeItem(atPath: root) }
            try Self.writePolicies(to: root, margin: "0.1")
            let watcher = try Self.watcher(root)
            let engine = root + "/engine.json"
            var old = stat()
            #expect(stat(engine, &old) == 0)
            try Self.writePolicies(to: root + "/next", margin: "0.2")
            let next = root + "/next/engine.json"
            var times = [old.st_atim, old.st_mtim]
            #expect(utimensat(AT_FDCWD, next, &times, 0) == 0)
            #expect(rename(next, engine) == 0)
            var new = stat()
            #expect(stat(engine, &new) == 0)
            #expect(new.st_size == old.st_size)
            #expect(new.st_mtim.tv_sec == old.st_mtim.tv_sec && new.st_mtim.tv_nsec == old.st_mtim.tv_nsec)
            #expect(await watcher.check(now: 1) == true)
            #expect(await watcher.current.policy.allocation.safetyMargin == 0.2)
        }
    #endif
}
