import AllotJSON
import AllotTime
import Foundation
import Testing

@testable import AllotLog

@Suite("File descriptor sink")
struct FileDescriptorSinkTests {
    @Test("partial writes and EINTR: every byte is delivered once, in order")
    func partialWrites() {
        let line = Array("{\"msg\":\"hello, partial world\"}\n".utf8)
        var delivered: [UInt8] = []
        var calls = 0
        let ok = line.withUnsafeBytes { bytes in
            FileDescriptorLogSink.writeAll(bytes) { chunk in
                calls += 1
                if calls % 2 == 0 { return (-1, EINTR) }
                let n = min(3, chunk.count)
                delivered.append(contentsOf: chunk.prefix(n))
                return (n, 0)
            } waitWritable: {
                Issue.record("no EAGAIN in this test")
                return false
            }
        }
        #expect(ok)
        #expect(delivered == line)
    }

    @Test("EAGAIN waits for writability; a hard error or a descriptor that stays unwritable drops the line")
    func errors() {
        let line = Array("abcdef".utf8)
        var waits = 0
        var delivered: [UInt8] = []
        var failedOnce = false
        let ok = line.withUnsafeBytes { bytes in
            FileDescriptorLogSink.writeAll(bytes) { chunk in
                if !failedOnce {
                    failedOnce = true
                    return (-1, EAGAIN)
                }
                delivered.append(contentsOf: chunk)
                return (chunk.count, 0)
            } waitWritable: {
                waits += 1
                return true
            }
        }
        #expect(ok && waits == 1 && delivered == line)

        let dropped = line.withUnsafeBytes { bytes in
            FileDescriptorLogSink.writeAll(bytes) { _ in
                (-1, EPIPE)
            } waitWritable: {
                true
            }
        }
        #expect(!dropped)
        let stuck = line.withUnsafeBytes { bytes in
            FileDescriptorLogSink.writeAll(bytes) { _ in
                (-1, EAGAIN)
            } waitWritable: {
                false
            }
        }
        #expect(!stuck)
        let zero = line.withUnsafeBytes { bytes in
            FileDescriptorLogSink.writeAll(bytes) { _ in
                (0, 0)
            } waitWritable: {
                true
            }
        }
        #expect(!zero)
    }

    @Test("many threads writing long lines (beyond PIPE_BUF) to one pipe never interleave")
    func pipeInterleaving() async throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let (readEnd, writeEnd) = (fds[0], fds[1])
        defer { close(readEnd) }

        // Drain the pipe on a plain thread so writers block only on the pipe, never on the test.
        let collected = Collected()
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(readEnd, $0.baseAddress, $0.count) }
                if n > 0 {
                    collected.append(buffer[0..<n])
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            collected.finish()
        }
        reader.start()

        let sink = FileDescriptorLogSink(fileDescriptor: writeEnd)
        let logger = Logger(label: "pipe", sink: sink, clock: ManualClock(now: 1_795_316_400))
        let padding = String(repeating: "x", count: 6_000)  // each line > PIPE_BUF (4096)
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for i in 0..<40 { logger.info(padding, ["task": .int(Int64(task)), "i": .int(Int64(i))]) }
                }
            }
        }
        close(writeEnd)
        let bytes = await collected.wait()

        let lines = bytes.split(separator: 0x0A, omittingEmptySubsequences: false)
        #expect(lines.last?.isEmpty == true, "output ends with a newline")
        let records = lines.dropLast().map { try? JSON.parse($0) }
        #expect(records.count == 320)
        #expect(records.allSatisfy { $0?["msg"]?.stringValue == padding })
        let keys = Set(
            records.compactMap { r in r.flatMap { ($0["task"]?.int64Value ?? 0) * 100 + ($0["i"]?.int64Value ?? 0) } })
        #expect(keys.count == 320)
    }
}

/// Bytes read from the pipe, handed over once the reader saw end of file.
///
/// `@unchecked Sendable`: `bytes`, `done` and `waiter` are only touched while holding `lock`.
private final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var bytes: [UInt8] = []
    private var done = false
    private var waiter: CheckedContinuation<[UInt8], Never>?

    func append(_ chunk: ArraySlice<UInt8>) {
        lock.withLock { bytes.append(contentsOf: chunk) }
    }

    func finish() {
        let (continuation, result): (CheckedContinuation<[UInt8], Never>?, [UInt8]) = lock.withLock {
            done = true
            defer { waiter = nil }
            return (waiter, bytes)
        }
        continuation?.resume(returning: result)
    }

    func wait() async -> [UInt8] {
        await withCheckedContinuation { continuation in
            let ready: [UInt8]? = lock.withLock {
                if done { return bytes }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
