/// Little-endian writer for the loop's own persisted formats (slice plans, stored snapshots).
///
/// Values are stored at a cursor into a zero-filled buffer grown ahead by doubling, then
/// ``finish()`` trims it: appending each value's bytes with `Array.append(contentsOf:)` cost
/// about 100 instructions per value, and a tick writes a third of a million of them.
struct BinaryWriter {
    private var buffer: [UInt8]
    /// Bytes written.
    private(set) var count = 0

    init(capacity: Int) {
        buffer = [UInt8](repeating: 0, count: max(16, capacity))
    }

    /// The bytes written; the writer is left empty.
    mutating func finish() -> [UInt8] {
        buffer.removeLast(buffer.count - count)
        defer {
            buffer = []
            count = 0
        }
        return buffer
    }

    @inline(__always)
    private mutating func room(_ size: Int) {
        if count + size > buffer.count {
            buffer.append(contentsOf: repeatElement(0, count: max(size, buffer.count)))
        }
    }

    @inline(__always)
    private mutating func store<T: FixedWidthInteger>(_ value: T) {
        room(MemoryLayout<T>.size)
        let offset = count
        buffer.withUnsafeMutableBytes { $0.storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self) }
        count += MemoryLayout<T>.size
    }

    mutating func bytes(_ bytes: [UInt8]) {
        room(bytes.count)
        let offset = count
        buffer.withUnsafeMutableBytes { target in
            bytes.withUnsafeBytes { source in
                guard let base = source.baseAddress, !source.isEmpty else { return }
                (target.baseAddress! + offset).copyMemory(from: base, byteCount: source.count)
            }
        }
        count += bytes.count
    }

    mutating func uint8(_ value: UInt8) { store(value) }

    mutating func uint32(_ value: UInt32) { store(value) }

    mutating func int32(_ value: Int32) { uint32(UInt32(bitPattern: value)) }

    mutating func double(_ value: Double) { store(value.bitPattern) }

    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8)
        uint32(UInt32(utf8.count))
        bytes(utf8)
    }
}

/// Reads what ``BinaryWriter`` wrote, checking every length against what is left, so damaged or
/// truncated bytes give a ``LoopStateError`` instead of a trap or a huge allocation.
struct BinaryReader {
    private let input: [UInt8]
    private var offset = 0

    init(_ input: [UInt8]) {
        self.input = input
    }

    var isAtEnd: Bool { offset == input.count }

    mutating func bytes(count: Int) throws(LoopStateError) -> [UInt8] {
        guard count >= 0, input.count - offset >= count else { throw truncated() }
        defer { offset += count }
        return Array(input[offset..<(offset + count)])
    }

    mutating func uint8() throws(LoopStateError) -> UInt8 {
        guard offset < input.count else { throw truncated() }
        defer { offset += 1 }
        return input[offset]
    }

    mutating func uint32() throws(LoopStateError) -> UInt32 {
        guard input.count - offset >= 4 else { throw truncated() }
        var value: UInt32 = 0
        for shift in 0..<4 { value |= UInt32(input[offset + shift]) << (8 * UInt32(shift)) }
        offset += 4
        return value
    }

    mutating func int32() throws(LoopStateError) -> Int32 { Int32(bitPattern: try uint32()) }

    mutating func double() throws(LoopStateError) -> Double {
        guard input.count - offset >= 8 else { throw truncated() }
        var bits: UInt64 = 0
        for shift in 0..<8 { bits |= UInt64(input[offset + shift]) << (8 * UInt64(shift)) }
        offset += 8
        return Double(bitPattern: bits)
    }

    mutating func string() throws(LoopStateError) -> String {
        let count = Int(try uint32())
        return String(decoding: try bytes(count: count), as: UTF8.self)
    }

    /// A count of elements of at least `elementSize` bytes each: refused when the rest of the
    /// input could not hold that many.
    mutating func count(elementSize: Int) throws(LoopStateError) -> Int {
        let count = Int(try uint32())
        guard count <= (input.count - offset) / max(1, elementSize) else { throw truncated() }
        return count
    }

    private func truncated() -> LoopStateError {
        LoopStateError(component: "binary data", message: "truncated at byte \(offset) of \(input.count)")
    }
}

/// Persisted loop state (a checkpoint, a slice plan, a snapshot document) that could not be read
/// or written. The loop then starts that component blind rather than trusting damaged state.
public struct LoopStateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which part: `observer`, `classifier`, `engine`, `slice plan`, `snapshot`, …
    public var component: String
    public var message: String

    public init(component: String, message: String) {
        self.component = component
        self.message = message
    }

    public var description: String { "\(component): \(message)" }
}

/// Numbers in alert messages: whole numbers without decimals, others with at most two.
func formatted(_ value: Double) -> String {
    guard value.isFinite else { return value > 0 ? "unlimited" : "0" }
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    let scaled = (value * 100).rounded() / 100
    return String(scaled)
}
