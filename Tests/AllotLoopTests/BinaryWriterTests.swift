import Testing

@testable import AllotLoop

@Suite("Binary writer and reader (stored snapshots, slice plans)")
struct BinaryWriterTests {
    @Test func littleEndianLayoutAndGrowthPastTheInitialCapacity() throws {
        var writer = BinaryWriter(capacity: 4)
        writer.bytes([0xAA, 0xBB])
        writer.uint8(7)
        writer.uint32(0x0102_0304)
        writer.int32(-2)
        writer.double(1.5)
        writer.string("gw-1")
        for index in 0..<1_000 { writer.uint32(UInt32(index)) }
        #expect(writer.count == 2 + 1 + 4 + 4 + 8 + 4 + 4 + 4_000)
        let bytes = writer.finish()
        #expect(bytes.count == 4_027)
        #expect(Array(bytes.prefix(11)) == [0xAA, 0xBB, 7, 4, 3, 2, 1, 0xFE, 0xFF, 0xFF, 0xFF])
        #expect(Array(bytes[11..<19]) == withUnsafeBytes(of: (1.5).bitPattern.littleEndian) { Array($0) })
        #expect(Array(bytes[19..<27]) == [4, 0, 0, 0] + Array("gw-1".utf8))

        var reader = BinaryReader(bytes)
        #expect(try reader.bytes(count: 2) == [0xAA, 0xBB])
        #expect(try reader.uint8() == 7)
        #expect(try reader.uint32() == 0x0102_0304)
        #expect(try reader.int32() == -2)
        #expect(try reader.double() == 1.5)
        #expect(try reader.string() == "gw-1")
        for index in 0..<1_000 { #expect(try reader.uint32() == UInt32(index)) }
        #expect(reader.isAtEnd)
    }
}
