import Testing

@testable import AllotJSON

@Suite struct JSONWriterTests {
    @Test func serializesCompactlyInStoredOrder() {
        let value: JSON = ["b": [1, 2.5, "x", nil, true], "a": ["nested": false]]
        #expect(value.serializedString() == #"{"b":[1,2.5,"x",null,true],"a":{"nested":false}}"#)
        #expect(value.serializedString(sortedKeys: true) == #"{"a":{"nested":false},"b":[1,2.5,"x",null,true]}"#)
    }

    @Test func writesNumbersInShortestForm() {
        #expect(JSON.double(300).serializedString() == "300.0")
        #expect(JSON.double(0.1).serializedString() == "0.1")
        #expect(JSON.double(1e-5).serializedString() == "1e-05")
        #expect(JSON.double(1e20).serializedString() == "1e+20")
        #expect(JSON.double(.infinity).serializedString() == "null")
        #expect(JSON.double(.nan).serializedString() == "null")
        #expect(JSON.int(Int64.min).serializedString() == "-9223372036854775808")
        #expect(JSON.int(Int64.max).serializedString() == "9223372036854775807")
        #expect(JSON.int(0).serializedString() == "0")
        #expect(JSON.int(-7).serializedString() == "-7")
    }

    @Test func escapesStrings() {
        let value = JSON.string("q\"b\\n\n\r\t\u{8}\u{c}\u{1}\u{1f}é😀")
        #expect(value.serializedString() == #""q\"b\\n\n\r\t\b\f\u0001\u001fé😀""#)
    }

    @Test func writerPlacesCommas() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("version", Int64(42))
        writer.key("tenants")
        writer.beginArray()
        writer.beginObject()
        writer.field("id", "acme")
        writer.field("rate", 120.0)
        writer.field("credit", nil as Double?)
        writer.endObject()
        writer.value("x")
        writer.raw(Array("{\"pre\":1}".utf8))
        writer.endArray()
        writer.key("empty")
        writer.beginArray()
        writer.endArray()
        writer.field("ok", true)
        writer.field("tree", ["k": [1]])
        writer.endObject()
        #expect(
            writer.string
                == #"{"version":42,"tenants":[{"id":"acme","rate":120.0,"credit":null},"x",{"pre":1}],"empty":[],"ok":true,"tree":{"k":[1]}}"#
        )
    }

    @Test func prettyPrints() {
        let value: JSON = ["a": [1, []], "b": [:]]
        #expect(value.serializedString(pretty: true) == "{\n  \"a\": [\n    1,\n    []\n  ],\n  \"b\": {}\n}")
    }

    @Test func objectMutationKeepsOrder() {
        var object: JSONObject = ["a": 1, "b": 2, "c": 3]
        object["b"] = nil
        object["d"] = 4
        object["a"] = 9
        #expect(object.keys == ["a", "c", "d"])
        #expect(Array(object.map(\.key)) == ["a", "c", "d"])
        #expect(object == ["d": 4, "c": 3, "a": 9])
        #expect(object.hashValue == JSONObject(["d": 4, "c": 3, "a": 9].sorted { $0.key < $1.key }).hashValue)
    }

    @Test func codableBridgeRoundTrips() throws {
        struct Holder: Codable, Equatable { var payload: JSON }
        let holder = Holder(payload: ["n": 1, "s": "x", "a": [true, nil, 2.5]])
        let encoded = try JSONEncoderShim.encode(holder)
        let decoded = try JSONEncoderShim.decode(Holder.self, from: encoded)
        #expect(decoded == holder)
    }
}

import Foundation

enum JSONEncoderShim {
    static func encode<T: Encodable>(_ value: T) throws -> Data { try JSONEncoder().encode(value) }
    static func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T { try JSONDecoder().decode(type, from: data) }
}
