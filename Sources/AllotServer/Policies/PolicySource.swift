import AllotAssets
import AllotCore
import AllotCrypto
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where policies come from (SPEC 10 and 13: `--policies DIR`, default `./policies` when it exists,
/// else the defaults built into the binary).
public enum PolicySource: Sendable, Equatable, CustomStringConvertible {
    /// `*.json` files of a directory, re-read when they change.
    case directory(String)
    /// The shipped `policies/*.json`, compiled into the binary (never change).
    case embedded

    /// The source for a `--policies` value: the directory when given; otherwise `./policies`
    /// when it exists (a checkout), else the embedded defaults (an installed binary).
    public static func resolve(_ option: String?, currentDirectory: String = FileManager.default.currentDirectoryPath)
        -> PolicySource
    {
        if let option, !option.isEmpty { return .directory(option) }
        let local = currentDirectory + "/policies"
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: local, isDirectory: &isDirectory), isDirectory.boolValue {
            return .directory("policies")
        }
        return .embedded
    }

    public var description: String {
        switch self {
        case .directory(let path): return path
        case .embedded: return "built-in policies"
        }
    }

    /// The policy files, sorted by name.
    public func files() throws(PolicyLoadError) -> [PolicyFile] {
        switch self {
        case .embedded:
            return AllotAssets.defaultPolicies.map { PolicyFile(name: $0.name, bytes: $0.bytes) }
        case .directory(let path):
            // Checked first: reading a file (or nothing) as a directory fails with an error that names neither
            // the path nor what was wanted ("(NSCocoaErrorDomain error 256.)" for a file on Linux).
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
            guard exists, isDirectory.boolValue else {
                throw PolicyLoadError(
                    message: "cannot read policy directory \(path): "
                        + (exists ? "it is a file, not a directory" : "there is no such directory")
                        + " (expected a directory holding the policy's *.json files: tiers.json, engine.json, "
                        + "upstreams.json, tenants.json, …)")
            }
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: path)
            } catch {
                throw PolicyLoadError(message: "cannot read policy directory \(path): \(error.localizedDescription)")
            }
            var files: [PolicyFile] = []
            for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
                guard let data = FileManager.default.contents(atPath: path + "/" + name) else {
                    throw PolicyLoadError(message: "cannot read policy file \(path)/\(name)")
                }
                files.append(PolicyFile(name: name, bytes: [UInt8](data)))
            }
            if files.isEmpty { throw PolicyLoadError(message: "policy directory \(path) has no .json files") }
            return files
        }
    }

    /// A cheap fingerprint of the directory so a watcher only re-reads and re-validates when something changed: per
    /// file its name and, following symlinks, the device, inode, size and modification and change times (to the
    /// nanosecond). Following them matters: a Kubernetes ConfigMap mounts `engine.json -> ..data/engine.json` and
    /// swaps `..data` to a new directory, and the link's own attributes never change (outside evaluation round 22:
    /// a swapped policy was never loaded, and nothing said so). A new file behind the link is a new inode; a file
    /// edited in place has new times, even within the same second and at the same size.
    public func fingerprint() -> String {
        guard case .directory(let path) = self else { return "embedded" }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: path) else { return "unreadable" }
        var parts: [String] = []
        for name in names.sorted() where name.hasSuffix(".json") && !name.hasPrefix(".") {
            var info = stat()
            guard stat(path + "/" + name, &info) == 0 else {
                parts.append("\(name):unreadable")
                continue
            }
            #if canImport(Darwin)
                let (modified, changed) = (info.st_mtimespec, info.st_ctimespec)
            #else
                let (modified, changed) = (info.st_mtim, info.st_ctim)
            #endif
            parts.append(
                "\(name):\(info.st_dev):\(info.st_ino):\(info.st_size):\(modified.tv_sec).\(modified.tv_nsec):"
                    + "\(changed.tv_sec).\(changed.tv_nsec)")
        }
        return parts.joined(separator: "|")
    }

    /// Reads and validates the policy; every problem is reported with file, JSON path and reason.
    public func load() throws(PolicyLoadError) -> LoadedPolicy {
        let files = try files()
        do {
            let policy = try Policy.load(files: files)
            return LoadedPolicy(policy: policy, files: files.map(\.name))
        } catch {
            throw PolicyLoadError(message: "policy rejected:\n" + error.description, issues: error.issues)
        }
    }
}

/// A validated policy with its version: the first 16 hex digits of the SHA-256 of its canonical
/// form, so the same rules give the same `policy_version` whatever the file layout.
public struct LoadedPolicy: Sendable {
    public var policy: Policy
    public var version: String
    public var files: [String]

    public init(policy: Policy, files: [String]) {
        self.policy = policy
        self.files = files
        self.version = String(SHA256.hash(policy.canonicalBytes).hex.prefix(16))
    }
}

/// A policy could not be loaded; the previous one (if any) stays in force.
public struct PolicyLoadError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var issues: [PolicyIssue]

    public init(message: String, issues: [PolicyIssue] = []) {
        self.message = message
        self.issues = issues
    }

    public var description: String { message }
}
