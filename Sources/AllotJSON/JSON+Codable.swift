/// A bridge to `Codable` for control-plane code where speed does not matter (for example,
/// embedding a `JSON` value inside a `Codable` type persisted as estimator state).
extension JSON: Codable {
    public init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            var elements: [JSON] = []
            while !array.isAtEnd { elements.append(try array.decode(JSON.self)) }
            self = .array(elements)
            return
        }
        if let keyed = try? decoder.container(keyedBy: AnyCodingKey.self) {
            var object = JSONObject()
            for key in keyed.allKeys.sorted(by: { $0.stringValue < $1.stringValue }) {
                object[key.stringValue] = try keyed.decode(JSON.self, forKey: key)
            }
            self = .object(object)
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() {
            self = .null
        } else if let flag = try? single.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? single.decode(Int64.self) {
            self = .int(integer)
        } else if let number = try? single.decode(Double.self) {
            self = .double(number)
        } else {
            self = .string(try single.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        switch self {
        case .null:
            var single = encoder.singleValueContainer()
            try single.encodeNil()
        case .bool(let flag):
            var single = encoder.singleValueContainer()
            try single.encode(flag)
        case .int(let number):
            var single = encoder.singleValueContainer()
            try single.encode(number)
        case .double(let number):
            var single = encoder.singleValueContainer()
            try single.encode(number)
        case .string(let string):
            var single = encoder.singleValueContainer()
            try single.encode(string)
        case .array(let array):
            var unkeyed = encoder.unkeyedContainer()
            for element in array { try unkeyed.encode(element) }
        case .object(let object):
            var keyed = encoder.container(keyedBy: AnyCodingKey.self)
            for (key, value) in object { try keyed.encode(value, forKey: AnyCodingKey(stringValue: key)) }
        }
    }
}

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int?

    init(stringValue: String) {
        self.stringValue = stringValue
        intValue = nil
    }

    init?(intValue: Int) {
        stringValue = String(intValue)
        self.intValue = intValue
    }
}
