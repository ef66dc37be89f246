import Testing

@testable import AllotCore

@Suite("StableHash: FNV-1a 64 and its avalanche")
struct StableHashTests {
    @Test func matchesTheReferenceVectors() {
        // The FNV reference's test vectors for FNV-1a 64.
        #expect(StableHash().value == 0xCBF2_9CE4_8422_2325)
        var a = StableHash()
        a.add("a")
        #expect(a.value == 0xAF63_DC4C_8601_EC8C)
        var foobar = StableHash()
        foobar.add("foobar")
        #expect(foobar.value == 0x8594_4171_F739_67E8)
        #expect(foobar.hex == "85944171f73967e8")
        // Bytes and text hash alike.
        var bytes = StableHash()
        for byte in "foobar".utf8 { bytes.add(byte) }
        #expect(bytes.value == foobar.value)
    }

    @Test func theAvalancheIsFixed() {
        // Task hashes are checkpointed and tenants' gateway tilts derive from it: it must not change.
        var hash = StableHash()
        hash.add("acme")
        #expect(hash.mixed == 0x3C6D_1E94_F3A7_58BC)
    }
}
