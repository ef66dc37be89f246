import Foundation

/// How the loop encodes estimator and engine state for its checkpoint (`loop_checkpoint`).
///
/// JSON through Foundation's coders: the states are `Codable` values owned by their actors, and a
/// checkpoint is written every few ticks off the tick's path, so the control-plane convenience is
/// affordable (measured by `LoopBenchmark.checkpoint`). ``format`` is stored with the blobs: a
/// binary that does not know it starts blind instead of misreading.
public enum StateCodec {
    /// The checkpoint format this binary writes and reads.
    public static let format = 1

    /// Encodes a state.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return Array(try encoder.encode(value))
    }

    /// Decodes a state, naming the component on failure.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], component: String)
        throws(LoopStateError) -> T
    {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        do {
            return try decoder.decode(T.self, from: Data(bytes))
        } catch {
            throw LoopStateError(component: component, message: "cannot decode the saved state: \(error)")
        }
    }
}
