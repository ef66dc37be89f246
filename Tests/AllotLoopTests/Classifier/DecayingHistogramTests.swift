import Foundation
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: decaying histograms")
struct DecayingHistogramTests {
    /// Samples spread over the scale, in a random order of buckets, with growing weights.
    static func samples(seed: UInt64) -> [(bucket: Int, weight: Float)] {
        var state = seed
        func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
        let center = 20 + next(100)
        return (0..<200).map { index in
            (max(0, min(LogLinearScale.compact.count - 1, center + next(30) - 15)), Float(1 + index / 20))
        }
    }

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func quantilesAreThoseOfTheWholeScale(seed: UInt64) throws {
        var histogram = DecayingHistogram()
        var whole = [Float](repeating: 0, count: LogLinearScale.compact.count)
        for (step, sample) in Self.samples(seed: seed).enumerated() {
            histogram.add(bucket: sample.bucket, weight: sample.weight)
            whole[sample.bucket] += sample.weight
            if step == 120 {
                histogram.rescale(1e-3)
                for index in whole.indices { whole[index] *= 1e-3 }
            }
        }
        for integral in [true, false] {
            var refreshed = histogram
            refreshed.refresh(integral: integral, now: 0)
            let total = whole.reduce(0.0) { $0 + Double($1) }
            let scale = LogLinearScale.compact
            #expect(refreshed.p50 == scale.quantile(0.5, of: whole, total: total, integral: integral))
            #expect(refreshed.p95 == scale.quantile(0.95, of: whole, total: total, integral: integral))
        }
    }

    /// Decayed weights are fractional: one sample of weight 1.5 is every quantile, not the scale's top (outside
    /// evaluation round 32: a new tenant's p95 read 2,031,615.5 tokens while every call made 5); nor is a total
    /// below 1.
    @Test func aFractionalTotalIsRankedWithinItself() throws {
        let scale = LogLinearScale.compact
        let five = scale.representative(of: scale.bucket(of: 5), integral: true)
        for weights in [[1.5], [0.3], [1.25, 0.5], [2.9]] as [[Float]] {
            var histogram = DecayingHistogram()
            for weight in weights { histogram.add(5, weight: weight) }
            histogram.refresh(integral: true, now: 0)
            #expect(histogram.p50 == five, "\(weights)")
            #expect(histogram.p95 == five, "\(weights)")
        }
        // Two buckets: 0.95 of 1.5 is in the second (weight 1 then 0.5), never beyond it.
        var two = DecayingHistogram()
        two.add(5, weight: 1)
        two.add(40, weight: 0.5)
        two.refresh(integral: true, now: 0)
        #expect(two.p50 == five)
        #expect(two.p95 == scale.representative(of: scale.bucket(of: 40), integral: true))
        var whole = [Float](repeating: 0, count: scale.count)
        whole[scale.bucket(of: 5)] = 1.5
        #expect(scale.quantile(0.95, of: whole, total: 1.5, integral: true) == five)
        #expect(scale.quantile(0.99, of: [0, 0.2, 0.3, 0] as [Double], total: 0.5, integral: true)
            == scale.representative(of: 2, integral: true))
    }

    @Test func storedRangeDoesNotMatterToEqualityOrPersistence() throws {
        var histogram = DecayingHistogram()
        histogram.add(bucket: 40, weight: 1e-30)
        histogram.add(bucket: 60, weight: 3)
        histogram.rescale(1e-20)  // bucket 40 underflows to 0: the range still starts there
        histogram.refresh(integral: true, now: 10)
        let decoded = try JSONDecoder().decode(DecayingHistogram.self, from: JSONEncoder().encode(histogram))
        #expect(decoded == histogram)
        #expect(decoded.hashValue == histogram.hashValue)
        #expect(decoded.counts.count < histogram.counts.count)

        var empty = DecayingHistogram()
        empty.refresh(integral: true, now: 10)
        #expect(empty.p50 == nil)
        #expect(try JSONDecoder().decode(DecayingHistogram.self, from: JSONEncoder().encode(empty)) == empty)
    }
}
