/// How the loop encodes estimator and engine state for its checkpoint (`loop_checkpoint`).
///
/// The states are `Codable` values owned by their actors; ``BinaryStateCoder`` writes them in one
/// streaming pass (Foundation's `JSONEncoder` took 5 s and hundreds of megabytes for the state of
/// 10,000 tenants: `LoopBenchmark` measures both). ``format`` is stored with the blobs: a binary that
/// does not know it starts blind instead of misreading.
public enum StateCodec {
    /// The checkpoint format this binary writes and reads: 2, ``BinaryStateCoder``.
    public static let format = 2

    /// Encodes a state.
    public static func encode(_ value: some Encodable) throws -> [UInt8] {
        try BinaryStateCoder.encode(value)
    }

    /// Decodes a state, naming the component on failure.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8], component: String)
        throws(LoopStateError) -> T
    {
        do {
            return try BinaryStateCoder.decode(T.self, from: bytes)
        } catch {
            throw LoopStateError(component: component, message: "cannot decode the saved state: \(error)")
        }
    }
}
