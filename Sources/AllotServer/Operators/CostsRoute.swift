import AllotCore
import AllotHTTP
import AllotJSON
import AllotStore
import AllotTime

/// `GET /v1/costs?from=&to=&group_by=tenant|upstream|task_class` (SPEC 6, cost governance:
/// showback). Usage comes from the per-minute rollups, priced with the policy's price table;
/// usage on an upstream without a price is charged at the default price and marked
/// `priced: false` (an unknown model is never free). Grouped by tenant, each row carries the
/// tenant's budgets with spend so far and projection from the loop's last decision.
///
/// JSON by default; CSV with `Accept: text/csv` (or `format=csv`).
struct CostsRoute: Sendable {
    let console: OperatorConsole

    struct Row {
        var key: String
        var requests: Int64 = 0
        var promptTokens: Int64 = 0
        var completionTokens: Int64 = 0
        var cost: Double = 0
        var unpricedCost: Double = 0
        var priced = true
    }

    func costs(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(request, allowed: ["from", "to", "group_by", "tenant", "format"])
        let now = console.clock.now
        let to = try query.time("to") ?? now
        let from = try query.time("from") ?? (to - 86_400)
        guard from < to else {
            throw HTTPError.badRequest("from must be before to", code: "invalid_parameter", field: "from")
        }
        guard to - from <= 400 * 86_400 else {
            throw HTTPError.badRequest("the range is at most 400 days", code: "invalid_parameter", field: "from")
        }
        let groupBy = try query.choice("group_by", ["tenant", "upstream", "task_class"]) ?? "tenant"
        let format = try query.choice("format", ["json", "csv"])
        let wantsCSV = format == "csv" || (format == nil && Self.accepts(csv: request.headers["Accept"]))
        let tenant = query.string("tenant")
        let totals: [UsageTotal]
        do {
            totals = try await console.telemetry.usage(
                fromMs: EpochTime.milliseconds(fromSeconds: from), toMs: EpochTime.milliseconds(fromSeconds: to),
                tenant: tenant)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        let policy = console.policy().policy
        var rows: [String: Row] = [:]
        var total = Row(key: "total")
        for usage in totals {
            let key: String
            switch groupBy {
            case "upstream": key = usage.upstream
            case "task_class": key = usage.taskClass.rawValue
            default: key = usage.tenant
            }
            let counters = usage.counters
            // What the provider bills: served calls, counted and priced as the spend budgets count them.
            let (amount, priced) = usage.servedCost(policy: policy)
            func add(to row: inout Row) {
                row.requests += counters.ok
                row.promptTokens += counters.servedPromptTokens
                row.completionTokens += counters.servedCompletionTokens
                row.cost += amount
                if !priced {
                    row.priced = false
                    row.unpricedCost += amount
                }
            }
            add(to: &rows[key, default: Row(key: key)])
            add(to: &total)
        }
        let ordered = rows.values.sorted { ($0.cost, $1.key) > ($1.cost, $0.key) }
        var budgets: [String: [BudgetStatus]] = [:]
        if groupBy == "tenant" {
            for status in console.view?.decision?.budgets ?? [] { budgets[status.tenant, default: []].append(status) }
        }
        let currency = policy.costs.currency
        if wantsCSV {
            return HTTPResponse(
                status: .ok,
                headers: [
                    "Content-Type": "text/csv; charset=utf-8",
                    "Content-Disposition": "attachment; filename=\"allot-costs-\(groupBy).csv\"",
                ],
                body: Array(
                    Self.csv(
                        ordered, groupBy: groupBy, currency: currency, budgets: budgets, policy: policy
                    ).utf8))
        }
        let json: [JSON] = ordered.map { row in
            var object = Self.json(row, currency: currency)
            object[groupBy] = .string(row.key)
            if groupBy == "tenant" {
                object["tier"] = .string(policy.tierName(ofTenant: row.key))
                object["budgets"] = .array((budgets[row.key] ?? []).map(OperatorJSON.budget))
            }
            return .object(object)
        }
        var totalJSON = Self.json(total, currency: currency)
        totalJSON["groups"] = .int(Int64(ordered.count))
        return .json([
            "from": OperatorJSON.time(from), "to": OperatorJSON.time(to), "group_by": .string(groupBy),
            "currency": .string(currency), "rows": .array(json), "total": .object(totalJSON),
            "generated_at": OperatorJSON.time(now),
        ])
    }

    static func json(_ row: Row, currency: String) -> JSONObject {
        [
            "requests": .int(row.requests), "prompt_tokens": .int(row.promptTokens),
            "completion_tokens": .int(row.completionTokens), "cost": OperatorJSON.number(Self.rounded(row.cost)),
            "unpriced_cost": OperatorJSON.number(Self.rounded(row.unpricedCost)), "priced": .bool(row.priced),
            "currency": .string(currency),
        ]
    }

    /// Costs to a millionth of the currency unit: enough for per-call showback, no float noise.
    static func rounded(_ value: Double) -> Double { (value * 1_000_000).rounded() / 1_000_000 }

    static func accepts(csv header: String?) -> Bool {
        guard let header else { return false }
        return header.split(separator: ",").contains { part in
            part.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "text/csv"
        }
    }

    /// RFC 4180 CSV, header first. Grouped by tenant, the budget columns show the budget closest to
    /// (or furthest past) its amount.
    static func csv(
        _ rows: [Row], groupBy: String, currency: String, budgets: [String: [BudgetStatus]], policy: Policy
    ) -> String {
        var header = [groupBy, "requests", "prompt_tokens", "completion_tokens", "cost", "currency", "priced"]
        if groupBy == "tenant" {
            header += ["tier", "budget_window", "budget_amount", "budget_spent", "budget_projected", "budget_level"]
        }
        var lines = [header.joined(separator: ",")]
        for row in rows {
            var fields = [
                field(row.key), String(row.requests), String(row.promptTokens), String(row.completionTokens),
                String(rounded(row.cost)), field(currency), row.priced ? "true" : "false",
            ]
            if groupBy == "tenant" {
                fields.append(field(policy.tierName(ofTenant: row.key)))
                let worst = (budgets[row.key] ?? []).max { lhs, rhs in
                    (lhs.level, lhs.spent / max(lhs.budget.amount, 1e-9))
                        < (rhs.level, rhs.spent / max(rhs.budget.amount, 1e-9))
                }
                if let worst {
                    fields += [
                        worst.budget.window.rawValue, String(rounded(worst.budget.amount)),
                        String(rounded(worst.spent)),
                        String(rounded(worst.projected)), worst.level.rawValue,
                    ]
                } else {
                    fields += ["", "", "", "", ""]
                }
            }
            lines.append(fields.joined(separator: ","))
        }
        return lines.joined(separator: "\r\n") + "\r\n"
    }

    /// Quotes a field when it holds a comma, quote or line break (RFC 4180), and defuses leading
    /// `=`, `+`, `-`, `@` so a spreadsheet does not run it as a formula.
    static func field(_ text: String) -> String {
        var value = text
        if let first = value.first, "=+-@".contains(first) { value = "'" + value }
        guard value.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
