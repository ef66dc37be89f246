import AllotJSON
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import AllotLog

/// The queue in front of standard error: a reader that stalls never stalls the writer (outside evaluation round 40:
/// with stderr a full pipe, the loop and every request hung in `write(2)`); what did not fit is counted and said.
@Suite struct QueuedLogSinkTests {
    /// A sink whose writes block until released, like `write(2)` to a pipe nobody reads.
    final class StuckSink: LogSink, Sendable {
        let gate = DispatchSemaphore(value: 0)
        let entered = DispatchSemaphore(value: 0)
        let received = Mutex<[String]>([])
        let stuck = Mutex(true)

        func write(line: [UInt8]) {
            if stuck.withLock({ $0 }) {
                entered.signal()
                gate.wait()
            }
            received.withLock { $0.append(String(decoding: line, as: UTF8.self)) }
        }

        func release() {
            stuck.withLock { $0 = false }
            gate.signal()
        }
    }

    /// A sink that loses the lines that say "lost", as a pipe with no reader does, and counts them.
    final class LosingSink: DropCountingLogSink, Sendable {
        let received = Mutex<[String]>([])
        let dropped = Mutex(0)

        func write(line: [UInt8]) {
            let text = String(decoding: line, as: UTF8.self)
            if text.contains("lost") {
                dropped.withLock { $0 += 1 }
            } else {
                received.withLock { $0.append(text) }
            }
        }

        func takeDroppedLines() -> Int {
            dropped.withLock { count in
                defer { count = 0 }
                return count
            }
        }
    }

    /// Lines the sink itself lost (a pipe without a reader: a log shipper restarting) are said too (round 40's
    /// verification: 265 lost without a word).
    @Test func linesTheSinkLostAreCountedToo() throws {
        let losing = LosingSink()
        let sink = QueuedLogSink(wrapping: losing, capacityBytes: 1 << 20)
        for number in 1...3 { sink.write(line: Array("{\"msg\":\"lost \(number)\"}\n".utf8)) }
        #expect(sink.flush(timeout: 60))
        sink.write(line: Array("{\"msg\":\"kept\"}\n".utf8))
        #expect(sink.flush(timeout: 60))
        let received = losing.received.withLock { $0 }
        #expect(received.last == "{\"msg\":\"kept\"}\n")
        let notices = try received.dropLast().map { try JSON.parse(Array($0.utf8)) }
        #expect(notices.allSatisfy { $0["msg"] == "log lines dropped: the log output did not keep up" })
        #expect(notices.compactMap { $0["dropped"]?.int64Value }.reduce(0, +) == 3)
    }

    static func line(_ number: Int) -> [UInt8] {
        Array("{\"msg\":\"line \(number)\"}\n".utf8)  // 17 or 18 bytes
    }

    @Test func aStuckReaderNeverBlocksTheWriterAndTheDroppedLinesAreCounted() async throws {
        let stuck = StuckSink()
        let sink = QueuedLogSink(wrapping: stuck, capacityBytes: 100)
        sink.write(line: Self.line(0))
        // The sink's thread is now blocked handing line 0 on, as on a full pipe.
        await withCheckedContinuation { (entered: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                stuck.entered.wait()
                entered.resume()
            }
        }
        // Five lines fit in the 100 bytes; the 45 after them are dropped at once instead of waiting.
        for number in 1...50 { sink.write(line: Self.line(number)) }
        #expect(sink.droppedLines == 45)
        #expect(!sink.flush(timeout: 0.01))  // the reader is still stuck
        stuck.release()
        #expect(sink.flush(timeout: 60))
        sink.write(line: Self.line(51))
        #expect(sink.flush(timeout: 60))
        let received = stuck.received.withLock { $0 }
        #expect(received.count == 8)
        #expect(Array(received.prefix(6)) == (0...5).map { String(decoding: Self.line($0), as: UTF8.self) })
        let notice = try JSON.parse(Array(received[6].utf8))
        #expect(notice["level"] == "warning")
        #expect(notice["msg"] == "log lines dropped: the log output did not keep up")
        #expect(notice["logger"] == "log")
        #expect(notice["dropped"] == 45)
        #expect(received[7] == String(decoding: Self.line(51), as: UTF8.self))
        #expect(sink.droppedLines == 0)
    }
}
