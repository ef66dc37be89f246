/// Gateway ids as telemetry's `gateway` and a snapshot poll's `?gateway=` take them (SPEC 3, 7), and the instance
/// ids a gateway's polls name (`instance=`): 1–128 characters of `[A-Za-z0-9._:/-]`. The one check the server's
/// routes, the token scopes and the enforcement library share.
public enum GatewayIdentifier {
    public static let maxLength = 128
    public static let charset = "[A-Za-z0-9._:/-]"

    public static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "/"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}
