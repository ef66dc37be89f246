import AllotCore
import Foundation
import Testing

@testable import AllotLoop

/// Numbers the inputs accept at their edges (a sliver of an allocation, a policy's tiny window or huge
/// interval, a damaged saved state) are carried through without trapping in a conversion to an integer.
@Suite struct LoopExtremeValueTests {
    /// A tenant served 5 rpm of an allocation of 10⁻³⁰⁰ is served 5·10³⁰²%: the signal's number went past
    /// Int64, and converting it trapped.
    @Test func aNumberPastInt64IsWrittenAsADouble() {
        #expect(SignalText.percent(5 / 1e-300) == "5e+302%")
        #expect(SignalText.number(1e300) == "1e+300")
        #expect(SignalText.number(-1e300) == "-1e+300")
        #expect(SignalText.number(.infinity) == "∞")
        // Ordinary numbers are unchanged.
        #expect(SignalText.number(123_456.7) == "123457")
        #expect(SignalText.number(12.34) == "12.3")
        #expect(SignalText.number(-3) == "-3")
        #expect(SignalText.percent(0.333) == "33.3%")
    }

    /// A policy accepts any positive `short_window_s`: with 10⁻³⁰⁰ s the slices are so thin that an instant's
    /// index is infinite, and converting it trapped on the first event.
    @Test func thinSlicesGiveAClampedIndex() {
        var ring = SliceRing<CountSlice>(window: 1e-300, slices: 12)
        #expect(ring.index(of: 1_800_000_000) == 1 << 53)
        #expect(ring.index(of: -1_800_000_000) == -(1 << 53))
        #expect(ring.slot(for: ring.index(of: 1_800_000_000)) != nil)
        // Ordinary slices are unchanged: 5 s each for a 60 s window.
        let ordinary = SliceRing<CountSlice>(window: 60, slices: 12)
        #expect(ordinary.index(of: 1_800_000_004.9) == 360_000_000)
        #expect(ordinary.index(of: -0.1) == -1)
    }

    /// Loop settings built in code take any positive interval (policy files are held to 1–60 s): 10³⁰⁰ s in
    /// milliseconds is past Int.max, and converting it trapped when the first snapshot was assembled.
    @Test func aHugeIntervalGivesARefreshThatFits() {
        #expect(SnapshotAssembler.refreshMilliseconds(loopPolicy(interval: 1e300, lease: 1e300)) == Int(Int32.max))
        #expect(SnapshotAssembler.refreshMilliseconds(loopPolicy(interval: 5)) == 5_000)
        #expect(SnapshotAssembler.refreshMilliseconds(loopPolicy(interval: 0.0001)) == 1)
    }

    /// A damaged saved state with a bucket of 10³⁰ (a Float, past Int.max) or below 0: the bucket is skipped, as
    /// one out of the scale always was, instead of trapping in its conversion.
    @Test func aDamagedHistogramBucketIsSkipped() throws {
        let json = #"{"buckets": [[1e30, 1], [-1e30, 1], [3, 2], [100000, 1]], "stale": false}"#
        let decoded = try JSONDecoder().decode(DecayingHistogram.self, from: Data(json.utf8))
        var expected = DecayingHistogram()
        expected.add(bucket: 3, weight: 2)
        #expect(decoded.first == 3)
        #expect(decoded.counts == expected.counts)
    }
}
