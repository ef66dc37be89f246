/// An HTTP request method (RFC 9110 §9). Any token is a valid method; the common ones are constants.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible,
    ExpressibleByStringLiteral
{
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }

    public static let get = HTTPMethod("GET")
    public static let head = HTTPMethod("HEAD")
    public static let post = HTTPMethod("POST")
    public static let put = HTTPMethod("PUT")
    public static let delete = HTTPMethod("DELETE")
    public static let patch = HTTPMethod("PATCH")
    public static let options = HTTPMethod("OPTIONS")

    public var description: String { rawValue }
    public static func < (lhs: HTTPMethod, rhs: HTTPMethod) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Methods a client may safely retry on a fresh connection (RFC 9110 §9.2.2).
    var isIdempotent: Bool {
        switch rawValue {
        case "GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE": true
        default: false
        }
    }

    /// Builds the method from request-line bytes, reusing the constants' storage for the common ones.
    static func from(_ bytes: UnsafeBufferPointer<UInt8>) -> HTTPMethod {
        switch bytes.count {
        case 3 where bytes[0] == 0x47 && bytes[1] == 0x45 && bytes[2] == 0x54: return .get
        case 3 where bytes[0] == 0x50 && bytes[1] == 0x55 && bytes[2] == 0x54: return .put
        case 4 where bytes[0] == 0x50 && bytes[1] == 0x4F && bytes[2] == 0x53 && bytes[3] == 0x54: return .post
        case 4 where bytes[0] == 0x48 && bytes[1] == 0x45 && bytes[2] == 0x41 && bytes[3] == 0x44: return .head
        default: return HTTPMethod(String(decoding: bytes, as: UTF8.self))
        }
    }
}

/// The HTTP version of a request: 1.0 or 1.1 (anything else is answered 505 before it gets here).
public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }

    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)

    public var description: String { "HTTP/\(major).\(minor)" }
}
