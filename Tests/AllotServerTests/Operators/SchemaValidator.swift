import AllotJSON
import AllotTime
import Foundation

/// The subset of JSON Schema 2020-12 the OpenAPI document uses: `$ref` (local), `type` (one or a
/// list), `properties`, `required`, `additionalProperties`, `items`, `enum`, `const`, `anyOf`,
/// `allOf`, `oneOf`, `minimum`, `maximum`, `exclusiveMinimum`, `minLength`, `pattern` and
/// `format: date-time`. Returns every violation with its JSON path, so a failing test says where.
struct SchemaValidator {
    let document: JSON

    func validate(_ value: JSON, against schema: JSON, at path: String = "$") -> [String] {
        guard case .object(let rules) = schema else { return [] }
        if let reference = rules["$ref"]?.stringValue {
            guard let target = resolve(reference) else { return ["\(path): unresolvable \(reference)"] }
            return validate(value, against: target, at: path)
        }
        var problems: [String] = []
        if let types = rules["type"] {
            let allowed = types.arrayValue?.compactMap(\.stringValue) ?? [types.stringValue ?? ""]
            guard allowed.contains(where: { Self.matches(value, type: $0) }) else {
                return ["\(path): \(value.typeName) is not \(allowed.joined(separator: "|"))"]
            }
        }
        if let choices = rules["enum"]?.arrayValue, !choices.contains(value) {
            problems.append(
                "\(path): \(value.serializedString()) is not one of \(JSON.array(choices).serializedString())")
        }
        if let constant = rules["const"], constant != value {
            problems.append("\(path): \(value.serializedString()) is not \(constant.serializedString())")
        }
        if let all = rules["allOf"]?.arrayValue {
            for part in all { problems += validate(value, against: part, at: path) }
        }
        if let any = rules["anyOf"]?.arrayValue,
            !any.contains(where: { validate(value, against: $0, at: path).isEmpty })
        {
            problems.append("\(path): matches none of anyOf")
        }
        if let one = rules["oneOf"]?.arrayValue,
            one.filter({ validate(value, against: $0, at: path).isEmpty }).count != 1
        {
            problems.append("\(path): does not match exactly one of oneOf")
        }
        if let number = value.doubleValue, !value.isBool {
            if let minimum = rules["minimum"]?.doubleValue, number < minimum {
                problems.append("\(path): below \(minimum)")
            }
            if let maximum = rules["maximum"]?.doubleValue, number > maximum {
                problems.append("\(path): above \(maximum)")
            }
            if let bound = rules["exclusiveMinimum"]?.doubleValue, number <= bound {
                problems.append("\(path): not above \(bound)")
            }
        }
        if let text = value.stringValue {
            if let minimum = rules["minLength"]?.intValue, text.count < minimum {
                problems.append("\(path): too short")
            }
            if let pattern = rules["pattern"]?.stringValue,
                text.range(of: pattern, options: .regularExpression) == nil
            {
                problems.append("\(path): '\(text)' does not match \(pattern)")
            }
            if rules["format"]?.stringValue == "date-time", RFC3339.parse(text) == nil {
                problems.append("\(path): '\(text)' is not an RFC 3339 date-time")
            }
        }
        if case .object(let object) = value {
            let properties = rules["properties"]?.objectValue ?? JSONObject()
            for name in rules["required"]?.arrayValue?.compactMap(\.stringValue) ?? [] where object[name] == nil {
                problems.append("\(path): missing required \(name)")
            }
            for (key, member) in object {
                if let property = properties[key] {
                    problems += validate(member, against: property, at: "\(path).\(key)")
                } else if let additional = rules["additionalProperties"] {
                    if additional == .bool(false) {
                        problems.append("\(path): unexpected property \(key)")
                    } else if additional.objectValue != nil {
                        problems += validate(member, against: additional, at: "\(path).\(key)")
                    }
                }
            }
        }
        if case .array(let items) = value, let schema = rules["items"] {
            for (index, item) in items.enumerated() {
                problems += validate(item, against: schema, at: "\(path)[\(index)]")
            }
        }
        return problems
    }

    func resolve(_ reference: String) -> JSON? {
        guard reference.hasPrefix("#/") else { return nil }
        var node: JSON? = document
        for part in reference.dropFirst(2).split(separator: "/") { node = node?[String(part)] }
        return node
    }

    static func matches(_ value: JSON, type: String) -> Bool {
        switch (type, value) {
        case ("null", .null), ("boolean", .bool), ("string", .string), ("array", .array), ("object", .object): true
        case ("number", .int), ("number", .double), ("integer", .int): true
        case ("integer", .double(let number)): number == number.rounded()
        default: false
        }
    }
}

extension JSON {
    var isBool: Bool {
        if case .bool = self { return true }
        return false
    }
}
