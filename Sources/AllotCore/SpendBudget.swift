/// A spend budget over a window (SPEC 6, cost governance): three thresholds on the window's spend.
///
/// Thresholds are written like quantities: a number is an absolute amount in the policy currency,
/// `"90%"` is a percentage of `amount`. Defaults: soft 80 %, throttle 90 %, hard 100 %.
/// - `soft`: the *projected* spend crosses it → alert `budget_soft`.
/// - `throttle`: the projected spend crosses it → the tenant's TPM is capped at the rate that lands
///   the window exactly on `amount` (reason `budget`).
/// - `hard`: the spend *so far* reaches it → the tenant is cut to its starvation guard (or zero,
///   per `hardAction`) in both dimensions, the lower of that and a throttled window's cap binding; at
///   zero gateways deny with `budget_exhausted`, at the guard they admit its rate.
public struct SpendBudget: Sendable, Hashable, Codable {
    /// The window the budget renews over.
    public var window: BudgetWindow
    /// The budget, in the policy currency.
    public var amount: Double
    /// Alert threshold.
    public var soft: Quantity
    /// Throttle threshold.
    public var throttle: Quantity
    /// Cut-off threshold.
    public var hard: Quantity
    /// What `hard` cuts to.
    public var hardAction: HardBudgetAction

    public init(
        window: BudgetWindow, amount: Double, soft: Quantity = .percent(80), throttle: Quantity = .percent(90),
        hard: Quantity = .percent(100), hardAction: HardBudgetAction = .starvationGuard
    ) {
        self.window = window
        self.amount = amount
        self.soft = soft
        self.throttle = throttle
        self.hard = hard
        self.hardAction = hardAction
    }

    /// The soft threshold as an amount.
    public var softAmount: Double { soft.resolved(capacity: amount) }
    /// The throttle threshold as an amount.
    public var throttleAmount: Double { throttle.resolved(capacity: amount) }
    /// The hard threshold as an amount.
    public var hardAmount: Double { hard.resolved(capacity: amount) }
}

/// What a tenant is cut to when it reaches a `hard` budget threshold.
public enum HardBudgetAction: String, Sendable, Hashable, Codable, CaseIterable {
    /// Its tier's starvation guard: work trickles, the bill barely moves.
    case starvationGuard = "starvation_guard"
    /// Nothing.
    case zero
}

/// A budget window. Windows are calendar periods in UTC that renew when they end (the hour, the
/// day, the month in progress), so "time left in the window" is well defined for projections.
public enum BudgetWindow: String, Sendable, Hashable, Codable, CaseIterable, Comparable {
    case hour
    case day
    case month

    public static func < (lhs: BudgetWindow, rhs: BudgetWindow) -> Bool {
        lhs.order < rhs.order
    }

    private var order: Int {
        switch self {
        case .hour: 0
        case .day: 1
        case .month: 2
        }
    }

    /// The window containing `now` (seconds since the Unix epoch): `[start, end)`.
    public func interval(containing now: Double) -> (start: Double, end: Double) {
        switch self {
        case .hour:
            let start = (now / 3600).rounded(.down) * 3600
            return (start, start + 3600)
        case .day:
            let start = (now / 86_400).rounded(.down) * 86_400
            return (start, start + 86_400)
        case .month:
            let days = Int64((now / 86_400).rounded(.down))
            let (year, month, _) = BudgetWindow.civil(fromDays: days)
            let start = BudgetWindow.days(year: year, month: month, day: 1)
            let end =
                month == 12
                ? BudgetWindow.days(year: year + 1, month: 1, day: 1)
                : BudgetWindow.days(year: year, month: month + 1, day: 1)
            return (Double(start) * 86_400, Double(end) * 86_400)
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
    static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let monthIndex = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * monthIndex + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// The date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
    static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
